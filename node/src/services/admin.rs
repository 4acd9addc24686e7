//! `accord.admin.v1.AdminService`: the operator's API (`accordctl admin ...`), behind the
//! operator bearer token ([`crate::auth::Tokens::admin`]): status, peers (add, list, disable,
//! remove, rotate a key with a validity overlap), a peer's delivery health, the quarantine
//! (list; admit or reject by hand) and refused envelopes.

use crate::error::Error;
use crate::federation::peers::PeerRecord;
use crate::federation::quarantine;
use crate::node::Node;
use accord_proto::pb::admin::v1 as pb;
use accord_proto::pb::admin::v1::admin_service_server::{AdminService, AdminServiceServer};
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The AdminService implementation.
#[derive(Debug, Clone)]
pub struct AdminApi {
    node: Arc<Node>,
}

/// The service, ready to add to a tonic server.
pub fn server(node: Arc<Node>) -> AdminServiceServer<AdminApi> {
    AdminServiceServer::new(AdminApi { node })
}

impl AdminApi {
    fn auth<T>(&self, req: &Request<T>) -> Result<(), Error> {
        self.node.tokens.admin(req)
    }

    /// Authenticates, then checks a peer name (never echoed in full).
    fn auth_name<T>(&self, req: &Request<T>, name: &str) -> Result<(), Error> {
        self.auth(req)?;
        crate::ident::name(name).map_err(|r| Error::invalid("name", r))
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Node) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let node = self.node.clone();
        tokio::task::spawn_blocking(move || f(&node))
            .await
            .map_err(|e| Error::Internal(e.to_string()))?
    }
}

/// Every peer with its delivery health, and the quarantine's size (blocking: RocksDB reads).
fn status_of_federation(n: &Node) -> Result<(Vec<pb::PeerStatus>, u64, u64), Error> {
    let fed = &n.federation;
    let now = n.clock.now_ms();
    let mut peers = Vec::new();
    for p in fed.peers.list() {
        let name = p.name();
        let h = fed.health(name);
        let oldest = fed.outbox.oldest(name)?;
        peers.push(pb::PeerStatus {
            name: name.to_string(),
            endpoint: p.record.endpoint.clone(),
            enabled: p.enabled(),
            health: Some(pb::GetPeerHealthResponse {
                queue_depth: fed.outbox.depth(name),
                oldest_queued_age_ms: oldest.map(|t| (now - t).max(0)).unwrap_or(0),
                last_success_unix_ms: h.last_success(),
                breaker: h.breaker().as_str().to_string(),
                last_error: h.last_error(),
                queue_max: fed.outbox.max(),
                queue_full: fed.outbox.is_full(name),
                backfilling: fed.outbox.behind(name).is_some(),
                backfill_from_sequence: fed.outbox.behind(name).unwrap_or(0),
            }),
        });
    }
    let routed = crate::federation::route::cursor(&n.fed)?;
    Ok((
        peers,
        fed.quarantine.size()? as u64,
        n.ledger.len().saturating_sub(routed),
    ))
}

/// The key names of a signed note's signature lines (`— <name> <base64>`) other than `origin`'s
/// own: the witnesses that cosigned a checkpoint (c2sp.org/signed-note).
fn cosigners(note: &str, origin: &str) -> Vec<String> {
    note.lines()
        .filter_map(|l| l.strip_prefix("\u{2014} "))
        .filter_map(|l| l.split(' ').next())
        .filter(|name| *name != origin)
        .map(str::to_string)
        .collect()
}

