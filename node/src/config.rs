//! The node's typed configuration, read from TOML and validated before any port is bound.
//!
//! Every error names the offending field (`ConfigError { field, reason }`), so an operator sees
//! `config: tls.cert: file not found: ...` rather than a stack trace.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub mod envelope_types;

/// The file `accord-node serve --config F` reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The organisation's name (its peer name in federation).
    pub name: String,
    /// Where the RocksDB ledger lives (relative paths are relative to the config file).
    pub data_dir: PathBuf,
    /// The gRPC listen address.
    pub listen: SocketAddr,
    /// The Prometheus metrics listen address (plain HTTP, `GET /metrics`); off when absent.
    #[serde(default)]
    pub metrics_listen: Option<SocketAddr>,
    /// TLS for the gRPC listener.
    pub tls: TlsConfig,
    /// Key files.
    pub keys: KeysConfig,
    /// The Merkle log and checkpointer.
    #[serde(default)]
    pub log: LogConfig,
    /// Parties of this organisation: their record keys and API tokens.
    #[serde(default)]
    pub parties: Vec<PartyConfig>,
    /// Authorities (seed 000: Access).
    #[serde(default)]
    pub authorities: AuthoritiesConfig,
    /// Operator access to AdminService.
    #[serde(default)]
    pub admin: AdminConfig,
    /// The witness policy.
    #[serde(default)]
    pub witnesses: WitnessPolicyConfig,
    /// Federation peers.
    #[serde(default)]
    pub peers: Vec<PeerConfig>,
    /// The Work service party's clock.
    #[serde(default)]
    pub clock: ClockConfig,
    /// Ledger tuning.
    #[serde(default)]
    pub ledger: LedgerConfig,
    /// The persisted projection's in-memory bounds (issue 15).
    #[serde(default)]
    pub projection: ProjectionConfig,
    /// RocksDB's memory (issue 15: bounded memory).
    #[serde(default)]
    pub storage: StorageConfig,
    /// Federation delivery and admission tuning.
    #[serde(default)]
    pub federation: FederationConfig,
    /// Resource bounds for every caller (issue 8; README "Limits").
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Commit-envelope types (seed 003), beside the built-in `budget_transfer`
    /// ([`envelope_types`]).
    #[serde(default)]
    pub envelope_types: Vec<accord_kernel::envelope::EnvelopeType>,
    /// The envelope scheduler (seed 003, "Timeout").
    #[serde(default)]
    pub envelopes: EnvelopesConfig,
}

/// The envelope scheduler: the node ticks every `tick_interval_seconds` (the timeout of each
/// open envelope it coordinates is checked on each tick), unless `external_ticks` is set — then
/// only ticks submitted through `EnvelopeService.SubmitTick` count.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopesConfig {
    /// Seconds between the node's own ticks (seed 003 recommends 5–10).
    #[serde(default = "default_envelope_tick")]
    pub tick_interval_seconds: u64,
    /// Ticks come from an external scheduler only.
    #[serde(default)]
    pub external_ticks: bool,
}

fn default_envelope_tick() -> u64 {
    5
}

impl Default for EnvelopesConfig {
    fn default() -> Self {
        Self {
            tick_interval_seconds: default_envelope_tick(),
            external_ticks: false,
        }
    }
}

/// TLS settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain of the node.
    pub cert: PathBuf,
    /// PEM private key of the node.
    pub key: PathBuf,
    /// PEM CA certificates that client certificates may chain to (mutual TLS).
    #[serde(default)]
    pub client_ca: Vec<PathBuf>,
    /// Refuse connections without a client certificate.
    #[serde(default)]
    pub require_client_cert: bool,
}

/// Key files.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysConfig {
    /// The node's C2SP skey: signs checkpoints (key name = log origin), receipts and the records
    /// it writes itself (Work service party, admissions, records declared on a party's behalf).
    pub node: PathBuf,
}

/// Merkle log settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// The checkpoint origin; defaults to `<name>.accord/log`.
    #[serde(default)]
    pub origin: Option<String>,
    /// How often the checkpointer retries witnesses that have not co-signed the latest
    /// checkpoint, and looks for growth it was not woken for, in ms.
    #[serde(default = "default_checkpoint_interval_ms")]
    pub checkpoint_interval_ms: u64,
    /// The shortest time between two checkpoints, in ms (issue 14: a checkpoint is signed as soon
    /// as the tree grows, at most this often, instead of on a fixed timer).
    #[serde(default = "default_min_checkpoint_interval_ms")]
    pub min_checkpoint_interval_ms: u64,
}

