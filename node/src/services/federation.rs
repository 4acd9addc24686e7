//! `accord.federation.v1.FederationService`: peer nodes deliver envelopes and fetch receipts
//! (seed 000, "Federation admission"). Callers authenticate with mutual TLS; the admission
//! logic is in [`crate::federation::inbox`].

use crate::error::Error;
use crate::federation::{inbox, sender::MAX_MESSAGE};
use crate::server::Node;
use accord_proto::pb::federation::v1 as pb;
use accord_proto::pb::federation::v1::federation_service_server::{
    FederationService, FederationServiceServer,
};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status};

/// Envelopes admitted at once; beyond that (plus a short queue) peers are told to slow down.
const IN_FLIGHT: usize = 64;

/// The FederationService implementation.
#[derive(Debug, Clone)]
pub struct FederationApi {
    node: Arc<Node>,
    in_flight: Arc<Semaphore>,
}

/// The service, ready to add to a tonic server.
pub fn server(node: Arc<Node>) -> FederationServiceServer<FederationApi> {
    FederationServiceServer::new(FederationApi {
        node,
        in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
    })
    .max_decoding_message_size(MAX_MESSAGE)
    .max_encoding_message_size(MAX_MESSAGE)
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
        let resp = inbox::deliver(&self.node, env, chain).await?;
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
        let receipts = inbox::get_receipts(&self.node, ids, chain).await?;
        Ok(Response::new(pb::GetReceiptsResponse { receipts }))
    }
}
