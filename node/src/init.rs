//! `accord-node init`: creates a node directory with its keys, TLS material, party credentials
//! and a commented config file. Which file goes where is [`accord_daemon::layout::node`].

use crate::error::Error;
use accord_daemon::layout::{self, Access, node as files};
use accord_proto::note::Signer;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What `init` creates.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// The directory (created; must be empty or absent).
    pub dir: PathBuf,
    /// The organisation name.
    pub name: String,
    /// Parties to create (each gets a record key and a bearer token).
    pub parties: Vec<String>,
    /// The listen address to write into the config.
    pub listen: String,
}

/// What `init` made, for printing.
#[derive(Debug, Clone)]
pub struct Initialized {
    /// The config file.
    pub config: PathBuf,
    /// The node's vkey.
    pub vkey: String,
    /// The operator's bearer token (also in `admin.token`).
    pub admin_token: String,
    /// Party name, vkey, bearer token.
    pub parties: Vec<(String, String, String)>,
}

/// Writes a file `init` creates (never overwriting: the directory was checked empty); an error
/// names the file under `--dir`.
fn write_as(path: &Path, text: &str, access: Access) -> Result<(), Error> {
    layout::write_new(path, text, access).map_err(|e| Error::invalid("--dir", e.to_string()))
}

fn write_secret(path: &Path, text: &str) -> Result<(), Error> {
    write_as(path, text, Access::Secret)
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    write_as(path, text, Access::Public)
}

/// SHA-256 of a bearer token, hex (what the config stores).
pub fn token_hash(token: &str) -> String {
    layout::token_sha256(token)
}