fn default_checkpoint_interval_ms() -> u64 {
    1000
}

fn default_min_checkpoint_interval_ms() -> u64 {
    100
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            origin: None,
            checkpoint_interval_ms: default_checkpoint_interval_ms(),
            min_checkpoint_interval_ms: default_min_checkpoint_interval_ms(),
        }
    }
}

/// One party of this organisation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartyConfig {
    /// The party's name inside the organisation.
    pub name: String,
    /// C2SP vkeys that sign the party's records.
    #[serde(default)]
    pub vkeys: Vec<String>,
    /// SHA-256 (hex) of the bearer token with which the party may `Declare` through the node.
    #[serde(default)]
    pub token_sha256: Option<String>,
    /// SHA-256 (hex) of the DER of TLS client certificates (leaves) that authenticate as this
    /// party. The certificate must also chain to a `tls.client_ca` (checked in the handshake).
    #[serde(default)]
    pub cert_sha256: Vec<String>,
}

/// Authorities granted by Access.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthoritiesConfig {
    /// Parties ("org/name") that may `administrative_close`.
    #[serde(default)]
    pub administrative_close: Vec<String>,
    /// Parties that are principals (may declare obsolete).
    #[serde(default)]
    pub principals: Vec<String>,
    /// Queue owners, as "org/name:queue".
    #[serde(default)]
    pub queue_owners: Vec<String>,
    /// External observers (seed 000: "Execution, control and liveness come from executor or
    /// external Claims"), as "org/name:organisation": the party may write `observation` claims
    /// about the work of commitments whose obligor acts for that organisation.
    #[serde(default)]
    pub observers: Vec<String>,
}

/// Operator access.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// SHA-256 (hex) of the operator's bearer token; AdminService is closed when absent.
    #[serde(default)]
    pub token_sha256: Option<String>,
    /// SHA-256 (hex) of the DER of TLS client certificates (leaves) that authenticate as the
    /// operator for WorkService and LogService reads.
    #[serde(default)]
    pub cert_sha256: Vec<String>,
}

/// K of N witnesses.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WitnessPolicyConfig {
    /// Cosignatures needed for `witnessed`.
    #[serde(default)]
    pub k: usize,
    /// The witnesses.
    #[serde(default)]
    pub list: Vec<WitnessConfig>,
}

/// One witness.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WitnessConfig {
    /// The witness's cosigner vkey: type 0x04 (Ed25519) or 0x06 (ML-DSA-44).
    pub vkey: String,
    /// Its gRPC endpoint (https://host:port).
    pub endpoint: String,
    /// PEM CA to trust for its TLS certificate.
    #[serde(default)]
    pub ca: Option<PathBuf>,
}

/// A federation peer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// The peer organisation's name.
    pub name: String,
    /// Its gRPC endpoint (https://host:port).
    pub endpoint: String,
    /// Keys (C2SP vkeys) that sign its records and envelopes.
    pub vkeys: Vec<String>,
    /// PEM CA of its TLS identity (server and client certificate). Also accepted as `tls_pem`,
    /// the name of `accordctl admin peer add --tls-pem`.
    #[serde(alias = "tls_pem")]
    pub ca: PathBuf,
    /// Optional pin: hex SHA-256 of the peer's DER leaf certificate. When set, only that leaf
    /// is accepted from the peer, as a client and as a server.
    #[serde(default)]
    pub pin_sha256: String,
}

/// The clock that drives the Work service party.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockConfig {
    /// Tick interval, ms.
    #[serde(default = "default_tick_ms")]
    pub tick_ms: u64,
}

fn default_tick_ms() -> u64 {
    1000
}

impl Default for ClockConfig {
    fn default() -> Self {
        Self {
            tick_ms: default_tick_ms(),
        }
    }
}

/// Ledger tuning.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerConfig {
    /// Most records one group commit takes.
    #[serde(default = "default_max_batch")]
    pub max_batch: usize,
}

