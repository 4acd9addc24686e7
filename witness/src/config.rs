//! The witness configuration: a TOML file (see `witness/README.md` and the file `init` writes),
//! parsed and then validated into a typed [`Config`] before any port is bound. Every validation
//! error names its field (`config: grpc.listen: ...`). Relative paths are relative to the
//! directory of the config file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use accord_proto::checkpoint::Cosigner;
use accord_proto::note::check_key_name;
use rustls::ServerConfig;
use serde::Deserialize;

use crate::error::Error;
use crate::logs::LogConfig;
use crate::tls;
use crate::witness::Limits;

/// The default bound on an add-checkpoint request body (and gRPC message).
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024;

/// The default time for a request's headers to arrive (slowloris), ms.
pub const DEFAULT_HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// The default time for a request's body to arrive once its headers have, ms.
pub const DEFAULT_BODY_READ_TIMEOUT_MS: u64 = 10_000;
/// The default cap on open HTTP connections.
pub const DEFAULT_HTTP_MAX_CONNECTIONS: usize = 1024;

/// Bounds of the HTTP listener (issue 8): slow clients and connection floods.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// A request's headers must arrive within this (`http.header_read_timeout_ms`).
    pub header_read_timeout: std::time::Duration,
    /// A request's body must arrive within this once the headers have
    /// (`http.body_read_timeout_ms`); else 408.
    pub body_read_timeout: std::time::Duration,
    /// Open connections at most (`http.max_connections`); further ones are closed at once.
    pub max_connections: usize,
    /// The request body bound (`http.max_body_bytes`).
    pub max_body_bytes: usize,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    name: String,
    #[serde(default)]
    key_file: Option<PathBuf>,
    #[serde(default)]
    key_files: Option<Vec<PathBuf>>,
    data_dir: PathBuf,
    admin_token_sha256: String,
    #[serde(default)]
    metrics_listen: Option<String>,
    grpc: RawGrpc,
    http: RawHttp,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    logs: Vec<RawLog>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrpc {
    listen: String,
    tls_cert: PathBuf,
    tls_key: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    listen: String,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    max_body_bytes: Option<usize>,
    header_read_timeout_ms: Option<u64>,
    body_read_timeout_ms: Option<u64>,
    max_connections: Option<usize>,
    #[serde(default)]
    submission_prefix: Option<String>,
    #[serde(default)]
    monitoring_prefix: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_in_flight: Option<usize>,
    max_queued_per_origin: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLog {
    origin: String,
    vkeys: Vec<String>,
}

/// A validated configuration, with its key and TLS material loaded.
#[derive(Clone)]
pub struct Config {
    /// The witness name (its cosigner key name).
    pub name: String,
    /// The first cosigning key (`key_file`, or the first of `key_files`), named `name`.
    pub cosigner: Cosigner,
    /// All cosigning keys (Ed25519 type 0x04 and/or ML-DSA-44 type 0x06), all named `name`;
    /// add-checkpoint answers with one cosignature line per key, in this order.
    pub cosigners: Vec<Cosigner>,
    /// URL path prefixes of the HTTP interface (c2sp.org/tlog-witness "HTTP Interface").
    pub prefixes: Prefixes,
    /// The RocksDB directory.
    pub data_dir: PathBuf,
    /// SHA-256 of the admin bearer token.
    pub admin_token_sha256: [u8; 32],
    /// The gRPC listen address (always TLS).
    pub grpc_listen: SocketAddr,
    /// The gRPC TLS config (ALPN h2).
    pub grpc_tls: Arc<ServerConfig>,
    /// The C2SP HTTP listen address.
    pub http_listen: SocketAddr,
    /// TLS for the HTTP listener (ALPN http/1.1); plain HTTP when `None`.
    pub http_tls: Option<Arc<ServerConfig>>,
    /// The bound on a request body / gRPC message, in bytes.
    pub max_body_bytes: usize,
    /// Admission limits.
    pub limits: Limits,
    /// Bounds of the HTTP listener.
    pub http_limits: HttpLimits,
    /// The logs written into the store at start.
    pub logs: Vec<LogConfig>,
    /// The Prometheus metrics listen address (plain HTTP, `GET /metrics`); off when `None`.
    pub metrics_listen: Option<SocketAddr>,
}

/// The two URL path prefixes of c2sp.org/tlog-witness: the *submission prefix* (`POST
/// <prefix>/add-checkpoint`, `POST <prefix>/sign-subtree`) and the *monitoring prefix* (`GET
/// <prefix>/<origin hash>/checkpoint`). Each is empty (the root) or starts with `/` and does not
/// end with one; they may be equal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prefixes {
    /// `http.submission_prefix`.
    pub submission: String,
    /// `http.monitoring_prefix`.
    pub monitoring: String,
}

