//! `accord.federation.v1.FederationService`: peer nodes deliver envelopes and fetch receipts
//! (seed 000, "Federation admission"). Callers authenticate with mutual TLS; the admission
//! logic is in [`crate::federation::admission`] and [`crate::federation::inbox`].
//!
//! [`PeerGate`] runs before the request body is read (a tonic interceptor sees only headers and
//! the connection): a caller whose TLS leaf is no enabled peer's identity is refused
//! UNAUTHENTICATED (`accord-reason: wrong_tls_identity`; a disabled peer's PERMISSION_DENIED
//! `peer_disabled`), so a stranger's 64 MiB body is never decoded (issue 8).

use crate::error::Error;
use crate::federation::{MAX_MESSAGE, admission, codes, inbox};
use crate::node::Node;
use accord_proto::pb::federation::v1 as pb;
use accord_proto::pb::federation::v1::federation_service_server::{
    FederationService, FederationServiceServer,
};
use accord_proto::pb::record::v1::Record;
use accord_proto::signing::ENVELOPE_PAYLOAD_TYPE;
use prost::Message;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

/// Envelopes admitted at once; beyond that (plus a short queue) peers are told to slow down.
const IN_FLIGHT: usize = 64;

/// The FederationService implementation.
#[derive(Debug, Clone)]
pub struct FederationApi {
    node: Arc<Node>,
    in_flight: Arc<Semaphore>,
}

/// The service behind its [`PeerGate`], ready to add to a tonic server.
pub fn server(
    node: Arc<Node>,
) -> InterceptedService<FederationServiceServer<FederationApi>, PeerGate> {
    let svc = FederationServiceServer::new(FederationApi {
        node: node.clone(),
        in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
    })
    .max_decoding_message_size(MAX_MESSAGE)
    .max_encoding_message_size(MAX_MESSAGE);
    InterceptedService::new(svc, PeerGate { node })
}

/// Authenticates the caller's TLS certificate as an enabled peer's identity before the body is
/// decoded; refusals are kept (rate-limited per remote IP) in the refusal ring.
#[derive(Debug, Clone)]
pub struct PeerGate {
    node: Arc<Node>,
}

impl tonic::service::Interceptor for PeerGate {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let source = req
            .remote_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        let Some(chain) = req.peer_certs() else {
            return Err(unauthenticated(crate::federation::refusals::refuse_from(
                &self.node.fed,
                &source,
                "",
                codes::WRONG_TLS_IDENTITY,
                "no TLS client certificate: FederationService is for peers".into(),
            )));
        };
        let peers = self.node.federation.peers.list();
        let matching: Vec<_> = peers
            .iter()
            .filter(|p| p.tls_identity_matches(chain.as_slice()))
            .collect();
        if matching.iter().any(|p| p.enabled()) {
            return Ok(req);
        }
        if let Some(p) = matching.first() {
            return Err(crate::federation::refusals::refuse_from(
                &self.node.fed,
                p.name(),
                p.name(),
                codes::PEER_DISABLED,
                format!("peer {:?} is disabled", p.name()),
            )
            .into());
        }
        Err(unauthenticated(crate::federation::refusals::refuse_from(
            &self.node.fed,
            &source,
            "",
            codes::WRONG_TLS_IDENTITY,
            "the TLS client certificate is no enabled peer's identity".into(),
        )))
    }
}

/// A refusal answered UNAUTHENTICATED, its code in `accord-reason`.
fn unauthenticated(e: impl Into<Error>) -> Status {
    let e: Error = e.into();
    let mut st = Status::unauthenticated(e.to_string());
    if let Ok(v) = e.reason().parse() {
        st.metadata_mut().insert("accord-reason", v);
    }
    st
}

/// Input bounds for every record of an envelope (issue 8, [`crate::convert::check_idents`]),
/// before admission: an identifier out of bounds refuses the whole envelope with
/// InvalidArgument naming `envelope.records[i]....`, and nothing is recorded.
pub(crate) fn check_envelope_idents(env: &pb::Signed) -> Result<(), Error> {
    if env.payload_type != ENVELOPE_PAYLOAD_TYPE {
        return Ok(()); // refused by the inbox as malformed
    }
    let Ok(e) = pb::Envelope::decode(env.payload.as_ref()) else {
        return Ok(());
    };
    for (i, r) in e.records.iter().enumerate() {
        if accord_proto::declaration::check_payload_type(&r.payload_type).is_err() {
            continue;
        }
        let Ok(rec) = Record::decode(r.payload.as_ref()) else {
            continue;
        };
        if let Err(Error::InvalidArgument { field, reason }) = crate::convert::check_idents(&rec) {
            let field = field.strip_prefix("record.").unwrap_or(&field);
            return Err(Error::invalid(
                format!("envelope.records[{i}].{field}"),
                reason,
            ));
        }
    }
    Ok(())
}

#[tonic::async_trait]
impl FederationService for FederationApi {
    #[tracing::instrument(skip_all, fields(records))]
    async fn deliver(
        &self,
        req: Request<pb::DeliverRequest>,
    ) -> Result<Response<pb::DeliverResponse>, Status> {
        let Ok(_permit) = self.in_flight.clone().try_acquire_owned() else {
            return Err(Error::ResourceExhausted(format!(
                "more than {IN_FLIGHT} envelopes in flight; retry later"
            ))
            .into());
        };
        let chain = req.peer_certs();
        let env = req
            .into_inner()
            .envelope
            .ok_or_else(|| Error::invalid("envelope", "required"))?;
        check_envelope_idents(&env)?;
        let resp = admission::deliver(&self.node.fed, env, chain).await?;
        tracing::Span::current().record("records", resp.receipts.len().saturating_sub(1));
        Ok(Response::new(resp))
    }

    #[tracing::instrument(skip_all, fields(n = req.get_ref().record_ids.len()))]
    async fn get_receipts(
        &self,
        req: Request<pb::GetReceiptsRequest>,
    ) -> Result<Response<pb::GetReceiptsResponse>, Status> {
        let chain = req.peer_certs();
        let r = req.into_inner();
        if r.record_ids.len() > 1024 {
            return Err(Error::invalid("record_ids", "at most 1024 per call").into());
        }
        let ids = r
            .record_ids
            .iter()
            .enumerate()
            .map(|(i, b)| super::work::record_id_field(&format!("record_ids[{i}]"), b))
            .collect::<Result<Vec<_>, _>>()?;
        let receipts = inbox::get_receipts(&self.node.fed, ids, chain).await?;
        Ok(Response::new(pb::GetReceiptsResponse { receipts }))
    }
}
