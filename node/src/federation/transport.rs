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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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

/// The daemon's transport: mutual-TLS gRPC, one channel per peer endpoint, rebuilt when the
/// peer's endpoints, CA or pin change. A peer listing several endpoints (the instances of one
/// organisation's node on a shared database, issue 31) is called at the one that answered last;
/// when it is UNAVAILABLE (not listening, or a standby refusing with `not_writer`) or the
/// connection broke (a standby refusing the handshake) the next is tried, and the one that
/// answers is kept. Every call federation makes is idempotent at the
/// peer (a record is admitted once by its id), so trying the next endpoint delivers nothing twice.
#[derive(Debug)]
pub struct GrpcPeers {
    cert: PathBuf,
    key: PathBuf,
    request_timeout: Duration,
    channels: Mutex<HashMap<String, (String, Endpoints)>>,
}

/// One peer's channels, in its configured order, and the index of the one that answered last.
#[derive(Debug, Clone)]
struct Endpoints {
    channels: Arc<Vec<Channel>>,
    current: Arc<AtomicUsize>,
}

/// Whether a failed call may succeed at another of the peer's endpoints: it was UNAVAILABLE
/// (not listening, or a standby refusing with `not_writer`), or the connection broke under it
/// (UNKNOWN, CANCELLED). A standby refuses a peer's client certificate at the TLS handshake
/// (`standby.rs`), and under TLS 1.3 the client learns that only when its first request meets
/// the server's alert, as a broken connection, not as UNAVAILABLE; a channel left at an
/// endpoint that became a standby would otherwise be called there for good (seen in the failover
/// loop: globex's consistency-proof fetches from acme stuck at the old writer, restarted as a
/// standby). A status the peer's service chose itself is not one of these.
fn elsewhere(s: &Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
    )
}

impl Endpoints {
    /// Calls `f` on the current channel, then on the others in order while the failure is one
    /// another endpoint may not have ([`elsewhere`]).
    async fn call<T, F, Fut>(self, f: F) -> Result<T, Status>
    where
        F: Fn(Channel) -> Fut,
        Fut: std::future::Future<Output = Result<T, Status>>,
    {
        let n = self.channels.len();
        let start = self.current.load(Ordering::Relaxed) % n.max(1);
        let mut last = Status::unavailable("the peer lists no endpoint");
        for i in 0..n {
            let at = (start + i) % n;
            match f(self.channels[at].clone()).await {
                Ok(v) => {
                    if i > 0 {
                        tracing::info!(endpoint = at, "peer answered at another endpoint");
                        self.current.store(at, Ordering::Relaxed);
                    }
                    return Ok(v);
                }
                Err(s) if elsewhere(&s) && i + 1 < n => last = s,
                Err(s) => return Err(s),
            }
        }
        Err(last)
    }
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

    /// The channels to `peer`'s endpoints (cached per peer while its endpoints, CA and pin
    /// stay the same).
    fn endpoints(&self, peer: &Peer) -> Result<Endpoints, Status> {
        let key = format!(
            "{}\n{}\n{}",
            peer.record.endpoint, peer.record.tls_pem, peer.record.pin_sha256
        );
        let mut m = self
            .channels
            .lock()
            .map_err(|_| Status::internal("peer channel cache poisoned"))?;
        if let Some((k, e)) = m.get(peer.name())
            && *k == key
        {
            return Ok(e.clone());
        }
        let list = crate::ident::endpoints(&peer.record.endpoint)
            .map_err(|e| Status::unavailable(format!("the peer's endpoint: {e}")))?;
        let mut channels = Vec::with_capacity(list.len());
        for endpoint in list {
            channels.push(
                crate::tls::peer_channel(
                    endpoint,
                    &peer.record.tls_pem,
                    &peer.record.pin_sha256,
                    &self.cert,
                    &self.key,
                    Duration::from_secs(3),
                    self.request_timeout,
                )
                .map_err(|e| {
                    Status::unavailable(format!("cannot build a channel to the peer: {e}"))
                })?,
            );
        }
        let e = Endpoints {
            channels: Arc::new(channels),
            current: Arc::default(),
        };
        m.insert(peer.name().to_string(), (key, e.clone()));
        Ok(e)
    }
}

fn federation(ch: Channel) -> FederationServiceClient<Channel> {
    FederationServiceClient::new(ch)
        .max_decoding_message_size(super::MAX_MESSAGE)
        .max_encoding_message_size(super::MAX_MESSAGE)
}

impl PeerTransport for GrpcPeers {
    fn deliver(
        &self,
        peer: &Peer,
        req: DeliverRequest,
    ) -> BoxFuture<'_, Result<DeliverResponse, Status>> {
        let e = self.endpoints(peer);
        Box::pin(async move {
            e?.call(|ch| {
                let req = req.clone();
                async move { Ok(federation(ch).deliver(req).await?.into_inner()) }
            })
            .await
        })
    }

    fn get_receipts(
        &self,
        peer: &Peer,
        req: GetReceiptsRequest,
    ) -> BoxFuture<'_, Result<GetReceiptsResponse, Status>> {
        let e = self.endpoints(peer);
        Box::pin(async move {
            e?.call(|ch| {
                let req = req.clone();
                async move { Ok(federation(ch).get_receipts(req).await?.into_inner()) }
            })
            .await
        })
    }

    fn consistency_proof(
        &self,
        peer: &Peer,
        req: GetConsistencyProofRequest,
    ) -> BoxFuture<'_, Result<GetConsistencyProofResponse, Status>> {
        let e = self.endpoints(peer);
        Box::pin(async move {
            e?.call(|ch| async move {
                Ok(LogServiceClient::new(ch)
                    .get_consistency_proof(req)
                    .await?
                    .into_inner())
            })
            .await
        })
    }
}
