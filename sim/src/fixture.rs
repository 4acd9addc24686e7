//! The three organisations and two witnesses of a run: node directories made by the node's own
//! `init` (TLS material, config), with every key that reaches a ledger derived from its name, so
//! that a seed reproduces the same record ids, signatures and checkpoints in any process.

use crate::SimError;
use accord_node::config::{Config, PeerConfig, WitnessConfig, WitnessPolicyConfig};
use accord_proto::note::Signer;
use ed25519_dalek::SigningKey;
use rustls::pki_types::CertificateDer;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Organisation names and the one party each runs.
pub const ORGS: [(&str, &str); 3] = [("acme", "alice"), ("globex", "bob"), ("initech", "carol")];

/// The witnesses' names (also their cosigner key names).
pub const WITNESSES: [&str; 2] = ["w1.sim.example", "w2.sim.example"];

/// A key derived from its name (fixed across runs and processes).
pub fn derived(name: &str, key_name: &str) -> Result<Signer, SimError> {
    let seed: [u8; 32] = Sha256::digest(format!("accord-sim/{name}")).into();
    Signer::from_signing_key(key_name, SigningKey::from_bytes(&seed))
        .map_err(|e| SimError::Setup(format!("key {key_name}: {e}")))
}

/// A witness's cosigner key (Ed25519 `cosignature/v1`), derived from its name.
pub fn witness_key(name: &str) -> Result<accord_proto::checkpoint::Cosigner, SimError> {
    Ok(accord_proto::checkpoint::Cosigner::from_signer(&derived(
        &format!("witness/{name}"),
        name,
    )?))
}

/// One organisation.
#[derive(Debug)]
pub struct Org {
    /// Its name.
    pub name: String,
    /// Its one party.
    pub party: String,
    /// The node's configuration (data directory inside the run's temporary directory).
    pub config: Config,
    /// The node key (log origin).
    pub node_key: Signer,
    /// The party's record key (`<org>/<party>`).
    pub party_key: Signer,
    /// The node's TLS client certificate chain, as a peer's listener would see it.
    pub chain: Vec<CertificateDer<'static>>,
    /// Its TLS CA (PEM file), which its peers trust.
    pub ca: PathBuf,
}

/// Makes the organisations under `dir`: `init`, derived keys, peers, witnesses with `k`.
pub fn orgs(dir: &Path, k: usize) -> Result<Vec<Org>, SimError> {
    let setup = |what: &str, e: &dyn std::fmt::Display| SimError::Setup(format!("{what}: {e}"));
    let mut out = Vec::new();
    for (name, party) in ORGS {
        let node_dir = dir.join(name);
        let made = accord_node::init::init(&accord_node::init::InitOptions {
            dir: node_dir.clone(),
            name: name.to_string(),
            parties: vec![party.to_string()],
            listen: "127.0.0.1:0".into(),
            sans: vec![],
        })
        .map_err(|e| setup("init", &e))?;
        let mut config = Config::load(&made.config).map_err(|e| setup("config", &e))?;
        let node_key = derived(&format!("{name}/node"), &config.origin())?;
        std::fs::write(&config.keys.node, node_key.to_skey() + "\n")
            .map_err(|e| setup("node key", &e))?;
        let party_key = derived(&format!("{name}/{party}"), &format!("{name}/{party}"))?;
        for p in &mut config.parties {
            p.vkeys = vec![party_key.verifier().to_vkey()];
        }
        let pem = std::fs::read(&config.tls.cert).map_err(|e| setup("tls cert", &e))?;
        let chain = rustls_pemfile::certs(&mut pem.as_slice())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| setup("tls cert", &e))?;
        let ca = node_dir.join("tls/ca.pem");
        if !ca.is_file() {
            return Err(SimError::Setup(format!("{} is missing", ca.display())));
        }
        config.federation.quarantine_timeout_ms = 10 * 24 * 3600 * 1000;
        config.witnesses = WitnessPolicyConfig {
            k,
            list: WITNESSES
                .iter()
                .map(|w| {
                    Ok(WitnessConfig {
                        vkey: witness_key(w)?.verifier().to_vkey(),
                        endpoint: format!("https://{w}:443"),
                        ca: None,
                    })
                })
                .collect::<Result<_, SimError>>()?,
        };
        out.push(Org {
            name: name.to_string(),
            party: party.to_string(),
            config,
            node_key,
            party_key,
            chain,
            ca,
        });
    }
    // Every organisation peers with the other two.
    let peers: Vec<PeerConfig> = out
        .iter()
        .map(|o| PeerConfig {
            name: o.name.clone(),
            endpoint: format!("https://{}.sim.example:443", o.name),
            vkeys: vec![
                o.node_key.verifier().to_vkey(),
                o.party_key.verifier().to_vkey(),
            ],
            ca: o.ca.clone(),
            pin_sha256: String::new(),
        })
        .collect();
    for o in &mut out {
        o.config.peers = peers.iter().filter(|p| p.name != o.name).cloned().collect();
    }
    Ok(out)
}
