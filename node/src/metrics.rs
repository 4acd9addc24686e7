//! Prometheus metrics of one node (DESIGN.md, "Operations": a separate listener,
//! `metrics_listen`, series named `accord_*`).
//!
//! A [`Metrics`] holds its own [`Registry`] — no global recorder, since the demo and the
//! benchmarks run two nodes in one process. Counters and histograms are updated where things
//! happen, with one-line calls (ledger writer, checkpointer, witness client, federation inbox);
//! gauges that derive from state (ledger size, checkpoint sizes, queue depths, breakers,
//! quarantine size) are computed from the node's state when scraped ([`gather`] over a [`Snapshot`]).
//!
//! `crate::scrape::serve` answers `GET /metrics` in the Prometheus text format on its own
//! listener.

use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// The node's metrics and their registry.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    appends: IntCounter,
    duplicates: IntCounter,
    group_commit_records: Histogram,
    append_seconds: Histogram,
    append_stages: AppendStages,
    ledger_records: IntGauge,
    checkpoint_size: IntGauge,
    checkpoint_age: Gauge,
    witnessed_size: IntGauge,
    cosignature_failures: IntCounterVec,
    peer_queue_depth: IntGaugeVec,
    peer_oldest_queued: GaugeVec,
    peer_breaker: IntGaugeVec,
    peer_enabled: IntGaugeVec,
    peer_outbox_full: IntGaugeVec,
    peer_backfilling: IntGaugeVec,
    admissions: IntCounterVec,
    refusals: IntCounterVec,
    quarantine_size: IntGauge,
    projection_replayed: IntGauge,
    projection_cached: IntGauge,
    projection_cached_runs: IntGauge,
    rocksdb_memory: IntGaugeVec,
    tls_handshake_failures: IntCounterVec,
    connections_closed: IntCounterVec,
    service_ticks: IntCounter,
    service_ticked_at: IntGauge,
    /// Unix ms when the checkpointer last found the latest checkpoint covering the whole ledger
    /// (0 = not yet since start).
    checkpoint_current_at: Arc<AtomicI64>,
    started: Instant,
}

