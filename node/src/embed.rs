//! The simulation and embedding surface (issue 16, "deterministic simulation"): a node opened
//! from its configuration and store **without** a server or background tasks, whose every
//! activity is a step the embedder calls and awaits — the record door, admission of an
//! envelope, `GetReceipts`, the routing of new records, one delivery to a peer, a receipt poll,
//! a checkpoint round, the quarantine's wake-ups and timeouts, and a tick of the Work service
//! clock. Time is the [`Clock`] it was opened with (a [`crate::clock::ManualClock`] in the
//! simulation); peers and witnesses are reached through the [`PeerTransport`] and
//! [`WitnessTransport`] it was given (in-memory in `accord-sim`).
//!
//! Every step runs the same code as the daemon's tasks and services: only the loops, timers and
//! network are left to the embedder. Dropping an [`EmbeddedNode`] after [`EmbeddedNode::close`]
//! releases its store, so the same directory can be opened again ("crash and restart": the
//! in-memory state is gone, only what was synced remains).
//!
//! This is the only part of `accord-node`'s API meant for other crates besides [`crate::run`],
//! [`crate::config`], [`crate::init`] and [`crate::connect`]; it is used by `accord-sim`.

use crate::clock::Clock;
use crate::config::Config;
use crate::error::Error;
use crate::node::{Node, Transports};
use accord_proto::pb::federation::v1::{
    DeliverRequest, DeliverResponse, GetReceiptsRequest, GetReceiptsResponse,
};
use accord_proto::pb::log::v1::log_service_server::LogService;
use accord_proto::pb::log::v1::{GetConsistencyProofRequest, GetConsistencyProofResponse};
use accord_proto::pb::record::v1::SignedRecord;
use accord_proto::pb::work::v1::{GetCommitmentResponse, LedgerEntry, SubmitResponse};
use accord_proto::signing::RecordId;
use rustls::pki_types::CertificateDer;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedReceiver;
use tonic::Status;

pub use crate::federation::peers::Peer;
pub use crate::federation::transport::PeerTransport;
pub use crate::log::{WitnessCall, WitnessEndpoint, WitnessTransport};

/// A node driven step by step (see the module doc).
pub struct EmbeddedNode {
    node: Arc<Node>,
    writer: Option<std::thread::JoinHandle<()>>,
    witnesses: Arc<crate::log::WitnessClient>,
    wake: Mutex<Option<UnboundedReceiver<RecordId>>>,
    looked_at_all: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for EmbeddedNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedNode")
            .field("name", &self.name())
            .finish()
    }
}

/// A sender-side receipt the node stored for one of its records at one peer.
#[derive(Debug, Clone)]
pub struct StoredReceipt {
    /// The peer.
    pub peer: String,
    /// The durability it proves (`accord.work.v1.Durability`).
    pub durability: i32,
    /// The decision's reason code, if any.
    pub code: String,
    /// The encoded signed receipt (`accord.federation.v1.Signed`).
    pub receipt: Vec<u8>,
}

