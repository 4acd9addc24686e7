//! `accord-witness init`: creates a witness directory with its cosigner key(s) (C2SP signed-note
//! skey/vkey with signature type 0x04 Ed25519 and/or 0x06 ML-DSA-44, c2sp.org/tlog-cosignature),
//! a private CA and TLS server certificate, an admin bearer token, and a commented
//! `witness.toml`. Which file goes where is [`accord_daemon::layout::witness`].

use std::path::{Path, PathBuf};

use accord_daemon::layout::{self, Access, witness as files};
use accord_proto::checkpoint::Cosigner;

use crate::config::DEFAULT_MAX_BODY_BYTES;
use crate::error::Error;
use crate::tls;
use crate::witness::Limits;

/// The config file name `init` writes.
pub const CONFIG_FILE: &str = files::CONFIG;

/// What to create.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// The directory (created if missing; must not already hold a config).
    pub dir: PathBuf,
    /// The witness name: its cosigner key name (c2sp.org/signed-note key name rules).
    pub name: String,
    /// Extra DNS names or IP addresses for the TLS certificate (besides localhost, 127.0.0.1
    /// and ::1).
    pub sans: Vec<String>,
    /// The gRPC listen address written to the config.
    pub grpc_listen: String,
    /// The HTTP listen address written to the config.
    pub http_listen: String,
}

/// A cosigner key type `init` can create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlg {
    /// Ed25519 `cosignature/v1` (type 0x04), in `witness.skey`.
    Ed25519,
    /// ML-DSA-44 `subtree/v1` (type 0x06), in `witness-mldsa44.skey`.
    MlDsa44,
}

/// What `init` created.
#[derive(Debug, Clone)]
pub struct Initialized {
    /// The config file.
    pub config_path: PathBuf,
    /// The witness's (first) verifier key (what logs configure).
    pub vkey: String,
    /// All its verifier keys, one per key type created.
    pub vkeys: Vec<String>,
    /// The admin bearer token (only its SHA-256 is in the config); also in `admin.token`.
    pub admin_token: String,
}