#[tonic::async_trait]
impl AdminService for AdminApi {
    #[tracing::instrument(skip_all)]
    async fn get_status(
        &self,
        req: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        self.auth(&req)?;
        let n = &self.node;
        // One screen of health for `accordctl status`: peers and quarantine read RocksDB.
        let (peers, quarantine_size, unrouted) = self.blocking(status_of_federation).await?;
        let witnessed = n.log.witnessed();
        let (service_ticks, service_ticked_at_unix_ms) = n.metrics.service_ticks();
        Ok(Response::new(pb::GetStatusResponse {
            name: n.name().to_string(),
            ledger_size: n.ledger.len(),
            checkpoint_size: n.log.latest().map(|c| c.size).unwrap_or(0),
            witnessed_size: witnessed.as_ref().map(|c| c.size).unwrap_or(0),
            origin: n.config.origin(),
            vkey: n.signer.verifier().to_vkey(),
            quarantine_size,
            peers,
            witnesses_required: n.config.witnesses.k as u32,
            witnessed_by: witnessed
                .map(|c| cosigners(&c.note, &n.config.origin()))
                .unwrap_or_default(),
            checkpoint_age_ms: n.metrics.checkpoint_age(n.clock.now_ms()).as_millis() as i64,
            service_ticks,
            service_ticked_at_unix_ms,
            records_unrouted: unrouted,
        }))
    }

    #[tracing::instrument(skip_all, fields(peer))]
    async fn add_peer(
        &self,
        req: Request<pb::AddPeerRequest>,
    ) -> Result<Response<pb::AddPeerResponse>, Status> {
        self.auth(&req)?;
        let p = req
            .into_inner()
            .peer
            .ok_or_else(|| Error::invalid("peer", "required"))?;
        // Input bounds (issue 8): nothing is stored for a bad name or endpoint.
        crate::ident::name(&p.name).map_err(|r| Error::invalid("peer.name", r))?;
        crate::ident::endpoints(&p.endpoint).map_err(|r| Error::invalid("peer.endpoint", r))?;
        tracing::Span::current().record("peer", &p.name);
        let rec = PeerRecord::from_pb(&p);
        let name = p.name.clone();
        // Backfill (issue 15, item 4): the records written before that involve its parties.
        self.blocking(move |n| {
            let fed = &n.federation;
            crate::federation::backfill::add_peer(&fed.outbox, &name, || fed.peers.add(rec))
        })
        .await?;
        tracing::info!(peer = %p.name, endpoint = %p.endpoint, enabled = p.enabled, "peer added");
        Ok(Response::new(pb::AddPeerResponse {}))
    }

    #[tracing::instrument(skip_all)]
    async fn list_peers(
        &self,
        req: Request<pb::ListPeersRequest>,
    ) -> Result<Response<pb::ListPeersResponse>, Status> {
        self.auth(&req)?;
        let peers = self
            .node
            .federation
            .peers
            .list()
            .iter()
            .map(|p| p.record.to_pb())
            .collect();
        Ok(Response::new(pb::ListPeersResponse { peers }))
    }

    #[tracing::instrument(skip_all, fields(peer = %crate::ident::truncate(&req.get_ref().name, 64), enabled = req.get_ref().enabled))]
    async fn set_peer_enabled(
        &self,
        req: Request<pb::SetPeerEnabledRequest>,
    ) -> Result<Response<pb::SetPeerEnabledResponse>, Status> {
        self.auth_name(&req, &req.get_ref().name)?;
        let r = req.into_inner();
        self.blocking(move |n| n.federation.peers.set_enabled(&r.name, r.enabled))
            .await?;
        tracing::info!("peer enabled changed");
        Ok(Response::new(pb::SetPeerEnabledResponse {}))
    }

    #[tracing::instrument(skip_all, fields(peer = %crate::ident::truncate(&req.get_ref().name, 64)))]
    async fn remove_peer(
        &self,
        req: Request<pb::RemovePeerRequest>,
    ) -> Result<Response<pb::RemovePeerResponse>, Status> {
        self.auth_name(&req, &req.get_ref().name)?;
        let name = req.into_inner().name;
        self.blocking(move |n| {
            n.federation.peers.remove(&name)?;
            n.federation.outbox.drop_peer(&name)
        })
        .await?;
        tracing::info!("peer removed");
        Ok(Response::new(pb::RemovePeerResponse {}))
    }

    #[tracing::instrument(skip_all, fields(peer = %crate::ident::truncate(&req.get_ref().name, 64)))]
    async fn rotate_peer_key(
        &self,
        req: Request<pb::RotatePeerKeyRequest>,
    ) -> Result<Response<pb::RotatePeerKeyResponse>, Status> {
        self.auth_name(&req, &req.get_ref().name)?;
        let r = req.into_inner();
        self.blocking(move |n| {
            n.federation
                .peers
                .rotate_key(&r.name, &r.new_vkey, r.old_valid_until_unix_ms)
        })
        .await?;
        tracing::info!("peer key rotated");
        Ok(Response::new(pb::RotatePeerKeyResponse {}))
    }