fn must<T>(r: prometheus::Result<T>) -> T {
    // Only fails on an invalid or duplicate name, which are fixed here: a bug, found by the
    // tests on first use.
    r.expect("metric definition")
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every series of the node.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let reg = |c: Box<dyn prometheus::core::Collector>| must(registry.register(c));
        let counter = |name: &str, help: &str| {
            let c = must(IntCounter::new(name, help));
            reg(Box::new(c.clone()));
            c
        };
        let counter_vec = |name: &str, help: &str, labels: &[&str]| {
            let c = must(IntCounterVec::new(Opts::new(name, help), labels));
            reg(Box::new(c.clone()));
            c
        };
        let gauge = |name: &str, help: &str| {
            let g = must(IntGauge::new(name, help));
            reg(Box::new(g.clone()));
            g
        };
        let gauge_vec = |name: &str, help: &str, labels: &[&str]| {
            let g = must(IntGaugeVec::new(Opts::new(name, help), labels));
            reg(Box::new(g.clone()));
            g
        };
        let appends = counter(
            "accord_ledger_appends_total",
            "Records appended to the ledger (synced), duplicates excluded.",
        );
        let duplicates = counter(
            "accord_ledger_duplicate_appends_total",
            "Appends answered with the original entry (the record was already in the ledger).",
        );
        let group_commit_records = must(Histogram::with_opts(
            HistogramOpts::new(
                "accord_ledger_group_commit_records",
                "New records written per group commit (one synced RocksDB write).",
            )
            .buckets(vec![
                1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
            ]),
        ));
        reg(Box::new(group_commit_records.clone()));
        let append_seconds = must(Histogram::with_opts(
            HistogramOpts::new(
                "accord_ledger_append_seconds",
                "Time from an append being queued to its answer (recorded: synced).",
            )
            .buckets(prometheus::exponential_buckets(0.000_25, 2.0, 16).unwrap_or_default()),
        ));
        reg(Box::new(append_seconds.clone()));
        let stage_vec = must(HistogramVec::new(
            HistogramOpts::new(
                "accord_append_stage_seconds",
                "Time an append spends in each stage of the record path (issue 14): \
                 verify_queue (waiting for a verifier thread), verify (one verify_batch, per \
                 drained set), writer_queue (waiting for the ledger writer), apply (the kernel, \
                 encoding and tree hashing of one group commit), sync (its synced RocksDB write), \
                 publish (making it visible to readers, including the wait for the projection's \
                 write lock).",
            )
            .buckets(prometheus::exponential_buckets(0.000_062_5, 2.0, 16).unwrap_or_default()),
            &["stage"],
        ));
        reg(Box::new(stage_vec.clone()));
        let stage = |s: &str| stage_vec.with_label_values(&[s]);
        let append_stages = AppendStages {
            verify_queue: stage("verify_queue"),
            verify: stage("verify"),
            writer_queue: stage("writer_queue"),
            apply: stage("apply"),
            sync: stage("sync"),
            publish: stage("publish"),
        };
        let ledger_records = gauge("accord_ledger_records", "Records in the ledger.");
        let checkpoint_size = gauge(
            "accord_log_checkpoint_size",
            "Tree size of the latest signed checkpoint.",
        );
        let checkpoint_age = must(Gauge::new(
            "accord_log_checkpoint_age_seconds",
            "Seconds since the checkpointer last found the latest checkpoint covering the whole \
             ledger (since start-up until it first does).",
        ));
        reg(Box::new(checkpoint_age.clone()));
        let witnessed_size = gauge(
            "accord_log_witnessed_size",
            "Tree size of the latest checkpoint co-signed by K witnesses.",
        );
        let cosignature_failures = counter_vec(
            "accord_witness_cosignature_failures_total",
            "Failed attempts to get a witness's cosignature, by witness (its key name).",
            &["witness"],
        );
        let peer_queue_depth = gauge_vec(
            "accord_federation_queue_depth",
            "Records queued for delivery, per peer.",
            &["peer"],
        );
        let peer_oldest_queued = must(GaugeVec::new(
            Opts::new(
                "accord_federation_oldest_queued_age_seconds",
                "Age of the oldest record queued for a peer (0 when its queue is empty).",
            ),
            &["peer"],
        ));
        reg(Box::new(peer_oldest_queued.clone()));
        let peer_breaker = gauge_vec(
            "accord_federation_breaker_state",
            "A peer's circuit breaker: 1 for its current state (closed, open, half_open).",
            &["peer", "state"],
        );
        let peer_enabled = gauge_vec(
            "accord_federation_peer_enabled",
            "1 when delivery to and from the peer is enabled.",
            &["peer"],
        );
        let peer_outbox_full = gauge_vec(
            "accord_federation_outbox_full",
            "1 when a peer's queue is at `federation.outbox_max`: routing to it is paused.",
            &["peer"],
        );
        let peer_backfilling = gauge_vec(
            "accord_federation_backfilling",
            "1 while records for a peer are queued from the ledger (peer just added, or routing paused at the bound).",
            &["peer"],
        );
        let admissions = counter_vec(
            "accord_federation_admissions_total",
            "Admission decisions about peers' records (also a quarantine closing), by outcome and reason code.",
            &["outcome", "code"],
        );
        let refusals = counter_vec(
            "accord_federation_refusals_total",
            "Envelopes and calls refused as a whole, by reason code.",
            &["code"],
        );
        let quarantine_size = gauge(
            "accord_federation_quarantine_records",
            "Records in quarantine (waiting for their basis or an operator).",
        );
        let projection_replayed = gauge(
            "accord_projection_replayed_records",
            "Records the last start-up replayed through the kernel (those after the persisted \
             projection's watermark).",
        );
        let projection_cached = gauge(
            "accord_projection_cached_commitments",
            "Commitments in the projection's in-memory cache (projection.cache_commitments).",
        );
        let projection_cached_runs = gauge(
            "accord_projection_cached_runs",
            "Runs in the projection's in-memory run cache (projection.cache_runs; issue 27).",
        );
        let rocksdb_memory = gauge_vec(
            "accord_rocksdb_memory_bytes",
            "RocksDB's memory by RocksDB property (issue 15): rocksdb.block-cache-usage (bounded by \
             storage.block_cache_mib; index and filter blocks included), \
             rocksdb.block-cache-pinned-usage, rocksdb.estimate-table-readers-mem (outside the \
             cache), rocksdb.cur-size-all-mem-tables (memtables, all families).",
            &["property"],
        );
        let tls_handshake_failures = counter_vec(
            "accord_tls_handshake_failures_total",
            "TLS handshakes refused, by side (server: a client we refused; client: a peer that \
             refused us).",
            &["side"],
        );
        let connections_closed = counter_vec(
            "accord_connections_closed_total",
            "Connections the listener closed itself, by reason (max_connections: over \
             `limits.max_connections`; timeout: no HTTP/2 preface in time, or idle).",
            &["reason"],
        );
        let service_ticks = counter(
            "accord_work_service_ticks_total",
            "Ticks of the Work service clock completed (each wrote every time record due then).",
        );
        let service_ticked_at = gauge(
            "accord_work_service_ticked_at_ms",
            "The node-clock time (Unix ms) the last completed Work service tick looked at.",
        );
        Metrics {
            registry,
            service_ticks,
            service_ticked_at,
            appends,
            duplicates,
            group_commit_records,
            append_seconds,
            append_stages,
            ledger_records,
            checkpoint_size,
            checkpoint_age,
            witnessed_size,
            cosignature_failures,
            peer_queue_depth,
            peer_oldest_queued,
            peer_breaker,
            peer_enabled,
            peer_outbox_full,
            peer_backfilling,
            admissions,
            refusals,
            quarantine_size,
            projection_replayed,
            projection_cached,
            projection_cached_runs,
            rocksdb_memory,
            tls_handshake_failures,
            connections_closed,
            checkpoint_current_at: Arc::new(AtomicI64::new(0)),
            started: Instant::now(),
        }
    }

    /// The registry (for tests and embedding).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// One group commit wrote `records` new records and answered `duplicates` duplicates.
    pub fn group_commit(&self, records: usize, duplicates: usize) {
        if records > 0 {
            self.group_commit_records.observe(records as f64);
        }
        self.appends.inc_by(records as u64);
        self.duplicates.inc_by(duplicates as u64);
    }

    /// One append was answered after `elapsed`.
    pub fn append_latency(&self, elapsed: Duration) {
        self.append_seconds.observe(elapsed.as_secs_f64());
    }

    /// One append (or one batch of them, for `verify`, `apply`, `sync` and `publish`) spent
    /// `elapsed` in `stage`.
    pub fn append_stage(&self, stage: AppendStage, elapsed: Duration) {
        let s = &self.append_stages;
        let h = match stage {
            AppendStage::VerifyQueue => &s.verify_queue,
            AppendStage::Verify => &s.verify,
            AppendStage::WriterQueue => &s.writer_queue,
            AppendStage::Apply => &s.apply,
            AppendStage::Sync => &s.sync,
            AppendStage::Publish => &s.publish,
        };
        h.observe(elapsed.as_secs_f64());
    }

    /// A Work service tick that looked at `now_ms` completed (every record due then written).
    pub fn service_ticked(&self, now_ms: i64) {
        self.service_ticked_at.set(now_ms);
        self.service_ticks.inc();
    }

    /// (ticks completed, the node-clock time the last one looked at).
    pub fn service_ticks(&self) -> (u64, i64) {
        (self.service_ticks.get(), self.service_ticked_at.get())
    }

    /// The checkpointer found the latest checkpoint covering the whole ledger now.
    pub fn checkpoint_current(&self, now_ms: i64) {
        self.checkpoint_current_at.store(now_ms, Ordering::Relaxed);
    }

    /// A witness did not cosign (error, timeout, no valid cosignature, larger tree).
    pub fn cosignature_failed(&self, witness: &str) {
        self.cosignature_failures
            .with_label_values(&[witness])
            .inc();
    }

    /// An admission decision about a peer's record.
    pub fn admission(&self, d: &accord_proto::codes::Decision) {
        let outcome = match d {
            accord_proto::codes::Decision::Admitted => "admitted",
            accord_proto::codes::Decision::Quarantined(_) => "quarantined",
            accord_proto::codes::Decision::Rejected(_) => "rejected",
        };
        self.admissions
            .with_label_values(&[outcome, d.code()])
            .inc();
    }

    /// A refused envelope or call.
    pub fn refusal(&self, code: &str) {
        self.refusals.with_label_values(&[code]).inc();
    }

    /// A TLS handshake refused, on `side` (`server` or `client`).
    pub fn tls_handshake_failed(&self, side: &str) {
        self.tls_handshake_failures.with_label_values(&[side]).inc();
    }

    /// Time since the checkpointer last found the latest checkpoint covering the whole ledger
    /// (since start-up until it first does).
    pub fn checkpoint_age(&self, now_ms: i64) -> Duration {
        match self.checkpoint_current_at.load(Ordering::Relaxed) {
            0 => self.started.elapsed(),
            at => Duration::from_millis((now_ms - at).max(0) as u64),
        }
    }
}