fn default_max_batch() -> usize {
    4096
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            max_batch: default_max_batch(),
        }
    }
}

/// The persisted projection (issue 15): derived state lives in RocksDB; memory holds a bounded
/// cache of commitments.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectionConfig {
    /// Most commitments kept in memory (misses are read from RocksDB). Each costs its decoded
    /// state plus what the allocator cannot give back around it: measured 18–25 KiB of resident
    /// memory per cached commitment with glibc's allocator (issue 15, BENCHMARKS.md), so the
    /// default keeps the cache near 100 MiB.
    #[serde(default = "default_cache_commitments")]
    pub cache_commitments: usize,
    /// Most runs kept in memory (issue 27; misses are read from `pj_runs`). A run costs its
    /// decoded state: its records' references and their text, each field bounded (README
    /// "Limits": run records).
    #[serde(default = "default_cache_runs")]
    pub cache_runs: usize,
}

fn default_cache_runs() -> usize {
    // The same as `projection::store::DEFAULT_RUN_CACHE`.
    1024
}

fn default_cache_commitments() -> usize {
    // The same as `projection::machine::DEFAULT_CACHE`.
    4_096
}

impl Default for ProjectionConfig {
    fn default() -> Self {
        Self {
            cache_commitments: default_cache_commitments(),
            cache_runs: default_cache_runs(),
        }
    }
}

/// RocksDB's memory (issue 15: a node's resident memory stays bounded at any ledger size).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// The block cache shared by every column family, MiB: data blocks, and the index and
    /// filter blocks of every table (they are charged to it, not held beside it).
    #[serde(default = "default_block_cache_mib")]
    pub block_cache_mib: u64,
}

/// Largest accepted `storage.block_cache_mib` (64 GiB): more is a typo, not a cache.
pub const MAX_BLOCK_CACHE_MIB: u64 = 65_536;

fn default_block_cache_mib() -> u64 {
    64
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            block_cache_mib: default_block_cache_mib(),
        }
    }
}

/// Federation tuning (seed 000, "Federation admission"; DESIGN.md, "Federation").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FederationConfig {
    /// Most records in one envelope.
    #[serde(default = "default_fed_batch")]
    pub batch_size: usize,
    /// A quarantined record whose basis has not arrived by then is rejected
    /// (`quarantine_timeout`), in ms.
    #[serde(default = "default_quarantine_timeout_ms")]
    pub quarantine_timeout_ms: u64,
    /// First retry delay after a failed delivery, ms (doubles per failure, with jitter).
    #[serde(default = "default_retry_base_ms")]
    pub retry_base_ms: u64,
    /// Longest retry delay (and circuit-breaker open period), ms.
    #[serde(default = "default_retry_max_ms")]
    pub retry_max_ms: u64,
    /// Consecutive failures that open a peer's circuit breaker.
    #[serde(default = "default_breaker_failures")]
    pub breaker_failures: u32,
    /// How often receipts still lacking a decision or proof are fetched again, ms.
    #[serde(default = "default_receipt_poll_ms")]
    pub receipt_poll_ms: u64,
    /// Deadline of one delivery call, ms.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Most records queued for one peer (issue 15, item 4). At the bound, routing to that peer
    /// pauses (nothing is dropped: it resumes from where it paused once the peer drains).
    #[serde(default = "default_outbox_max")]
    pub outbox_max: u64,
    /// Ledger entries per second scanned to queue records for a peer that was just added, or
    /// whose routing paused at the outbox bound (backfill, issue 15, item 4).
    #[serde(default = "default_backfill_per_second")]
    pub backfill_per_second: u64,
    /// Envelopes sent to one peer before the first is answered (issue 14, pipelined delivery;
    /// at least 1). Only once the peer answered that it keeps them in order
    /// (`DeliverResponse.sequenced`); to an older peer, one at a time.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// How far behind this node's clock a peer's time for its own record is honoured when this
    /// node is the commitment's home and decides it (issue 26, item 2; ARCHITECTURE.md, "How
    /// organisations converge"), ms. A record that took longer in transit is decided at `now -
    /// clock_skew_ms`. Covers the peers' clock offsets plus their delivery delay; at most
    /// [`MAX_CLOCK_SKEW_MS`].
    #[serde(default = "default_clock_skew_ms")]
    pub clock_skew_ms: u64,
}