    #[tracing::instrument(skip_all, fields(peer = %crate::ident::truncate(&req.get_ref().name, 64)))]
    async fn get_peer_health(
        &self,
        req: Request<pb::GetPeerHealthRequest>,
    ) -> Result<Response<pb::GetPeerHealthResponse>, Status> {
        self.auth_name(&req, &req.get_ref().name)?;
        let name = req.into_inner().name;
        let fed = &self.node.federation;
        if fed.peers.get(&name).is_none() {
            return Err(Error::NotFound(format!("peer {name:?}")).into());
        }
        let h = fed.health(&name);
        let n = name.clone();
        let oldest = self
            .blocking(move |node| node.federation.outbox.oldest(&n))
            .await?;
        let now = self.node.clock.now_ms();
        Ok(Response::new(pb::GetPeerHealthResponse {
            queue_depth: fed.outbox.depth(&name),
            oldest_queued_age_ms: oldest.map(|t| (now - t).max(0)).unwrap_or(0),
            last_success_unix_ms: h.last_success(),
            breaker: h.breaker().as_str().to_string(),
            last_error: h.last_error(),
            queue_max: fed.outbox.max(),
            queue_full: fed.outbox.is_full(&name),
            backfilling: fed.outbox.behind(&name).is_some(),
            backfill_from_sequence: fed.outbox.behind(&name).unwrap_or(0),
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn list_quarantine(
        &self,
        req: Request<pb::ListQuarantineRequest>,
    ) -> Result<Response<pb::ListQuarantineResponse>, Status> {
        self.auth(&req)?;
        let list = self.blocking(|n| n.federation.quarantine.list()).await?;
        let now = self.node.clock.now_ms();
        let records = list
            .into_iter()
            .map(|(id, q)| pb::QuarantinedRecord {
                record_id: id.to_vec().into(),
                peer: q.peer.clone(),
                code: q.code().to_string(),
                age_ms: (now - q.since).max(0),
                author: q.author(),
            })
            .collect();
        Ok(Response::new(pb::ListQuarantineResponse { records }))
    }

    #[tracing::instrument(skip_all, fields(record_id, admit = req.get_ref().admit))]
    async fn decide_quarantined(
        &self,
        req: Request<pb::DecideQuarantinedRequest>,
    ) -> Result<Response<pb::DecideQuarantinedResponse>, Status> {
        self.auth(&req)?;
        let r = req.into_inner();
        let id = super::work::record_id_field("record_id", &r.record_id)?;
        tracing::Span::current().record("record_id", hex::encode(id));
        if r.reason.trim().is_empty() {
            return Err(Error::invalid("reason", "required: the operator's reason").into());
        }
        let (decision, admission) =
            quarantine::decide(&self.node.fed, id, r.admit, r.reason).await?;
        tracing::info!(decision = %decision, "quarantined record decided by the operator");
        Ok(Response::new(pb::DecideQuarantinedResponse {
            admission_record_id: admission.to_vec().into(),
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn list_refusals(
        &self,
        req: Request<pb::ListRefusalsRequest>,
    ) -> Result<Response<pb::ListRefusalsResponse>, Status> {
        self.auth(&req)?;
        let r = req.into_inner();
        let size = match (r.page_size, r.limit) {
            (0, 0) => 100,
            (0, n) | (n, _) => n as usize,
        };
        let token = r.page_token;
        let (list, next) = self
            .blocking(move |n| n.refusals.page(n.ledger.store(), &token, size))
            .await?;
        let refusals = list
            .into_iter()
            .map(|r| pb::Refusal {
                peer: r.peer,
                code: r.code,
                detail: r.detail,
                at_unix_ms: r.at,
            })
            .collect();
        Ok(Response::new(pb::ListRefusalsResponse {
            refusals,
            next_page_token: next,
        }))
    }
}
