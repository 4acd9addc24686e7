//! Federation between organisations (DESIGN.md, "Federation"; seed 000, "Federation admission"
//! and "Durability states").
//!
//! | module | holds |
//! |---|---|
//! | [`peers`] | the peer registry (cf `peers`), their keys and TLS identities |
//! | [`route`] | the router: tails the ledger, queues local records for peers' organisations |
//! | [`outbox`] | the durable per-peer queues (cf `outbox`), bounded per peer |
//! | [`backfill`] | queues earlier records for a peer just added or whose queue was full |
//! | [`sender`] | one delivery task per peer: envelopes, receipts, retries |
//! | [`breaker`] | exponential backoff with jitter, circuit breaker |
//! | [`admission`] | admission of a peer's envelope as named phases: authenticate → triage → kernel commit → declare → persist |
//! | [`check`] | checks 3–4 of one peer record (decoded once, wire and kernel form) |
//! | [`declaration`] | admission declarations (deterministic bytes per record and decision) and receipts |
//! | [`decisions`] | the decisions store: sole owner of cf `inbox` and `quarantine` |
//! | [`inbox`] | `GetReceipts`: the current decision about a peer's records, with proof |
//! | [`quarantine`] | records waiting for their basis, timeouts, operator decisions |
//! | [`refusals`] | refused envelopes and calls: a bounded, rate-limited ring |
//! | [`receipts`] | receipts: signing and offline verification (no node needed) |
//! | [`receipt_proof`] | the receiver's checkpoint and inclusion proof on a receipt |
//! | [`receipt_store`] | the sender's receipts and per-peer durability (cf `receipts`) |
//! | [`codes`] | outcomes and the closed list of reason codes |
//! | [`error`] | federation's typed errors |
//! | [`db`] | federation's column families, declared to the store at open, and JSON helpers |
//! | [`handshake`] | why a connection to a peer failed (TLS refusals), for `peer health` |
//! | [`logproof`] | the sender's proof that it recorded what it sends (checkpoint + inclusion) |
//! | [`budget`] | per-peer budget of records rejected at the door |
//! | [`transport`] | how federation reaches a peer (`PeerTransport`: gRPC in the daemon, simulated in `accord-sim`) |
//!
//! The path: a locally authored record enters the ledger → the router queues it for each peer
//! organisation with a party in its commitment → that peer's sender delivers it in a signed
//! envelope → the peer admits, quarantines or rejects it, writes an admission declaration to its
//! own ledger and answers with signed receipts → the sender stores them and the record's
//! durability at that peer advances (federated → admitted, quarantined or rejected), and later
//! receipts carry the peer's checkpoint and inclusion proof.

pub mod admission;
pub mod backfill;
pub mod breaker;
pub mod budget;
pub mod check;
pub mod codes;
pub mod db;
pub mod decisions;
pub mod declaration;
pub mod delivery;
pub mod envelope_route;
pub mod error;
pub mod handshake;
pub mod inbox;
pub mod join;
pub mod logproof;
pub mod outbox;
pub mod peers;
#[cfg(test)]
mod pipeline_tests;
pub mod quarantine;
pub mod receipt_proof;
pub mod receipt_store;
pub mod receipts;
pub mod refusals;
pub mod route;
pub mod sender;
pub mod transport;

use crate::config::Config;
use crate::error::Error;
use crate::ledger::Store;
use accord_kernel as k;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use tokio_util::sync::CancellationToken;

/// Largest gRPC message either side of FederationService accepts.
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// What federation (the router, the senders, admission, quarantine, receipts, refusals, log
/// proofs) needs of the node (issue 10, item 1): narrow handles, built once in `node.rs`,
/// instead of the whole node — so no module under `federation/` depends on `crate::node`.
#[derive(Debug, Clone)]
pub struct FedContext {
    /// This organisation's name.
    pub name: String,
    /// The node key: signs admission declarations and receipts.
    pub signer: accord_proto::note::Signer,
    /// The ledger: peer records and declarations are appended through its writer.
    pub ledger: crate::ledger::Ledger<k::Record>,
    /// Peers, decisions, quarantine, queues and the sender's receipts.
    pub federation: Arc<Federation>,
    /// Refused envelopes and calls.
    pub refusals: Arc<refusals::Refusals>,
    /// The node's checkpoints (receipts carry their proofs).
    pub log: Arc<crate::log::LogState>,
    /// The node's one clock.
    pub clock: crate::clock::Clock,
    /// Admission and refusal counters.
    pub metrics: crate::metrics::Metrics,
    /// Federation settings.
    pub config: crate::config::FederationConfig,
    /// This node's TLS certificate and key, presented to peers.
    pub tls: (std::path::PathBuf, std::path::PathBuf),
    /// Derived Work state (the router reads who is in a commitment).
    pub projection: Arc<RwLock<crate::projection::Projection>>,
    /// Checkpoint signing (a sender proves its batch with a covering checkpoint).
    pub checkpoints: crate::log::LogContext,
    /// How peers are reached.
    pub transport: Arc<dyn transport::PeerTransport>,
    /// How often refusals past their retention are pruned (`limits.refusals_prune_interval_ms`).
    pub refusals_prune_interval_ms: u64,
}