/// A stage of the record path, for [`Metrics::append_stage`] (`accord_append_stage_seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendStage {
    /// A request's signatures waiting for a verifier thread.
    VerifyQueue,
    /// One `verify_batch` over a drained set of requests.
    Verify,
    /// A request's records waiting for the ledger writer to take them.
    WriterQueue,
    /// One group commit's kernel decisions, encoding and tree hashing.
    Apply,
    /// One group commit's synced write.
    Sync,
    /// One group commit made visible to readers (with the wait for the projection lock).
    Publish,
}

/// The children of `accord_append_stage_seconds`, resolved once (no label lookup per append).
#[derive(Debug, Clone)]
struct AppendStages {
    verify_queue: Histogram,
    verify: Histogram,
    writer_queue: Histogram,
    apply: Histogram,
    sync: Histogram,
    publish: Histogram,
}

/// The state-derived gauges, read from the node's state at scrape time by
/// [`crate::scrape`] (which knows the node; this module knows only its counters, so the
/// ledger, the log and federation can count here without a module cycle).
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Records in the ledger.
    pub ledger_records: u64,
    /// Size of the latest checkpoint.
    pub checkpoint_size: u64,
    /// Size of the latest witnessed checkpoint.
    pub witnessed_size: u64,
    /// The node clock's now.
    pub now_ms: i64,
    /// One entry per peer.
    pub peers: Vec<PeerGauges>,
    /// Records in quarantine.
    pub quarantine_size: u64,
    /// Records the last start-up replayed into the persisted projection (issue 15).
    pub projection_replayed: u64,
    /// Commitments in the projection's in-memory cache.
    pub projection_cached: u64,
    /// Runs in the projection's run cache.
    pub projection_cached_runs: u64,
    /// The listener's refused handshakes, refused connections and timed-out connections.
    pub listener: (u64, u64, u64),
    /// RocksDB's memory: `(property, bytes)` (`ledger::Store::memory`).
    pub rocksdb_memory: Vec<(&'static str, u64)>,
}