/// Creates the node directory.
pub fn init(o: &InitOptions) -> Result<Initialized, Error> {
    crate::config::Config::check_org_name(&o.name)?;
    // Every flag is checked before anything is written (issue 8, "Input bounds").
    let mut seen = std::collections::HashSet::new();
    for p in &o.parties {
        crate::ident::name(p).map_err(|r| Error::invalid("--party", r))?;
        if !seen.insert(p) {
            return Err(Error::invalid(
                "--party",
                format!("{} given twice", crate::ident::quote(p)),
            ));
        }
    }
    if o.listen.parse::<std::net::SocketAddr>().is_err() {
        return Err(Error::invalid(
            "--listen",
            format!("{}: expected host:port", crate::ident::quote(&o.listen)),
        ));
    }
    if o.dir.exists()
        && std::fs::read_dir(&o.dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(Error::invalid(
            "--dir",
            format!("{} exists and is not empty", o.dir.display()),
        ));
    }
    for sub in std::iter::once(&"").chain(files::DIRS) {
        std::fs::create_dir_all(o.dir.join(sub))
            .map_err(|e| Error::invalid("--dir", e.to_string()))?;
    }
    let origin = format!("{}.accord/log", o.name);
    let node = Signer::generate(&origin, &mut rand::rngs::OsRng)
        .map_err(|e| Error::Internal(e.to_string()))?;
    write_secret(&o.dir.join(files::NODE_SKEY), &node.to_skey())?;
    write(&o.dir.join(files::NODE_VKEY), &node.verifier().to_vkey())?;
    let tls = crate::pki::generate(&o.name, &crate::pki::default_sans(&o.name))?;
    write(&o.dir.join(files::TLS_CA), &tls.ca_cert_pem)?;
    // The CA key is not kept (issue 8): it signed the leaf and is dropped, so a copy of the
    // node directory cannot mint TLS identities; a new leaf means a new `init`'d CA, which
    // peers then re-add. (The CA is also name-constrained to this node's names: `pki`.)
    write(&o.dir.join(files::TLS_CERT), &tls.cert_pem)?;
    write_secret(&o.dir.join(files::TLS_KEY), &tls.key_pem)?;
    let admin_token = layout::token();
    write_secret(&o.dir.join(files::ADMIN_TOKEN), &admin_token)?;

    let mut parties = Vec::new();
    let mut party_toml = String::new();
    for p in &o.parties {
        crate::config::Config::check_org_name(p)?;
        let s = Signer::generate(&format!("{}/{}", o.name, p), &mut rand::rngs::OsRng)
            .map_err(|e| Error::Internal(e.to_string()))?;
        write_secret(&o.dir.join(files::party_skey(p)), &s.to_skey())?;
        let t = layout::token();
        write_secret(&o.dir.join(files::party_token(p)), &t)?;
        let vkey = s.verifier().to_vkey();
        let _ = write!(
            party_toml,
            "\n[[parties]]\nname = \"{p}\"\n# Keys that sign this party's records (C2SP vkeys).\nvkeys = [\"{vkey}\"]\n# SHA-256 of the bearer token in parties/{p}.token, for Declare.\ntoken_sha256 = \"{}\"\n# Client certificates (hex SHA-256 of the DER leaf) that read as {p} (README \"Who may read what\").\n# cert_sha256 = []\n",
            token_hash(&t)
        );
        parties.push((p.clone(), vkey, t));
    }
    let config = format!(
        r#"# Accord node configuration for organisation "{name}".
# Relative paths are relative to this file. Every field is validated before any port is bound.

# The organisation's name: its peer name in federation, and the organisation of its parties.
name = "{name}"
# The RocksDB ledger.
data_dir = "{data_dir}"
# gRPC (TLS) listen address; port 0 picks a free port (printed at start-up).
listen = "{listen}"
# Prometheus metrics (plain HTTP, GET /metrics) on their own listener; off unless set.
# metrics_listen = "127.0.0.1:9464"

[tls]
cert = "{tls_cert}"
key = "{tls_key}"
# CA certificates whose client certificates are accepted (mutual TLS). Peers' CAs are added
# automatically.
client_ca = []
# Refuse clients without a certificate.
require_client_cert = false

[keys]
# Signs checkpoints (its key name is the log origin), receipts and the node's own records.
node = "{node_skey}"

[log]
origin = "{origin}"
# How often the checkpointer signs a new checkpoint when the tree has grown (ms).
checkpoint_interval_ms = 1000

[clock]
# How often the Work service party looks for due work (expiry, implicit acceptance, ...), ms.
tick_ms = 1000

[admin]
# SHA-256 of the operator bearer token in {admin_token_file}.
token_sha256 = "{admin}"
# Client certificates (hex SHA-256 of the DER leaf) that act as the operator.
# cert_sha256 = []

# Bounds for every caller (README "Limits"); the defaults are shown.
# [limits]
# max_connections = 1024
# max_streams_per_connection = 100
# preface_timeout_ms = 10000
# idle_timeout_ms = 300000
# list_streams = 256
# refusals_max = 10000
# refusals_max_age_ms = 604800000
# refusals_prune_interval_ms = 60000

# Federation queues (README "Federation"); the defaults are shown.
# [federation]
# outbox_max = 100000
# backfill_per_second = 5000
# max_in_flight = 4

[authorities]
# Parties ("org/name") with the administrative_close authority, principals, and queue owners
# ("org/name:queue").
administrative_close = []
principals = []
queue_owners = []

[witnesses]
# A record is witnessed once a checkpoint that includes it has k valid cosignatures.
k = 0
# [[witnesses.list]]
# vkey = "witness.example/w1+...+BA..."
# endpoint = "https://127.0.0.1:7444"
# ca = "witness-ca.pem"

# [[peers]]
# name = "other-org"
# endpoint = "https://127.0.0.1:7445"
# vkeys = ["other-org.accord/log+...+AQ..."]
# ca = "other-org-ca.pem"
# Optional: accept only this leaf certificate from it (hex SHA-256 of the DER leaf).
# pin_sha256 = "..."
{party_toml}"#,
        name = o.name,
        listen = o.listen,
        origin = origin,
        admin = token_hash(&admin_token),
        data_dir = files::DATA_DIR,
        tls_cert = files::TLS_CERT,
        tls_key = files::TLS_KEY,
        node_skey = files::NODE_SKEY,
        admin_token_file = files::ADMIN_TOKEN,
    );
    let cfg_path = o.dir.join(files::CONFIG);
    write(&cfg_path, &config)?;
    Ok(Initialized {
        config: cfg_path,
        vkey: node.verifier().to_vkey(),
        admin_token,
        parties,
    })
}