impl EmbeddedNode {
    /// Opens the node in `config.data_dir` (replaying its ledger) on `clock`, reaching peers
    /// through `peers` and its configured witnesses through `witnesses` (one per entry of
    /// `config.witnesses.list`, in any order; `k` is the config's).
    pub async fn open(
        config: Config,
        clock: Clock,
        peers: Arc<dyn PeerTransport>,
        witnesses: Vec<WitnessEndpoint>,
    ) -> Result<EmbeddedNode, Error> {
        config.validate()?;
        let opened = crate::node::open_with(
            config,
            clock,
            Transports {
                peers: Some(peers),
                witnesses: Some(witnesses),
                ..Default::default()
            },
        )
        .await?;
        let wake = opened.node.federation.quarantine.take_rx();
        Ok(EmbeddedNode {
            node: opened.node,
            writer: Some(opened.writer),
            witnesses: opened.witnesses,
            wake: Mutex::new(wake),
            looked_at_all: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The organisation's name.
    pub fn name(&self) -> &str {
        self.node.name()
    }

    /// The record door (`WorkService.Submit`): a record signed by one of this organisation's
    /// parties, verified at the edge and appended; answered after its synced write.
    pub async fn submit(&self, signed: SignedRecord) -> Result<SubmitResponse, Status> {
        let mut p = crate::services::submit::Pending::new(&self.node, signed)?;
        // Verified in this task (no verifier threads): the simulation stays deterministic.
        p.check().verify_one()?;
        let (id, record, signed) = p.finish(&self.node)?;
        Ok(crate::services::submit::append(&self.node, signed, record, id).await?)
    }

    /// `FederationService.Deliver` from a peer whose TLS client certificate chain is `chain`.
    pub async fn deliver(
        &self,
        req: DeliverRequest,
        chain: Vec<CertificateDer<'static>>,
    ) -> Result<DeliverResponse, Status> {
        let env = req
            .envelope
            .ok_or_else(|| Error::invalid("envelope", "required"))?;
        crate::services::federation::check_envelope_idents(&env)?;
        Ok(
            crate::federation::admission::deliver(&self.node.fed, env, Some(Arc::new(chain)))
                .await?,
        )
    }

    /// `FederationService.GetReceipts` from a peer whose TLS client certificate chain is
    /// `chain`.
    pub async fn get_receipts(
        &self,
        req: GetReceiptsRequest,
        chain: Vec<CertificateDer<'static>>,
    ) -> Result<GetReceiptsResponse, Status> {
        let ids = req
            .record_ids
            .iter()
            .enumerate()
            .map(|(i, b)| crate::services::work::record_id_field(&format!("record_ids[{i}]"), b))
            .collect::<Result<Vec<_>, _>>()?;
        let receipts =
            crate::federation::inbox::get_receipts(&self.node.fed, ids, Some(Arc::new(chain)))
                .await?;
        Ok(GetReceiptsResponse { receipts })
    }

    /// `LogService.GetConsistencyProof`.
    pub async fn consistency_proof(
        &self,
        req: GetConsistencyProofRequest,
    ) -> Result<GetConsistencyProofResponse, Status> {
        let api = crate::services::log::api(self.node.clone());
        Ok(api
            .get_consistency_proof(tonic::Request::new(req))
            .await?
            .into_inner())
    }

    /// Routes every record the ledger holds now to the peers' queues (the router's work up to
    /// the ledger's length) and wakes the quarantined records waiting for them.
    pub async fn route(&self) -> Result<(), Error> {
        crate::federation::route::route_all(&self.node.fed).await
    }

    /// Sends one envelope from the head of `peer`'s queue (see
    /// `federation::sender::deliver_step`); returns the records it carried.
    pub async fn deliver_to(&self, peer: &str) -> Result<usize, String> {
        crate::federation::sender::deliver_step(&self.node.fed, peer).await
    }

    /// Polls `peer` for newer receipts of records still lacking a decision or a proof.
    pub async fn poll_receipts(&self, peer: &str) -> Result<(), String> {
        crate::federation::sender::poll_step(&self.node.fed, peer).await
    }

    /// One checkpoint round: a new checkpoint if the ledger grew, then the witnesses.
    pub async fn checkpoint(&self) -> Result<(), Error> {
        crate::log::step(&self.node.fed.checkpoints, &self.witnesses).await
    }

    /// The quarantine's work: records woken since the last step (and, the first time after
    /// opening, every quarantined record) are looked at again, and quarantines past their
    /// timeout are closed.
    pub async fn quarantine(&self) -> Result<(), Error> {
        use crate::federation::quarantine;
        let fed = &self.node.fed;
        if !self
            .looked_at_all
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            fed.federation.quarantine.wake(
                fed.federation
                    .quarantine
                    .list()?
                    .into_iter()
                    .map(|(id, _)| id),
            );
        }
        loop {
            let next = match self.wake.lock() {
                Ok(mut g) => g.as_mut().and_then(|rx| rx.try_recv().ok()),
                Err(_) => None,
            };
            let Some(id) = next else { break };
            quarantine::process(fed, id).await?;
        }
        quarantine::sweep(fed).await?;
        Ok(())
    }

    /// One tick of the Work service clock at the clock's now; returns the records written.
    pub async fn service_tick(&self) -> usize {
        crate::service_party::tick(&self.node, self.node.clock.now_ms()).await
    }

    /// The peers' names.
    pub fn peers(&self) -> Vec<String> {
        self.node
            .federation
            .peers
            .list()
            .iter()
            .map(|p| p.name().to_string())
            .collect()
    }

    /// Records queued for `peer`.
    pub fn queued(&self, peer: &str) -> u64 {
        self.node.federation.outbox.depth(peer)
    }

    /// Records quarantined here.
    pub fn quarantined(&self) -> Result<usize, Error> {
        self.node.federation.quarantine.size()
    }

    /// Every quarantined record: its id (hex), reason code and the records it waits for.
    pub fn quarantine_list(&self) -> Result<Vec<String>, Error> {
        Ok(self
            .node
            .federation
            .quarantine
            .list()?
            .into_iter()
            .map(|(id, q)| {
                let missing: Vec<String> = q.missing.iter().map(hex::encode).collect();
                format!("{} {} waits for {missing:?}", hex::encode(id), q.code)
            })
            .collect())
    }

    /// The ledger's length.
    pub fn ledger_len(&self) -> u64 {
        self.node.ledger.len()
    }

    /// Up to `limit` ledger entries from sequence `from`.
    pub fn entries(&self, from: u64, limit: usize) -> Result<Vec<LedgerEntry>, Error> {
        self.node.ledger.store().range(from, limit)
    }

    /// The commitment as `GetCommitment` shows it to the operator.
    pub fn commitment(&self, id: &str) -> Option<GetCommitmentResponse> {
        self.node
            .projection
            .read()
            .ok()?
            .commitment(id, self.node.clock.now_ms())
    }

    /// The latest and the latest witnessed checkpoint (signed notes).
    pub fn checkpoints(&self) -> (Option<String>, Option<String>) {
        (
            self.node.log.latest().map(|c| c.note),
            self.node.log.witnessed().map(|c| c.note),
        )
    }

    /// The receipts this node stored for its record `id`, per peer.
    pub fn receipts(&self, id: &RecordId) -> Result<Vec<StoredReceipt>, Error> {
        Ok(self
            .node
            .federation
            .receipts
            .for_record(id)?
            .into_iter()
            .map(|(peer, s)| StoredReceipt {
                peer,
                durability: s.durability,
                code: s.code,
                receipt: s.receipt,
            })
            .collect())
    }

    /// Stops the ledger writer (it commits what it holds, which between steps is nothing) and
    /// releases the store when dropped.
    pub async fn close(mut self) {
        self.node.ledger.stop().await;
        if let Some(w) = self.writer.take() {
            let _ = tokio::task::spawn_blocking(move || w.join()).await;
        }
    }
}