/// One peer's gauges.
#[derive(Debug, Default)]
pub struct PeerGauges {
    /// The peer's name.
    pub name: String,
    /// Queued records.
    pub depth: u64,
    /// When its oldest queued record was queued (Unix ms), if any.
    pub oldest_queued_ms: Option<i64>,
    /// Every breaker state's label and whether the breaker is in it.
    pub breaker: Vec<(&'static str, bool)>,
    /// Enabled.
    pub enabled: bool,
    /// Its outbox is at `federation.outbox_max` (backpressure; issue 15).
    pub outbox_full: bool,
    /// It is behind: the backfill is queuing its records (issue 15).
    pub backfilling: bool,
}

/// Sets the state-derived gauges from `s` and encodes every series in the Prometheus text
/// format.
pub fn gather(m: &Metrics, s: &Snapshot) -> Result<String, crate::Error> {
    m.ledger_records.set(s.ledger_records as i64);
    m.checkpoint_size.set(s.checkpoint_size as i64);
    m.witnessed_size.set(s.witnessed_size as i64);
    m.checkpoint_age
        .set(m.checkpoint_age(s.now_ms).as_secs_f64());
    let now = s.now_ms;
    // Peers removed since the last scrape disappear from the per-peer series.
    m.peer_queue_depth.reset();
    m.peer_oldest_queued.reset();
    m.peer_breaker.reset();
    m.peer_enabled.reset();
    m.peer_outbox_full.reset();
    m.peer_backfilling.reset();
    for p in &s.peers {
        let name = p.name.as_str();
        m.peer_queue_depth
            .with_label_values(&[name])
            .set(p.depth as i64);
        m.peer_oldest_queued.with_label_values(&[name]).set(
            p.oldest_queued_ms
                .map_or(0.0, |t| ((now - t).max(0) as f64) / 1000.0),
        );
        for (state, on) in &p.breaker {
            m.peer_breaker
                .with_label_values(&[name, state])
                .set(i64::from(*on));
        }
        m.peer_enabled
            .with_label_values(&[name])
            .set(i64::from(p.enabled));
        m.peer_outbox_full
            .with_label_values(&[name])
            .set(i64::from(p.outbox_full));
        m.peer_backfilling
            .with_label_values(&[name])
            .set(i64::from(p.backfilling));
    }
    m.quarantine_size.set(s.quarantine_size as i64);
    m.projection_replayed.set(s.projection_replayed as i64);
    m.projection_cached.set(s.projection_cached as i64);
    m.projection_cached_runs
        .set(s.projection_cached_runs as i64);
    for (property, bytes) in &s.rocksdb_memory {
        m.rocksdb_memory
            .with_label_values(&[property])
            .set(*bytes as i64);
    }
    // The listener counts in `tls::ListenerStats` (it runs before any service and knows no
    // registry); the counters here catch up with it at each scrape.
    catch_up(
        &m.tls_handshake_failures.with_label_values(&["server"]),
        s.listener.0,
    );
    catch_up(
        &m.connections_closed.with_label_values(&["max_connections"]),
        s.listener.1,
    );
    catch_up(
        &m.connections_closed.with_label_values(&["timeout"]),
        s.listener.2,
    );
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&m.registry.gather(), &mut out)
        .map_err(|e| crate::Error::Internal(format!("metrics: {e}")))?;
    String::from_utf8(out).map_err(|e| crate::Error::Internal(format!("metrics: {e}")))
}

/// Raises a counter to `total` (never lowers it).
fn catch_up(c: &prometheus::IntCounter, total: u64) {
    let cur = c.get();
    if total > cur {
        c.inc_by(total - cur);
    }
}