/// Largest accepted `federation.clock_skew_ms` (10 minutes): a home that honours a peer's time
/// further back lets that peer answer long-passed deadlines.
pub const MAX_CLOCK_SKEW_MS: u64 = 600_000;

fn default_clock_skew_ms() -> u64 {
    2_000
}

fn default_max_in_flight() -> usize {
    4
}

fn default_outbox_max() -> u64 {
    100_000
}
fn default_backfill_per_second() -> u64 {
    5_000
}

fn default_fed_batch() -> usize {
    256
}
fn default_quarantine_timeout_ms() -> u64 {
    24 * 3600 * 1000
}
fn default_retry_base_ms() -> u64 {
    200
}
fn default_retry_max_ms() -> u64 {
    30_000
}
fn default_breaker_failures() -> u32 {
    5
}
fn default_receipt_poll_ms() -> u64 {
    1000
}
fn default_request_timeout_ms() -> u64 {
    10_000
}

impl Default for FederationConfig {
    fn default() -> Self {
        Self {
            batch_size: default_fed_batch(),
            quarantine_timeout_ms: default_quarantine_timeout_ms(),
            retry_base_ms: default_retry_base_ms(),
            retry_max_ms: default_retry_max_ms(),
            breaker_failures: default_breaker_failures(),
            receipt_poll_ms: default_receipt_poll_ms(),
            request_timeout_ms: default_request_timeout_ms(),
            outbox_max: default_outbox_max(),
            backfill_per_second: default_backfill_per_second(),
            max_in_flight: default_max_in_flight(),
            clock_skew_ms: default_clock_skew_ms(),
        }
    }
}

/// Resource bounds (issue 8, "Bounded resources for every caller"); every default is in README
/// "Limits". Each field is validated (> 0).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Concurrent connections (TLS handshakes included); further connections are closed at once.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: streams one connection may have open; a stream
    /// beyond it is reset with REFUSED_STREAM.
    #[serde(default = "default_max_streams_per_connection")]
    pub max_streams_per_connection: u32,
    /// HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE, bytes.
    #[serde(default = "default_max_header_list_bytes")]
    pub max_header_list_bytes: u32,
    /// After the TLS handshake, the client must send the HTTP/2 preface within this, ms.
    #[serde(default = "default_preface_timeout_ms")]
    pub preface_timeout_ms: u64,
    /// A connection with no traffic (HTTP/2 PINGs aside) for this long is closed, ms.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// HTTP/2 keepalive: the server pings an otherwise silent connection this often, ms.
    #[serde(default = "default_keepalive_interval_ms")]
    pub keepalive_interval_ms: u64,
    /// HTTP/2 keepalive: a ping unanswered for this long closes the connection, ms.
    #[serde(default = "default_keepalive_timeout_ms")]
    pub keepalive_timeout_ms: u64,
    /// Refusals kept at most (a ring: the oldest go first).
    #[serde(default = "default_refusals_max")]
    pub refusals_max: usize,
    /// Refusals older than this are dropped, ms.
    #[serde(default = "default_refusals_max_age_ms")]
    pub refusals_max_age_ms: u64,
    /// How often the refusal ring's retention (count and age) is applied even when no refusal
    /// arrives, ms (issue 15, item 4).
    #[serde(default = "default_refusals_prune_interval_ms")]
    pub refusals_prune_interval_ms: u64,
    /// Refusals stored per source (peer name or remote IP) in a burst; beyond the rate they
    /// are counted but not stored.
    #[serde(default = "default_refusals_burst")]
    pub refusals_burst: u32,
    /// Refusals stored per source per minute, once the burst is spent.
    #[serde(default = "default_refusals_per_minute")]
    pub refusals_per_minute: u32,
    /// Most `ListRecords` streams open at once, over all connections; beyond it a new one is
    /// answered RESOURCE_EXHAUSTED. Default 256.
    #[serde(default = "default_list_streams")]
    pub list_streams: usize,
    /// Most of those streams one party holds at once (issue 27, item 3). Default
    /// `list_streams / 8`, at least 1.
    #[serde(default)]
    pub streams_per_party: Option<usize>,
    /// Streams only the operator may open: the parties together hold at most `list_streams`
    /// less this many. Default `list_streams / 16`.
    #[serde(default)]
    pub operator_stream_reserve: Option<usize>,
    /// Most records in one `SubmitBatch` call; a larger batch is refused whole
    /// (`invalid_argument`, field `records`). Default 1024.
    #[serde(default = "default_max_batch_records")]
    pub max_batch_records: usize,
    /// Commitments with changes not yet sent that one `WatchCommitments` stream may hold
    /// (issue 27, item 3): further changes to one of them coalesce (its latest summary is sent
    /// once); a change to one more closes the stream RESOURCE_EXHAUSTED `watch_lagged`.
    /// 1–[`MAX_WATCH_PENDING`].
    #[serde(default = "default_watch_pending")]
    pub watch_pending: usize,
}

