//! Issue 8, "Input bounds": identifiers out of bounds are refused with InvalidArgument naming
//! the field, in Submit, Declare, federation, AdminService.AddPeer, `accordctl admin peer add`
//! and the config — nothing is recorded, and errors never echo large inputs.

use crate::bounds_common;
use crate::federation_common;

use accord_proto::pb::admin::v1 as admin;
use accord_proto::pb::record::v1::Record;
use accord_proto::pb::work::v1 as work;
use accord_proto::signing;
use accord_tests::TestNode;
use bounds_common::{details, ledger_size};
use federation_common::*;

/// Records by `org/alice` with one bad identifier each, and the field the error must name
/// (below `record.`).
fn bad_records(org: &str) -> Vec<(&'static str, Record, &'static str)> {
    let bob = |name: &str| party("globex", name);
    vec![
        (
            "a 1 MB commitment id",
            request(org, "alice", &"c".repeat(1 << 20), bob("bob")),
            "payload.commitment_id",
        ),
        (
            "a party name with a newline",
            request(org, "alice", "nl-1", bob("bo\nb")),
            "payload.operation.request.candidate.name",
        ),
        (
            "a party name with NUL",
            request(org, "alice", "nul-1", bob("bo\0b")),
            "payload.operation.request.candidate.name",
        ),
        (
            "an empty organisation",
            request(org, "alice", "empty-1", party("", "bob")),
            "payload.operation.request.candidate.organisation",
        ),
        (
            "a party named ..",
            request(org, "alice", "dots-1", bob("..")),
            "payload.operation.request.candidate.name",
        ),
        (
            "a commitment id with an empty part",
            request(org, "alice", "a//b", bob("bob")),
            "payload.commitment_id",
        ),
    ]
}

fn check(what: &str, e: &tonic::Status, field: &str) {
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{what}: {e}");
    let (_, f) = details(e);
    assert!(
        f.ends_with(field),
        "{what}: accord-field {f:?}, want …{field}"
    );
    assert!(
        e.message().len() < 1024,
        "{what}: {} byte message",
        e.message().len()
    );
}

fn with_token<T>(node: &TestNode, party: &str, t: T) -> tonic::Request<T> {
    accord_tests::with_token(t, &node.party_token(party))
}

