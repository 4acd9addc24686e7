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
    /// DNS names or IP addresses the TLS certificate carries besides the defaults (localhost,
    /// 127.0.0.1, ::1, <name>.accord): e.g. each instance's name in an HA pair (issue 31).
    pub sans: Vec<String>,
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
    let mut sans = crate::pki::default_sans(&o.name);
    for s in &o.sans {
        if s.is_empty() || s.len() > 253 || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::invalid(
                "--san",
                format!("{s:?}: a DNS name or IP address"),
            ));
        }
        if !sans.contains(s) {
            sans.push(s.clone());
        }
    }
    let tls = crate::pki::generate(&o.name, &sans)?;
    write(&o.dir.join(files::TLS_CA), &tls.ca_cert_pem)?;
    // The CA key is not kept (issue 8): it signed the leaf and is dropped, so the CA certifies
    // exactly this one leaf and a copy of the node directory cannot mint TLS identities; a new
    // leaf means a new CA (`accord-node tls reissue`), which peers then trust instead. (No name
    // constraints: gRPC's C core refuses them, issue 28; `pki`.)
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
# streams_per_party = 32
# operator_stream_reserve = 16
# refusals_max = 10000
# refusals_max_age_ms = 604800000
# refusals_prune_interval_ms = 60000

# Federation queues (README "Federation"); the defaults are shown.
# [federation]
# outbox_max = 100000
# backfill_per_second = 5000
# max_in_flight = 4

[authorities]
# Parties ("org/name") with the administrative_close authority, principals, queue owners
# ("org/name:queue") and external observers of an organisation's work ("org/name:organisation").
administrative_close = []
principals = []
queue_owners = []
observers = []

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

/// What `accord-node tls reissue` did, for printing.
#[derive(Debug, Clone)]
pub struct Reissued {
    /// The organisation name (the config's `name`).
    pub name: String,
    /// Where the old CA, certificate and key were copied to.
    pub backup: PathBuf,
    /// The new CA certificate (`tls/ca.pem`): peers and clients must trust this one now.
    pub ca: PathBuf,
    /// The new leaf certificate (`tls.cert`).
    pub cert: PathBuf,
    /// Hex SHA-256 of the new CA's DER.
    pub ca_sha256: String,
    /// Hex SHA-256 of the new leaf's DER: a peer's `pin_sha256` for this node.
    pub leaf_sha256: String,
    /// The names the new leaf carries (those of the old leaf).
    pub sans: Vec<String>,
    /// Whether the TLS key (`tls.key`) was kept; else a new one was written.
    pub key_kept: bool,
}

/// The DNS names and IP addresses of a DER certificate's subjectAltName.
fn cert_sans(der: &[u8]) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(s) => Some((*s).to_owned()),
            GeneralName::IPAddress(b) => match b.len() {
                4 => <[u8; 4]>::try_from(*b)
                    .ok()
                    .map(|a| std::net::IpAddr::from(a).to_string()),
                16 => <[u8; 16]>::try_from(*b)
                    .ok()
                    .map(|a| std::net::IpAddr::from(a).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn sha256_hex(der: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(der))
}

/// Replaces `path` with `text`: written beside it, synced, then renamed over it.
fn replace(path: &Path, text: &str, access: Access) -> Result<(), Error> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".reissue-tmp");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    write_as(&tmp, text, access)?;
    std::fs::rename(&tmp, path)
        .map_err(|e| Error::invalid("--dir", format!("{}: {e}", path.display())))
}

/// `accord-node tls reissue`: replaces the TLS material of the node directory `dir` (its
/// `accord.toml`) with a new CA and leaf as `init` writes them today (issue 28: no name
/// constraints), keeping everything else — node and party keys, tokens, config, ledger — and
/// the TLS key itself when rcgen can sign with it (a key `init` wrote can). The leaf carries the
/// old leaf's names (or [`crate::pki::default_sans`] if it had none). The old CA, certificate
/// and key are copied first to `tls/backup-<unix seconds>/`. The CA's key is dropped again.
///
/// The CA changes, so peers and clients must trust the new `tls/ca.pem` (and a peer pinning
/// this node's leaf needs the new [`Reissued::leaf_sha256`]); a running node serves the new
/// certificate once restarted.
pub fn reissue_tls(dir: &Path) -> Result<Reissued, Error> {
    let cfg = crate::config::Config::load(&dir.join(files::CONFIG))?;
    let (cert_path, key_path, ca_path) = (
        cfg.tls.cert.clone(),
        cfg.tls.key.clone(),
        dir.join(files::TLS_CA),
    );
    let old = crate::tls::load_certs(&cert_path)?;
    let mut sans = cert_sans(old[0].as_ref());
    if sans.is_empty() {
        sans = crate::pki::default_sans(&cfg.name);
    }
    let key_pem = std::fs::read_to_string(&key_path)
        .map_err(|e| Error::Tls(format!("tls.key: {}: {e}", key_path.display())))?;
    let (tls, key_kept) = match crate::pki::generate_for_key(&cfg.name, &sans, &key_pem) {
        Ok(m) => (m, true),
        Err(_) => (crate::pki::generate(&cfg.name, &sans)?, false),
    };

    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let tls_dir = ca_path.parent().unwrap_or(dir).to_path_buf();
    let mut backup = tls_dir.join(format!("backup-{stamp}"));
    let mut n = 1;
    while backup.exists() {
        backup = tls_dir.join(format!("backup-{stamp}-{n}"));
        n += 1;
    }
    let io = |p: &Path, e: std::io::Error| Error::invalid("--dir", format!("{}: {e}", p.display()));
    std::fs::create_dir_all(&backup).map_err(|e| io(&backup, e))?;
    for p in [&ca_path, &cert_path, &key_path] {
        if !p.exists() {
            continue;
        }
        let name = p.file_name().unwrap_or(p.as_os_str());
        // `copy` keeps the permission bits: the key's copy stays owner-only.
        std::fs::copy(p, backup.join(name)).map_err(|e| io(p, e))?;
    }

    if !key_kept {
        replace(&key_path, &tls.key_pem, Access::Secret)?;
    }
    replace(&cert_path, &tls.cert_pem, Access::Public)?;
    replace(&ca_path, &tls.ca_cert_pem, Access::Public)?;
    let der = |pem: &str| -> Result<Vec<u8>, Error> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .and_then(Result::ok)
            .map(|c| c.as_ref().to_vec())
            .ok_or_else(|| Error::Tls("generated certificate does not parse".into()))
    };
    Ok(Reissued {
        name: cfg.name,
        backup,
        ca: ca_path,
        cert: cert_path,
        ca_sha256: sha256_hex(&der(&tls.ca_cert_pem)?),
        leaf_sha256: sha256_hex(&der(&tls.cert_pem)?),
        sans,
        key_kept,
    })
}