/// Largest `limits.watch_pending`.
pub const MAX_WATCH_PENDING: usize = 1_000_000;

fn default_watch_pending() -> usize {
    1024
}

fn default_list_streams() -> usize {
    256
}

impl LimitsConfig {
    /// The stream bounds with their defaults resolved: (every stream, one party's, the
    /// operator's reserve).
    pub fn streams(&self) -> (usize, usize, usize) {
        let total = self.list_streams;
        (
            total,
            self.streams_per_party.unwrap_or((total / 8).max(1)),
            self.operator_stream_reserve.unwrap_or(total / 16),
        )
    }
}

fn default_max_batch_records() -> usize {
    1024
}

fn default_max_connections() -> usize {
    1024
}
fn default_max_streams_per_connection() -> u32 {
    100
}
fn default_max_header_list_bytes() -> u32 {
    16 * 1024
}
fn default_preface_timeout_ms() -> u64 {
    10_000
}
fn default_idle_timeout_ms() -> u64 {
    300_000
}
fn default_keepalive_interval_ms() -> u64 {
    60_000
}
fn default_keepalive_timeout_ms() -> u64 {
    20_000
}
fn default_refusals_max() -> usize {
    10_000
}
fn default_refusals_max_age_ms() -> u64 {
    7 * 24 * 3600 * 1000
}
fn default_refusals_prune_interval_ms() -> u64 {
    60_000
}
fn default_refusals_burst() -> u32 {
    20
}
fn default_refusals_per_minute() -> u32 {
    60
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_connections: default_max_connections(),
            max_streams_per_connection: default_max_streams_per_connection(),
            max_header_list_bytes: default_max_header_list_bytes(),
            preface_timeout_ms: default_preface_timeout_ms(),
            idle_timeout_ms: default_idle_timeout_ms(),
            keepalive_interval_ms: default_keepalive_interval_ms(),
            keepalive_timeout_ms: default_keepalive_timeout_ms(),
            refusals_max: default_refusals_max(),
            refusals_max_age_ms: default_refusals_max_age_ms(),
            refusals_prune_interval_ms: default_refusals_prune_interval_ms(),
            refusals_burst: default_refusals_burst(),
            list_streams: default_list_streams(),
            streams_per_party: None,
            operator_stream_reserve: None,
            max_batch_records: default_max_batch_records(),
            watch_pending: default_watch_pending(),
            refusals_per_minute: default_refusals_per_minute(),
        }
    }
}

impl LimitsConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        for (field, v) in [
            ("limits.max_connections", self.max_connections as u64),
            (
                "limits.max_streams_per_connection",
                u64::from(self.max_streams_per_connection),
            ),
            (
                "limits.max_header_list_bytes",
                u64::from(self.max_header_list_bytes),
            ),
            ("limits.preface_timeout_ms", self.preface_timeout_ms),
            ("limits.idle_timeout_ms", self.idle_timeout_ms),
            ("limits.keepalive_interval_ms", self.keepalive_interval_ms),
            ("limits.keepalive_timeout_ms", self.keepalive_timeout_ms),
            ("limits.refusals_max", self.refusals_max as u64),
            ("limits.refusals_max_age_ms", self.refusals_max_age_ms),
            (
                "limits.refusals_prune_interval_ms",
                self.refusals_prune_interval_ms,
            ),
            ("limits.refusals_burst", u64::from(self.refusals_burst)),
        ] {
            if v == 0 {
                return Err(err(field, "must be > 0"));
            }
        }
        if !(1..=MAX_WATCH_PENDING).contains(&self.watch_pending) {
            return Err(err(
                "limits.watch_pending",
                format!("must be between 1 and {MAX_WATCH_PENDING}"),
            ));
        }
        Ok(())
    }
}