#[tokio::test(flavor = "multi_thread")]
async fn submit_and_declare_refuse_bad_identifiers() {
    let n = TestNode::builder("acme")
        .party("alice")
        .start()
        .await
        .unwrap();
    let alice = signer(&n, "alice");
    let before = ledger_size(&n).await;
    let mut w = work(&n).await;
    for (what, r, field) in bad_records("acme") {
        let signed = signing::sign_record(&alice, &r);
        let e = w
            .submit(with_token(
                &n,
                "alice",
                work::SubmitRequest {
                    record: Some(signed),
                },
            ))
            .await
            .unwrap_err();
        check(&format!("Submit: {what}"), &e, field);
        let e = w
            .declare(with_token(
                &n,
                "alice",
                work::DeclareRequest { record: Some(r) },
            ))
            .await
            .unwrap_err();
        check(&format!("Declare: {what}"), &e, field);
    }
    assert_eq!(ledger_size(&n).await, before, "nothing recorded");
    // A good record still goes in.
    let good = signing::sign_record(
        &alice,
        &request("acme", "alice", "ok-1", party("globex", "bob")),
    );
    w.submit(with_token(
        &n,
        "alice",
        work::SubmitRequest { record: Some(good) },
    ))
    .await
    .unwrap();
    assert_eq!(ledger_size(&n).await, before + 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn federated_records_with_bad_identifiers_are_refused() {
    let (b, a) = receiver_with_sender().await;
    let mut as_a = AsPeer::new(&a, &b).await;
    let alice = signer(&a, "alice");
    let before = ledger_size(&b).await;
    for (i, (what, r, field)) in bad_records("acme").into_iter().enumerate() {
        let env = as_a.envelope(
            "globex",
            vec![signing::sign_record(&alice, &r)],
            i as i64 + 1,
        );
        let e = as_a.deliver(env).await.unwrap_err();
        check(&format!("federated: {what}"), &e, field);
        assert!(details(&e).1.starts_with("envelope.records[0]."), "{e:?}");
    }
    assert_eq!(ledger_size(&b).await, before, "nothing recorded");
}

fn peer_add(node: &TestNode, name: &str, endpoint: &str) -> (i32, String, String) {
    let ca = node.dir.join("tls/ca.pem").display().to_string();
    let mut args = admin_args(node);
    args.extend(
        [
            "peer",
            "add",
            "--name",
            name,
            "--endpoint",
            endpoint,
            "--vkey",
            &node.vkey(),
            "--tls-pem",
            &ca,
        ]
        .map(String::from),
    );
    accordctl(&args)
}

#[tokio::test(flavor = "multi_thread")]
async fn peer_add_refuses_bad_endpoints_and_names() {
    let n = TestNode::builder("acme").start().await.unwrap();
    let long_host = format!("https://{}:7443", "h".repeat(5000));
    let cases = [
        ("globex", "https://user:pw@127.0.0.1:7443", "--endpoint"),
        ("globex", "https://127.0.0.1:99999", "--endpoint"),
        ("globex", "https://127.0.0.1:7443/path", "--endpoint"),
        ("globex", long_host.as_str(), "--endpoint"),
        ("glo\nbex", "https://127.0.0.1:7443", "--name"),
    ];
    let mut adm = n.admin().await.unwrap();
    for (name, endpoint, flag) in cases {
        let (code, _out, err) = peer_add(&n, name, endpoint);
        assert_ne!(code, 0, "{endpoint}: accepted");
        assert!(err.contains(flag), "{endpoint}: {err}");
        assert!(err.len() < 1024, "{} byte error", err.len());
        // The node refuses the same, naming the field.
        let mut p = n.as_peer();
        p.name = name.into();
        p.endpoint = endpoint.into();
        let e = adm
            .add_peer(n.admin_request(admin::AddPeerRequest { peer: Some(p) }))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{endpoint}: {e}");
        let want = if flag == "--name" {
            "peer.name"
        } else {
            "peer.endpoint"
        };
        assert_eq!(details(&e).1, want);
        assert!(e.message().len() < 1024);
    }
    let peers = adm
        .list_peers(n.admin_request(admin::ListPeersRequest {}))
        .await
        .unwrap()
        .into_inner()
        .peers;
    assert!(peers.is_empty(), "{peers:?}");
    // A good one is still accepted.
    let (code, _, err) = peer_add(&n, "globex", "https://127.0.0.1:7443");
    assert_eq!(code, 0, "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_refuses_bad_config_before_binding() {
    // Each case edits the config text `init` wrote.
    type Edit = Box<dyn Fn(&TestNode, &mut String)>;
    let cases: [(&str, Edit); 3] = [
        (
            "peers[0].endpoint",
            Box::new(|n: &TestNode, t: &mut String| {
                t.push_str(&format!(
                    "\n[[peers]]\nname = \"globex\"\nendpoint = \"https://u:p@127.0.0.1:7443/x\"\nvkeys = [\"{}\"]\nca = \"{}\"\n",
                    n.vkey(),
                    n.dir.join("tls/ca.pem").display()
                ))
            }),
        ),
        (
            "parties[1].name",
            Box::new(|_: &TestNode, t: &mut String| t.push_str("\n[[parties]]\nname = \"..\"\n")),
        ),
        (
            "authorities.principals[0]",
            Box::new(|_: &TestNode, t: &mut String| {
                *t = t.replace("principals = []", "principals = [\"acme/al\\nice\"]");
            }),
        ),
    ];
    for (field, extra) in cases {
        let n = TestNode::builder("acme").party("alice").init().unwrap();
        let mut text = std::fs::read_to_string(n.dir.join("accord.toml")).unwrap();
        extra(&n, &mut text);
        n.edit_config(|t| *t = text).unwrap();
        let cfg = n.dir.join("accord.toml").display().to_string();
        let (code, out, err) = serve_until_exit(&cfg).await;
        assert_ne!(code, 0, "{field}: served");
        assert!(!out.contains("listening"), "{field}: bound a port first");
        assert!(err.contains(field), "{field}: {err}");
    }
}

/// Runs `accord-node serve --config cfg` until it exits; a node still serving after the
/// deadline is killed and reported as serving (exit code 0).
async fn serve_until_exit(cfg: &str) -> (i32, String, String) {
    let mut child = tokio::process::Command::new(accord_tests::bin("accord-node"))
        .args(["serve", "--config", cfg])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let status = tokio::time::timeout(WAIT, child.wait()).await;
    if status.is_err() {
        let _ = child.kill().await;
    }
    let out = child.wait_with_output().await.unwrap();
    let code = match status {
        Ok(Ok(s)) => s.code().unwrap_or(-1),
        _ => 0,
    };
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
