//! The node's typed configuration, read from TOML and validated before any port is bound.
//!
//! Every error names the offending field (`ConfigError { field, reason }`), so an operator sees
//! `config: tls.cert: file not found: ...` rather than a stack trace.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub mod envelope_types;
mod storage;
mod tuning;
mod validate;

pub use storage::{Backend, LEASE_MS, MAX_BLOCK_CACHE_MIB, StorageConfig};
pub use tuning::*;

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
    /// The store: its engine (issue 31) and RocksDB's memory (issue 15).
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

/// 25 ms (issue 32, item 5: recorded → witnessed p99 ≤ 50 ms): at most 40 checkpoints a second,
/// each one signature, one stored value and one request per witness — small beside the group
/// commits it follows.
fn default_min_checkpoint_interval_ms() -> u64 {
    25
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
    /// Its gRPC endpoint (https://host:port), or several separated by commas: the instances of
    /// its node (a writer and standbys on one database, issue 31), tried in order until one
    /// answers.
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
        if let Some(p) = &mut self.storage.password_file {
            fix(p);
        }
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