/// A configuration error naming the field.
#[derive(Debug, thiserror::Error)]
#[error("config: {field}: {reason}")]
pub struct ConfigError {
    /// The dotted field path.
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

fn err(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        reason: reason.into(),
    }
}

impl Config {
    /// Reads and validates a config file; relative paths are resolved against its directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| err("(file)", format!("cannot read {}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, base)
    }

    /// Parses and validates config text, resolving relative paths against `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Config, ConfigError> {
        let mut c: Config = toml::from_str(text).map_err(|e| {
            let field = e
                .span()
                .map(|s| {
                    let line = text[..s.start].lines().count();
                    format!("line {line}")
                })
                .unwrap_or_else(|| "(toml)".into());
            err(field, e.message().to_string())
        })?;
        c.resolve(base);
        c.validate()?;
        Ok(c)
    }

    fn resolve(&mut self, base: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        fix(&mut self.data_dir);
        fix(&mut self.tls.cert);
        fix(&mut self.tls.key);
        self.tls.client_ca.iter_mut().for_each(fix);
        fix(&mut self.keys.node);
        for w in &mut self.witnesses.list {
            if let Some(ca) = &mut w.ca {
                fix(ca);
            }
        }
        for p in &mut self.peers {
            fix(&mut p.ca);
        }
    }

    /// Checks every field that can be checked without binding a port.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_name("name", &self.name)?;
        for (field, p) in [
            ("tls.cert", &self.tls.cert),
            ("tls.key", &self.tls.key),
            ("keys.node", &self.keys.node),
        ] {
            if !p.is_file() {
                return Err(err(field, format!("file not found: {}", p.display())));
            }
        }
        for (i, p) in self.tls.client_ca.iter().enumerate() {
            if !p.is_file() {
                return Err(err(
                    format!("tls.client_ca[{i}]"),
                    format!("file not found: {}", p.display()),
                ));
            }
        }
        if self.tls.require_client_cert && self.tls.client_ca.is_empty() && self.peers.is_empty() {
            return Err(err(
                "tls.require_client_cert",
                "set, but no tls.client_ca and no peers to trust",
            ));
        }
        if let Some(o) = &self.log.origin
            && (o.is_empty() || o.contains(char::is_whitespace) || o.contains('+'))
        {
            return Err(err(
                "log.origin",
                "must be non-empty, without spaces or '+'",
            ));
        }
        if self.log.checkpoint_interval_ms == 0 {
            return Err(err("log.checkpoint_interval_ms", "must be > 0"));
        }

        if self.clock.tick_ms == 0 {
            return Err(err("clock.tick_ms", "must be > 0"));
        }
        if self.ledger.max_batch == 0 {
            return Err(err("ledger.max_batch", "must be > 0"));
        }
        if self.projection.cache_commitments < 2 {
            return Err(err("projection.cache_commitments", "must be >= 2"));
        }
        if self.projection.cache_runs < 2 {
            return Err(err("projection.cache_runs", "must be >= 2"));
        }
        if !(1..=MAX_BLOCK_CACHE_MIB).contains(&self.storage.block_cache_mib) {
            return Err(err(
                "storage.block_cache_mib",
                format!("must be between 1 and {MAX_BLOCK_CACHE_MIB} (MiB)"),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, p) in self.parties.iter().enumerate() {
            check_name(&format!("parties[{i}].name"), &p.name)?;
            // The node's own parties: the Work service, the envelope service and the operator
            // write records no configured party may write (issue 27: ticks and votes are the
            // node's own), so a party may not take their names.
            if crate::ident::RESERVED_PARTIES.contains(&p.name.as_str()) {
                return Err(err(
                    format!("parties[{i}].name"),
                    format!("{:?} is reserved for the node's own records", p.name),
                ));
            }
            if !seen.insert(&p.name) {
                return Err(err(
                    format!("parties[{i}].name"),
                    format!("duplicate party {:?}", p.name),
                ));
            }
            for (j, v) in p.vkeys.iter().enumerate() {
                accord_proto::note::Verifier::from_vkey(v)
                    .map_err(|e| err(format!("parties[{i}].vkeys[{j}]"), e.to_string()))?;
            }
            if let Some(t) = &p.token_sha256 {
                check_sha256_hex(&format!("parties[{i}].token_sha256"), t)?;
            }
        }
        if let Some(t) = &self.admin.token_sha256 {
            check_sha256_hex("admin.token_sha256", t)?;
        }
        self.check_cert_hashes()?;
        if self.limits.max_batch_records == 0 {
            return Err(err("limits.max_batch_records", "must be > 0"));
        }
        if self.limits.list_streams == 0 {
            return Err(err("limits.list_streams", "must be > 0"));
        }
        let l = &self.limits;
        if l.streams_per_party
            .is_some_and(|n| n == 0 || n > l.list_streams)
        {
            return Err(err(
                "limits.streams_per_party",
                format!(
                    "must be between 1 and limits.list_streams ({})",
                    l.list_streams
                ),
            ));
        }
        if l.operator_stream_reserve
            .is_some_and(|n| n >= l.list_streams)
        {
            return Err(err(
                "limits.operator_stream_reserve",
                format!("must be below limits.list_streams ({})", l.list_streams),
            ));
        }
        for (field, list) in [
            (
                "authorities.administrative_close",
                &self.authorities.administrative_close,
            ),
            ("authorities.principals", &self.authorities.principals),
        ] {
            for (i, p) in list.iter().enumerate() {
                parse_party(p).map_err(|r| err(format!("{field}[{i}]"), r))?;
            }
        }
        for (i, q) in self.authorities.queue_owners.iter().enumerate() {
            let field = format!("authorities.queue_owners[{i}]");
            let (p, queue) = q
                .split_once(':')
                .ok_or_else(|| err(&field, format!("{q:?}: expected \"org/name:queue\"")))?;
            parse_party(p).map_err(|r| err(&field, r))?;
            crate::ident::name(queue).map_err(|r| err(&field, format!("queue: {r}")))?;
        }
        for (i, q) in self.authorities.observers.iter().enumerate() {
            let field = format!("authorities.observers[{i}]");
            let (p, org) = q
                .split_once(':')
                .ok_or_else(|| err(&field, format!("{q:?}: expected \"org/name:organisation\"")))?;
            parse_party(p).map_err(|r| err(&field, r))?;
            crate::ident::name(org).map_err(|r| err(&field, format!("organisation: {r}")))?;
        }
        if self.witnesses.k > self.witnesses.list.len() {
            return Err(err(
                "witnesses.k",
                format!(
                    "k = {} but only {} witnesses are listed",
                    self.witnesses.k,
                    self.witnesses.list.len()
                ),
            ));
        }
        for (i, w) in self.witnesses.list.iter().enumerate() {
            let v = accord_proto::note::Verifier::from_vkey(&w.vkey)
                .map_err(|e| err(format!("witnesses.list[{i}].vkey"), e.to_string()))?;
            if !v.kind().is_cosignature() {
                return Err(err(
                    format!("witnesses.list[{i}].vkey"),
                    "not a witness cosigner key (type 0x04 Ed25519 or 0x06 ML-DSA-44)",
                ));
            }
            check_endpoint(&format!("witnesses.list[{i}].endpoint"), &w.endpoint)?;
            if let Some(ca) = &w.ca
                && !ca.is_file()
            {
                return Err(err(
                    format!("witnesses.list[{i}].ca"),
                    format!("file not found: {}", ca.display()),
                ));
            }
        }
        self.limits.validate()?;
        envelope_types::validate(self)?;
        let f = &self.federation;
        for (field, v) in [
            ("federation.batch_size", f.batch_size as u64),
            ("federation.quarantine_timeout_ms", f.quarantine_timeout_ms),
            ("federation.retry_base_ms", f.retry_base_ms),
            ("federation.breaker_failures", u64::from(f.breaker_failures)),
            ("federation.receipt_poll_ms", f.receipt_poll_ms),
            ("federation.request_timeout_ms", f.request_timeout_ms),
            ("federation.outbox_max", f.outbox_max),
            ("federation.backfill_per_second", f.backfill_per_second),
            ("federation.max_in_flight", f.max_in_flight as u64),
            ("federation.clock_skew_ms", f.clock_skew_ms),
        ] {
            if v == 0 {
                return Err(err(field, "must be > 0"));
            }
        }
        if f.clock_skew_ms > MAX_CLOCK_SKEW_MS {
            return Err(err(
                "federation.clock_skew_ms",
                format!("must be at most {MAX_CLOCK_SKEW_MS} (10 minutes)"),
            ));
        }
        if f.retry_max_ms < f.retry_base_ms {
            return Err(err(
                "federation.retry_max_ms",
                "must be >= federation.retry_base_ms",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, p) in self.peers.iter().enumerate() {
            check_name(&format!("peers[{i}].name"), &p.name)?;
            if p.name == self.name || !seen.insert(&p.name) {
                return Err(err(
                    format!("peers[{i}].name"),
                    format!("duplicate organisation {:?}", p.name),
                ));
            }
            check_endpoint(&format!("peers[{i}].endpoint"), &p.endpoint)?;
            if p.vkeys.is_empty() {
                return Err(err(
                    format!("peers[{i}].vkeys"),
                    "at least one key is required",
                ));
            }
            for (j, v) in p.vkeys.iter().enumerate() {
                accord_proto::note::Verifier::from_vkey(v)
                    .map_err(|e| err(format!("peers[{i}].vkeys[{j}]"), e.to_string()))?;
            }
            if !p.ca.is_file() {
                return Err(err(
                    format!("peers[{i}].ca"),
                    format!("file not found: {}", p.ca.display()),
                ));
            }
            let pin = p.pin_sha256.trim();
            if !pin.is_empty() && (pin.len() != 64 || hex::decode(pin).is_err()) {
                return Err(err(
                    format!("peers[{i}].pin_sha256"),
                    "expected 64 hex digits: the SHA-256 of the peer's DER leaf certificate",
                ));
            }
        }
        Ok(())
    }

    /// Client-certificate hashes: each well-formed, and each mapped to one identity only.
    fn check_cert_hashes(&self) -> Result<(), ConfigError> {
        let mut seen = std::collections::HashMap::new();
        let lists = self
            .parties
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("parties[{i}].cert_sha256"), &p.cert_sha256))
            .chain([("admin.cert_sha256".to_string(), &self.admin.cert_sha256)]);
        for (field, list) in lists {
            for (j, h) in list.iter().enumerate() {
                let f = format!("{field}[{j}]");
                match hex::decode(h) {
                    Ok(b) if b.len() == 32 => {}
                    _ => {
                        return Err(err(
                            f,
                            "must be 64 hex digits (SHA-256 of the certificate's DER)",
                        ));
                    }
                }
                if let Some(first) = seen.insert(h.to_ascii_lowercase(), f.clone()) {
                    return Err(err(f, format!("the same certificate is already {first}")));
                }
            }
        }
        Ok(())
    }

    /// The log origin (checkpoint first line, and the key name of checkpoint signatures).
    pub fn origin(&self) -> String {
        self.log
            .origin
            .clone()
            .unwrap_or_else(|| format!("{}.accord/log", self.name))
    }
}

fn check_name(field: &str, name: &str) -> Result<(), ConfigError> {
    crate::ident::name(name).map_err(|r| err(field, r))
}

fn check_sha256_hex(field: &str, t: &str) -> Result<(), ConfigError> {
    match hex::decode(t) {
        Ok(b) if b.len() == 32 => Ok(()),
        _ => Err(err(field, "must be 64 hex digits (SHA-256 of the token)")),
    }
}

fn check_endpoint(field: &str, e: &str) -> Result<(), ConfigError> {
    crate::ident::endpoint(e).map_err(|r| err(field, r))
}

/// Parses "org/name" into its two parts (both names, [`crate::ident::party`]).
pub fn parse_party(s: &str) -> Result<(String, String), String> {
    crate::ident::party(s).map(|(o, n)| (o.into(), n.into()))
}

impl Config {
    /// Validates an organisation or party name (used by `init` for its flags).
    pub fn check_org_name(name: &str) -> Result<(), ConfigError> {
        check_name("--name", name)
    }
}