fn write_file(path: &Path, contents: &str, secret: bool) -> Result<(), Error> {
    let access = if secret {
        Access::Secret
    } else {
        Access::Public
    };
    layout::write_new(path, contents, access).map_err(|e| match e {
        accord_daemon::Error::Io { path, source } => Error::io(path, source),
        other => Error::Tls(other.to_string()),
    })
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// Creates the witness directory with an Ed25519 key. Refuses to overwrite an existing config
/// or key.
pub fn init(opts: &InitOptions) -> Result<Initialized, Error> {
    init_with(opts, &[KeyAlg::Ed25519])
}

/// Creates the witness directory with one cosigner key per entry of `algs` (one or both
/// types). Refuses to overwrite an existing config or key.
pub fn init_with(opts: &InitOptions, algs: &[KeyAlg]) -> Result<Initialized, Error> {
    let mut rng = rand::rngs::OsRng;
    if algs.is_empty() {
        return Err(Error::config("alg", "at least one key type"));
    }
    let mut keys = Vec::new();
    for alg in algs {
        let (c, file) = match alg {
            KeyAlg::Ed25519 => (Cosigner::generate(&opts.name, &mut rng), files::SKEY),
            KeyAlg::MlDsa44 => (
                Cosigner::generate_ml_dsa_44(&opts.name, &mut rng),
                "witness-mldsa44.skey",
            ),
        };
        keys.push((c.map_err(|e| Error::config("name", e))?, file));
    }
    for (field, addr) in [
        ("grpc_listen", &opts.grpc_listen),
        ("http_listen", &opts.http_listen),
    ] {
        addr.parse::<std::net::SocketAddr>()
            .map_err(|e| Error::config(field, format!("{addr:?}: {e}")))?;
    }
    let config_path = opts.dir.join(CONFIG_FILE);
    if config_path.exists() {
        return Err(Error::config(
            "dir",
            format!("{} already exists", config_path.display()),
        ));
    }
    let tls_dir = opts.dir.join(files::TLS_DIR);
    std::fs::create_dir_all(&tls_dir).map_err(|e| Error::io(&tls_dir, e))?;

    let vkeys: Vec<String> = keys.iter().map(|(c, _)| c.verifier().to_vkey()).collect();
    for (c, file) in &keys {
        write_file(&opts.dir.join(file), &format!("{}\n", c.to_skey()), true)?;
    }
    let vkey = vkeys[0].clone();
    write_file(
        &opts.dir.join(files::VKEY),
        &vkeys.iter().map(|v| format!("{v}\n")).collect::<String>(),
        false,
    )?;
    let key_config = if keys.len() == 1 {
        format!("key_file = {}", toml_str(keys[0].1))
    } else {
        format!(
            "key_files = [{}]",
            keys.iter()
                .map(|(_, f)| toml_str(f))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };

    let admin_token = layout::token();
    let token_hash = layout::token_sha256(&admin_token);
    write_file(
        &opts.dir.join(files::ADMIN_TOKEN),
        &format!("{admin_token}\n"),
        true,
    )?;

    let mut sans = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    for s in &opts.sans {
        if !sans.contains(s) {
            sans.push(s.clone());
        }
    }
    let generated = tls::generate(&opts.name, &sans)?;
    write_file(&opts.dir.join(files::TLS_CA), &generated.ca_cert_pem, false)?;
    write_file(&opts.dir.join(files::TLS_CERT), &generated.chain_pem, false)?;
    write_file(&opts.dir.join(files::TLS_KEY), &generated.key_pem, true)?;

    let limits = Limits::default();
    let config = format!(
        r#"# accord-witness configuration, written by `accord-witness init`.
# Relative paths are relative to this file's directory. See witness/README.md.

# The witness name: the key name of its cosignatures ("— <name> ..." lines).
name = {name}
# The cosigner private key(s) (C2SP signed-note skeys: type 0x04 Ed25519 cosignature/v1,
# type 0x06 ML-DSA-44 subtree/v1). Keep them secret. `key_file = "..."` for one key, or
# `key_files = [...]` for one of each type; add-checkpoint answers with one line per key.
# The public keys (give them to the logs you witness) are in {vkey_file}.
{key_config}
# RocksDB directory: per-origin latest co-signed checkpoints and the known logs.
data_dir = "{data_dir}"
# SHA-256 (hex) of the admin bearer token (the token itself is in {admin_token_file}).
# WitnessAdminService calls send "authorization: Bearer <token>".
admin_token_sha256 = "{token_hash}"
# Prometheus metrics (plain HTTP, GET /metrics) on their own listener; off unless set.
# metrics_listen = "127.0.0.1:9465"

# gRPC (accord.witness.v1, grpc.health.v1, reflection), always over TLS.
[grpc]
listen = {grpc_listen}
tls_cert = "{tls_cert}"   # server certificate, then the CA (clients trust {tls_ca})
tls_key = "{tls_key}"

# The C2SP tlog-witness HTTP interface: POST <submission_prefix>/add-checkpoint and
# /sign-subtree, GET <monitoring_prefix>/<sha256 hex of origin>/checkpoint. Plain HTTP unless
# tls_cert and tls_key are both set.
[http]
listen = {http_listen}
# submission_prefix = ""           # e.g. "/witness"; empty = the root
# monitoring_prefix = ""           # may differ from (or equal) the submission prefix
# tls_cert = "{tls_cert}"
# tls_key = "{tls_key}"
max_body_bytes = {max_body}   # larger request bodies get 413 (gRPC: the same bound on messages)
# header_read_timeout_ms = 10000   # a request's headers must arrive within this (slowloris)
# body_read_timeout_ms = 10000     # its body within this once the headers have (else 408)
# max_connections = 1024           # open connections at most; further ones are closed at once

# Admission control for add-checkpoint: requests in flight witness-wide (beyond: 503 /
# RESOURCE_EXHAUSTED), and signed requests queued per origin (beyond: 429 / RESOURCE_EXHAUSTED).
[limits]
max_in_flight = {max_in_flight}
max_queued_per_origin = {max_queued}

# The logs this witness co-signs. Written into the store at every start; logs added or removed
# with WitnessAdminService persist too. vkeys are C2SP signed-note Ed25519 (type 0x01) keys.
# [[logs]]
# origin = "example.com/log"
# vkeys = ["example.com/log+abcd1234+AR..."]
"#,
        name = toml_str(&opts.name),
        grpc_listen = toml_str(&opts.grpc_listen),
        http_listen = toml_str(&opts.http_listen),
        max_body = DEFAULT_MAX_BODY_BYTES,
        max_in_flight = limits.max_in_flight,
        max_queued = limits.max_queued_per_origin,
        vkey_file = files::VKEY,
        data_dir = files::DATA_DIR,
        admin_token_file = files::ADMIN_TOKEN,
        tls_cert = files::TLS_CERT,
        tls_ca = files::TLS_CA,
        tls_key = files::TLS_KEY,
    );
    write_file(&config_path, &config, false)?;
    Ok(Initialized {
        config_path,
        vkey,
        vkeys,
        admin_token,
    })
}