fn parse_prefix(field: &str, p: Option<String>) -> Result<String, Error> {
    let p = p.unwrap_or_default();
    let ok = p.is_empty()
        || (p.starts_with('/')
            && !p.ends_with('/')
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/-._~".contains(&b))
            && !p.contains("//"));
    if ok {
        Ok(p)
    } else {
        Err(Error::config(
            field,
            "must be empty or a path like \"/witness\" (starts with '/', no trailing '/', \
             letters, digits and -._~ only)",
        ))
    }
}

/// Reads and parses one cosigner key file; errors name `field`.
fn load_cosigner(field: &str, base: &Path, p: &Path, name: &str) -> Result<Cosigner, Error> {
    let key_path = resolve(base, p);
    let skey = std::fs::read_to_string(&key_path)
        .map_err(|e| Error::config(field, format!("{}: {e}", key_path.display())))?;
    let cosigner = Cosigner::from_skey(skey.trim()).map_err(|e| {
        Error::config(
            field,
            format!(
                "{}: not a cosigner (type 0x04 Ed25519 or 0x06 ML-DSA-44) private key: {e}",
                key_path.display()
            ),
        )
    })?;
    if cosigner.name() != name {
        return Err(Error::config(
            field,
            format!(
                "the key is named {:?}, the witness {:?}",
                cosigner.name(),
                name
            ),
        ));
    }
    Ok(cosigner)
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("name", &self.name)
            .field("data_dir", &self.data_dir)
            .field("grpc_listen", &self.grpc_listen)
            .field("http_listen", &self.http_listen)
            .field("http_tls", &self.http_tls.is_some())
            .field("max_body_bytes", &self.max_body_bytes)
            .field("limits", &self.limits)
            .field("logs", &self.logs.len())
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Reads and validates the config file at `path`.
    pub fn load(path: &Path) -> Result<Config, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Config::from_toml(&text, base)
    }

    /// Parses and validates config text; relative paths are resolved against `base`.
    pub fn from_toml(text: &str, base: &Path) -> Result<Config, Error> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let field = e.span().map_or_else(
                || "(file)".to_owned(),
                |s| {
                    let line = text[..s.start.min(text.len())].lines().count().max(1);
                    format!("(line {line})")
                },
            );
            Error::config(field, e.message())
        })?;
        raw.validate(base)
    }
}

fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_owned()
    } else {
        base.join(p)
    }
}

fn parse_addr(field: &str, s: &str) -> Result<SocketAddr, Error> {
    s.parse()
        .map_err(|e| Error::config(field, format!("{s:?} is not an IP:port address ({e})")))
}

/// Loads a listener's TLS files; errors name `<section>.tls_cert` or `<section>.tls_key`.
fn tls_config(
    section: &str,
    base: &Path,
    cert: &Path,
    key: &Path,
    alpn: &[u8],
) -> Result<Arc<ServerConfig>, Error> {
    let field = |name: &str| format!("{section}.{name}");
    let certs =
        tls::load_certs(&resolve(base, cert)).map_err(|e| Error::config(field("tls_cert"), e))?;
    let key = tls::load_key(&resolve(base, key)).map_err(|e| Error::config(field("tls_key"), e))?;
    tls::server_config(certs, key, alpn).map_err(|e| Error::config(field("tls_cert"), e))
}

