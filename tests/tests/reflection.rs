//! Issue 9, gRPC reflection: a real node and a real witness answer both `grpc.reflection.v1` and
//! `grpc.reflection.v1alpha` (grpcurl asks v1 first; grpcio and older tools only v1alpha), and each
//! lists exactly the services it serves — the node no longer lists the witness's services, the
//! witness not the node's — and resolves each listed service's descriptor.

use accord_tests::{TestNode, TestWitness};
use std::collections::BTreeSet;
use tonic::transport::Channel;

const NODE: &[&str] = &[
    "accord.admin.v1.AdminService",
    "accord.federation.v1.FederationService",
    "accord.log.v1.LogService",
    "accord.run.v1.RunService",
    "accord.envelope.v1.EnvelopeService",
    "accord.work.v1.WorkService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

const WITNESS: &[&str] = &[
    "accord.witness.v1.WitnessAdminService",
    "accord.witness.v1.WitnessService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// Defines `$name(ch)`: lists services with reflection version `$v`, then asks for each one's
/// file descriptor; returns the listed names. One body for both versions, whose generated types
/// differ only in their module.
macro_rules! list_and_resolve {
    ($name:ident, $v:ident) => {
        async fn $name(ch: Channel) -> BTreeSet<String> {
            use tonic_reflection::pb::$v::{
                ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
                server_reflection_request::MessageRequest,
                server_reflection_response::MessageResponse,
            };
            let v = stringify!($v);
            let mut c = ServerReflectionClient::new(ch);
            let ask = |m: MessageRequest| ServerReflectionRequest {
                host: String::new(),
                message_request: Some(m),
            };
            let mut s = c
                .server_reflection_info(tokio_stream::iter(vec![ask(
                    MessageRequest::ListServices(String::new()),
                )]))
                .await
                .unwrap()
                .into_inner();
            let Some(MessageResponse::ListServicesResponse(list)) =
                s.message().await.unwrap().unwrap().message_response
            else {
                panic!("{v}: not a list answer")
            };
            let names: BTreeSet<String> = list.service.into_iter().map(|s| s.name).collect();
            for n in &names {
                let mut s = c
                    .server_reflection_info(tokio_stream::iter(vec![ask(
                        MessageRequest::FileContainingSymbol(n.clone()),
                    )]))
                    .await
                    .unwrap()
                    .into_inner();
                match s.message().await.unwrap().unwrap().message_response {
                    Some(MessageResponse::FileDescriptorResponse(f)) => {
                        assert!(
                            !f.file_descriptor_proto.is_empty(),
                            "{v}: {n}: no descriptor"
                        )
                    }
                    other => panic!("{v}: {n} does not resolve: {other:?}"),
                }
            }
            names
        }
    };
}

list_and_resolve!(v1, v1);
list_and_resolve!(v1alpha, v1alpha);

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn node_lists_exactly_its_services_in_both_versions() {
    let node = TestNode::builder("acme").start().await.unwrap();
    let ch = node.channel().await.unwrap();
    assert_eq!(v1(ch.clone()).await, set(NODE));
    assert_eq!(v1alpha(ch).await, set(NODE));
}

#[tokio::test(flavor = "multi_thread")]
async fn witness_lists_exactly_its_services_in_both_versions() {
    let w = TestWitness::start(
        "w.example",
        "acme.accord/log",
        &TestNode::builder("acme").init().unwrap().vkey(),
    )
    .await
    .unwrap();
    let ch = w.channel().await.unwrap();
    assert_eq!(v1(ch.clone()).await, set(WITNESS));
    assert_eq!(v1alpha(ch).await, set(WITNESS));
}
