//! How federation reaches a peer's node (issue 16: the same sender and admission code run over
//! mutual-TLS gRPC in the daemon and over the simulated network of `accord-sim`).
//!
//! [`PeerTransport`] is the three calls federation makes to a peer: `FederationService.Deliver`
//! and `GetReceipts` (the sender and its poller) and `LogService.GetConsistencyProof` (admission
//! fetching a proof when an envelope's starts elsewhere). [`GrpcPeers`] is the daemon's: one
//! cached channel per peer, our own TLS connector with the peer's CA and, if pinned, its leaf.
//! Errors are gRPC statuses either way, so retries, backoff and refusal codes do not depend on
//! the transport.

use super::peers::Peer;
use accord_proto::pb::federation::v1::federation_service_client::FederationServiceClient;
use accord_proto::pb::federation::v1::{
    DeliverRequest, DeliverResponse, GetReceiptsRequest, GetReceiptsResponse,
};
use accord_proto::pb::log::v1::log_service_client::LogServiceClient;
use accord_proto::pb::log::v1::{GetConsistencyProofRequest, GetConsistencyProofResponse};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;
use tonic::Status;
use tonic::transport::Channel;

/// The calls federation makes to a peer's node.
pub trait PeerTransport: Send + Sync + std::fmt::Debug {
    /// `FederationService.Deliver` of one signed envelope.
    fn deliver(
        &self,
        peer: &Peer,
        req: DeliverRequest,
    ) -> BoxFuture<'_, Result<DeliverResponse, Status>>;
    /// `FederationService.GetReceipts`.
    fn get_receipts(
        &self,
        peer: &Peer,
        req: GetReceiptsRequest,
    ) -> BoxFuture<'_, Result<GetReceiptsResponse, Status>>;
    /// `LogService.GetConsistencyProof` of the peer's log.
    fn consistency_proof(
        &self,
        peer: &Peer,
        req: GetConsistencyProofRequest,
    ) -> BoxFuture<'_, Result<GetConsistencyProofResponse, Status>>;
}

/// The daemon's transport: mutual-TLS gRPC, one channel per peer, rebuilt when the peer's
/// endpoint, CA or pin changes.
#[derive(Debug)]
pub struct GrpcPeers {
    cert: PathBuf,
    key: PathBuf,
    request_timeout: Duration,
    channels: Mutex<HashMap<String, (String, Channel)>>,
}

impl GrpcPeers {
    /// Presents `cert`/`key` (this node's TLS identity) to peers; each call is bounded by
    /// `request_timeout`.
    pub fn new(cert: PathBuf, key: PathBuf, request_timeout: Duration) -> GrpcPeers {
        GrpcPeers {
            cert,
            key,
            request_timeout,
            channels: Mutex::new(HashMap::new()),
        }
    }

    /// A channel to `peer` (cached per peer while its endpoint, CA and pin stay the same).
    pub fn channel(&self, peer: &Peer) -> Result<Channel, Status> {
        let key = format!(
            "{}\n{}\n{}",
            peer.record.endpoint, peer.record.tls_pem, peer.record.pin_sha256
        );
        let mut m = self
            .channels
            .lock()
            .map_err(|_| Status::internal("peer channel cache poisoned"))?;
        if let Some((k, ch)) = m.get(peer.name())
            && *k == key
        {
            return Ok(ch.clone());
        }
        let ch = crate::tls::peer_channel(
            &peer.record.endpoint,
            &peer.record.tls_pem,
            &peer.record.pin_sha256,
            &self.cert,
            &self.key,
            Duration::from_secs(3),
            self.request_timeout,
        )
        .map_err(|e| Status::unavailable(format!("cannot build a channel to the peer: {e}")))?;
        m.insert(peer.name().to_string(), (key, ch.clone()));
        Ok(ch)
    }

    fn client(&self, peer: &Peer) -> Result<FederationServiceClient<Channel>, Status> {
        Ok(FederationServiceClient::new(self.channel(peer)?)
            .max_decoding_message_size(super::MAX_MESSAGE)
            .max_encoding_message_size(super::MAX_MESSAGE))
    }
}

impl PeerTransport for GrpcPeers {
    fn deliver(
        &self,
        peer: &Peer,
        req: DeliverRequest,
    ) -> BoxFuture<'_, Result<DeliverResponse, Status>> {
        let client = self.client(peer);
        Box::pin(async move { Ok(client?.deliver(req).await?.into_inner()) })
    }

    fn get_receipts(
        &self,
        peer: &Peer,
        req: GetReceiptsRequest,
    ) -> BoxFuture<'_, Result<GetReceiptsResponse, Status>> {
        let client = self.client(peer);
        Box::pin(async move { Ok(client?.get_receipts(req).await?.into_inner()) })
    }

    fn consistency_proof(
        &self,
        peer: &Peer,
        req: GetConsistencyProofRequest,
    ) -> BoxFuture<'_, Result<GetConsistencyProofResponse, Status>> {
        let ch = self.channel(peer);
        Box::pin(async move {
            Ok(LogServiceClient::new(ch?)
                .get_consistency_proof(req)
                .await?
                .into_inner())
        })
    }
}