fn limit(field: &str, v: Option<usize>, default: usize) -> Result<usize, Error> {
    match v {
        Some(0) => Err(Error::config(field, "must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

impl RawConfig {
    fn validate(self, base: &Path) -> Result<Config, Error> {
        check_key_name(&self.name).map_err(|e| Error::config("name", e))?;

        let cosigners = match (&self.key_file, &self.key_files) {
            (Some(p), None) => vec![load_cosigner("key_file", base, p, &self.name)?],
            (None, Some(ps)) => {
                if ps.is_empty() || ps.len() > 2 {
                    return Err(Error::config(
                        "key_files",
                        "must list one or two key files (at most one per key type)",
                    ));
                }
                let mut keys: Vec<Cosigner> = Vec::with_capacity(ps.len());
                for (i, p) in ps.iter().enumerate() {
                    let field = format!("key_files[{i}]");
                    let c = load_cosigner(&field, base, p, &self.name)?;
                    if keys.iter().any(|k| k.kind() == c.kind()) {
                        return Err(Error::config(field, "a second key of the same type"));
                    }
                    keys.push(c);
                }
                keys
            }
            (None, None) => {
                return Err(Error::config("key_file", "missing (or set key_files)"));
            }
            (Some(_), Some(_)) => {
                return Err(Error::config(
                    "key_files",
                    "set key_file or key_files, not both",
                ));
            }
        };
        let cosigner = cosigners[0].clone();
        let prefixes = Prefixes {
            submission: parse_prefix("http.submission_prefix", self.http.submission_prefix)?,
            monitoring: parse_prefix("http.monitoring_prefix", self.http.monitoring_prefix)?,
        };

        if self.data_dir.as_os_str().is_empty() {
            return Err(Error::config("data_dir", "empty"));
        }
        let data_dir = resolve(base, &self.data_dir);

        let mut admin_token_sha256 = [0u8; 32];
        hex::decode_to_slice(self.admin_token_sha256.trim(), &mut admin_token_sha256).map_err(
            |_| {
                Error::config(
                    "admin_token_sha256",
                    "must be 64 hex digits (SHA-256 of the token)",
                )
            },
        )?;

        let grpc_listen = parse_addr("grpc.listen", &self.grpc.listen)?;
        let grpc_tls = tls_config(
            "grpc",
            base,
            &self.grpc.tls_cert,
            &self.grpc.tls_key,
            tls::ALPN_H2,
        )?;

        let http_listen = parse_addr("http.listen", &self.http.listen)?;
        let metrics_listen = self
            .metrics_listen
            .as_deref()
            .map(|a| parse_addr("metrics_listen", a))
            .transpose()?;
        let http_tls = match (&self.http.tls_cert, &self.http.tls_key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(tls_config("http", base, cert, key, tls::ALPN_HTTP1)?),
            (Some(_), None) => {
                return Err(Error::config("http.tls_key", "missing (tls_cert is set)"));
            }
            (None, Some(_)) => {
                return Err(Error::config("http.tls_cert", "missing (tls_key is set)"));
            }
        };
        let max_body_bytes = self.http.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
        if !(1024..=16 * 1024 * 1024).contains(&max_body_bytes) {
            return Err(Error::config(
                "http.max_body_bytes",
                "must be between 1024 and 16777216",
            ));
        }

        let positive = |field: &str, v: Option<u64>, default: u64| match v {
            None => Ok(default),
            Some(0) => Err(Error::config(field, "must be > 0")),
            Some(v) => Ok(v),
        };
        let ms = std::time::Duration::from_millis;
        let http_limits = HttpLimits {
            header_read_timeout: ms(positive(
                "http.header_read_timeout_ms",
                self.http.header_read_timeout_ms,
                DEFAULT_HEADER_READ_TIMEOUT_MS,
            )?),
            body_read_timeout: ms(positive(
                "http.body_read_timeout_ms",
                self.http.body_read_timeout_ms,
                DEFAULT_BODY_READ_TIMEOUT_MS,
            )?),
            max_connections: positive(
                "http.max_connections",
                self.http.max_connections.map(|v| v as u64),
                DEFAULT_HTTP_MAX_CONNECTIONS as u64,
            )? as usize,
            max_body_bytes,
        };

        let defaults = Limits::default();
        let limits = Limits {
            max_in_flight: limit(
                "limits.max_in_flight",
                self.limits.max_in_flight,
                defaults.max_in_flight,
            )?,
            max_queued_per_origin: limit(
                "limits.max_queued_per_origin",
                self.limits.max_queued_per_origin,
                defaults.max_queued_per_origin,
            )?,
        };

        let mut logs: Vec<LogConfig> = Vec::with_capacity(self.logs.len());
        for (i, raw) in self.logs.iter().enumerate() {
            let log = LogConfig::new(&raw.origin, &raw.vkeys).map_err(|e| match e {
                Error::InvalidLog { field, reason } => {
                    Error::config(format!("logs[{i}].{field}"), reason)
                }
                other => Error::config(format!("logs[{i}]"), other),
            })?;
            if logs.iter().any(|l| l.origin() == log.origin()) {
                return Err(Error::config(
                    format!("logs[{i}].origin"),
                    "duplicate origin",
                ));
            }
            logs.push(log);
        }

        Ok(Config {
            name: self.name,
            cosigner,
            cosigners,
            prefixes,
            data_dir,
            admin_token_sha256,
            grpc_listen,
            grpc_tls,
            http_listen,
            http_tls,
            max_body_bytes,
            limits,
            http_limits,
            logs,
            metrics_listen,
        })
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