impl FedContext {
    /// This organisation's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `commitment` is known here and homed here (issue 26: this node orders it).
    pub fn homed_here(&self, commitment: &str) -> bool {
        self.projection.read().ok().is_some_and(|p| {
            p.get(commitment)
                .is_some_and(|k| k.home_org(self.name()) == self.name())
        })
    }
}

/// The operator's party name inside the organisation: author of hand-made admission decisions.
pub use crate::ident::OPERATOR_PARTY;

/// Federation state of a node.
pub struct Federation {
    /// The peers.
    pub peers: peers::Peers,
    /// Per-peer queues.
    pub outbox: outbox::Outbox,
    /// The sender's receipts.
    pub receipts: receipt_store::ReceiptStore,
    /// Admission decisions (cf `inbox`, `quarantine`).
    pub decisions: decisions::Decisions,
    /// Quarantined records.
    pub quarantine: quarantine::Quarantine,
    /// Which organisations were sent which commitment's history (issue 26, item 4).
    pub(crate) sent: join::Sent,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Per peer: the `first_sequence` of its envelope decided last here (issue 14, pipelined
    /// delivery; in memory only: after a restart the sender starts a new pipeline).
    order: Mutex<HashMap<String, Arc<tokio::sync::watch::Sender<Option<u64>>>>>,
    health: Mutex<HashMap<String, Arc<sender::Health>>>,
}

impl std::fmt::Debug for Federation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Federation")
            .field("peers", &self.peers)
            .finish()
    }
}

impl Federation {
    /// Opens the federation state over the node's store; seeds the config's peers, and keeps
    /// `tls` (the listener's client-certificate verifier) and `access` (the kernel's) in step
    /// with the peers.
    pub fn open(
        config: &Config,
        store: Arc<Store>,
        tls: Option<Arc<crate::tls::DynamicClientVerifier>>,
        access: Arc<RwLock<k::Access>>,
    ) -> Result<Federation, Error> {
        Ok(Federation {
            peers: peers::Peers::load(store.clone(), config, tls, access)?,
            outbox: outbox::Outbox::open(store.clone(), config.federation.outbox_max)?,
            receipts: receipt_store::ReceiptStore::new(store.clone()),
            decisions: decisions::Decisions::new(store.clone()),
            quarantine: quarantine::Quarantine::open(decisions::Decisions::new(store))?,
            sent: join::Sent::default(),
            locks: Mutex::new(HashMap::new()),
            order: Mutex::new(HashMap::new()),
            health: Mutex::new(HashMap::new()),
        })
    }

    /// The lock that serialises admission decisions about one peer's records.
    pub fn peer_lock(&self, peer: &str) -> Arc<tokio::sync::Mutex<()>> {
        match self.locks.lock() {
            Ok(mut m) => m.entry(peer.to_string()).or_default().clone(),
            Err(_) => Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The `first_sequence` of the last envelope of `peer` decided here (see
    /// [`admission::deliver`]): an envelope naming it as `previous_first_sequence` goes next.
    pub fn peer_order(&self, peer: &str) -> Arc<tokio::sync::watch::Sender<Option<u64>>> {
        match self.order.lock() {
            Ok(mut m) => m
                .entry(peer.to_string())
                .or_insert_with(|| Arc::new(tokio::sync::watch::Sender::new(None)))
                .clone(),
            Err(_) => Arc::new(tokio::sync::watch::Sender::new(None)),
        }
    }

    /// A peer's delivery health.
    pub fn health(&self, peer: &str) -> Arc<sender::Health> {
        match self.health.lock() {
            Ok(mut m) => m.entry(peer.to_string()).or_default().clone(),
            Err(_) => Arc::new(sender::Health::default()),
        }
    }
}

/// Starts the router, the senders and the quarantine task; they stop at `shutdown`.
pub fn spawn(cx: &FedContext, shutdown: &CancellationToken) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(route::run(cx.clone(), shutdown.clone())),
        tokio::spawn(sender::run(cx.clone(), shutdown.clone())),
        tokio::spawn(quarantine::run(cx.clone(), shutdown.clone())),
        tokio::spawn(backfill_task(cx).run(shutdown.clone())),
        tokio::spawn(refusals::run_retention(
            cx.refusals.clone(),
            cx.ledger.store().clone(),
            cx.clock.clone(),
            std::time::Duration::from_millis(cx.refusals_prune_interval_ms),
            shutdown.clone(),
        )),
    ]
}

/// The backfill, with the router's rule and cursor (issue 15, item 4).
type NodeBackfill = backfill::Backfill<
    Box<dyn Fn(&accord_proto::pb::work::v1::LedgerEntry) -> Vec<String> + Send + Sync>,
    Box<dyn Fn(&str) -> bool + Send + Sync>,
    Box<dyn Fn() -> Result<u64, Error> + Send + Sync>,
>;

fn backfill_task(cx: &FedContext) -> NodeBackfill {
    let (c1, c2, c3) = (cx.clone(), cx.clone(), cx.clone());
    backfill::Backfill {
        store: cx.ledger.store().clone(),
        outbox: cx.federation.clone(),
        destinations: Box::new(move |e| route::destinations(&c1, e)),
        exists: Box::new(move |p| c2.federation.peers.get(p).is_some()),
        router_cursor: Box::new(move || route::cursor(&c3)),
        per_second: cx.config.backfill_per_second,
        clock: cx.clock.clone(),
    }
}
