//! Peers: the organisations this node federates with (DESIGN.md, "Federation": "Peers are
//! configured organisations: a name, an endpoint, the public keys that sign their records and
//! envelopes, and the TLS identity they connect with").
//!
//! Peers persist in the `peers` column family (JSON by name). Config `[[peers]]` are seeded at
//! start-up: a config peer absent from the store is added; one already stored keeps its stored,
//! operator-managed state (keys rotated, disabled, ...). Every change updates, at once, the TLS
//! client-certificate verifier (certificates chaining to any enabled peer's CA are accepted at
//! the handshake) and the kernel's Access (each peer organisation acts for itself).

use super::codes;
use super::db;
use super::error::Rejection;
use crate::config::Config;
use crate::error::Error;
use crate::ledger::Store;
use crate::tls::DynamicClientVerifier;
use accord_kernel as k;
use accord_proto::note::{KeyKind, Verifier};
use accord_proto::pb::admin::v1 as admin;
use accord_proto::pb::record::v1::Signature;
use accord_proto::signing;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use tokio::sync::watch;

const CF: &str = "peers";

/// A key that signs a peer's records and envelopes, with its validity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerKey {
    /// C2SP vkey text.
    pub vkey: String,
    /// Valid until (Unix ms); 0 = no end.
    pub valid_until_unix_ms: i64,
}

/// A peer as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerRecord {
    /// The organisation name.
    pub name: String,
    /// Its gRPC endpoint (`https://host:port`), or several separated by commas: the instances
    /// of its node, tried in order until one answers (issue 31).
    pub endpoint: String,
    /// Keys that sign its records and envelopes.
    pub keys: Vec<PeerKey>,
    /// PEM of its TLS identity: the CA its certificates chain to, or the pinned certificate.
    pub tls_pem: String,
    /// Whether delivery to and from it is enabled.
    pub enabled: bool,
    /// Hex SHA-256 of the DER leaf certificate the peer must present, both as a client and as a
    /// server ("" = any certificate of its TLS identity).
    #[serde(default)]
    pub pin_sha256: String,
}

impl PeerRecord {
    /// From the admin API's wire form.
    pub fn from_pb(p: &admin::Peer) -> PeerRecord {
        PeerRecord {
            name: p.name.clone(),
            endpoint: p.endpoint.clone(),
            keys: p
                .keys
                .iter()
                .map(|k| PeerKey {
                    vkey: k.vkey.clone(),
                    valid_until_unix_ms: k.valid_until_unix_ms,
                })
                .collect(),
            tls_pem: p.tls_certificate_pem.clone(),
            enabled: p.enabled,
            pin_sha256: p.pin_sha256.trim().to_ascii_lowercase(),
        }
    }

    /// The admin API's wire form.
    pub fn to_pb(&self) -> admin::Peer {
        admin::Peer {
            name: self.name.clone(),
            endpoint: self.endpoint.clone(),
            keys: self
                .keys
                .iter()
                .map(|k| admin::PeerKey {
                    vkey: k.vkey.clone(),
                    valid_until_unix_ms: k.valid_until_unix_ms,
                })
                .collect(),
            tls_certificate_pem: self.tls_pem.clone(),
            enabled: self.enabled,
            pin_sha256: self.pin_sha256.clone(),
        }
    }
}

/// A peer, parsed: its verifiers and its TLS identity.
pub struct Peer {
    /// The stored form.
    pub record: PeerRecord,
    keys: Vec<(Verifier, i64)>,
    certs: Vec<CertificateDer<'static>>,
    verifier: Option<Arc<dyn ClientCertVerifier>>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("name", &self.record.name)
            .field("enabled", &self.record.enabled)
            .finish()
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Parses the certificates of a PEM text.
pub fn parse_pem(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no certificate in the PEM".into());
    }
    Ok(certs)
}

impl Peer {
    /// Validates and parses a peer record; errors name the field (`peer.keys[1].vkey`).
    pub fn parse(record: PeerRecord) -> Result<Peer, Error> {
        if !valid_name(&record.name) {
            return Err(Error::invalid(
                "peer.name",
                format!("{:?}: use 1-64 of [A-Za-z0-9._-]", record.name),
            ));
        }
        if let Err(why) = crate::ident::endpoints(&record.endpoint) {
            return Err(Error::invalid("peer.endpoint", why));
        }
        if record.keys.is_empty() {
            return Err(Error::invalid("peer.keys", "at least one key is required"));
        }
        let mut keys = Vec::new();
        for (i, key) in record.keys.iter().enumerate() {
            let v = Verifier::from_vkey(key.vkey.trim())
                .map_err(|e| Error::invalid(format!("peer.keys[{i}].vkey"), e.to_string()))?;
            if v.kind() != KeyKind::Ed25519 {
                return Err(Error::invalid(
                    format!("peer.keys[{i}].vkey"),
                    "not an Ed25519 (type 0x01) key",
                ));
            }
            keys.push((v, key.valid_until_unix_ms));
        }
        if !record.pin_sha256.is_empty()
            && (record.pin_sha256.len() != 64
                || !record
                    .pin_sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        {
            return Err(Error::invalid(
                "peer.pin_sha256",
                "expected 64 hex digits: the SHA-256 of the peer's DER leaf certificate",
            ));
        }
        let certs = parse_pem(&record.tls_pem)
            .map_err(|e| Error::invalid("peer.tls_certificate_pem", e))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in &certs {
            // A pinned leaf is not a usable anchor; it is matched by its bytes instead.
            let _ = roots.add(c.clone());
        }
        let verifier = if roots.is_empty() {
            None
        } else {
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crate::tls::provider())
                .build()
                .ok()
        };
        Ok(Peer {
            record,
            keys,
            certs,
            verifier,
        })
    }

    /// The organisation name.
    pub fn name(&self) -> &str {
        &self.record.name
    }

    /// Whether delivery to and from it is enabled.
    pub fn enabled(&self) -> bool {
        self.record.enabled
    }

    /// The certificates of its TLS identity.
    pub fn certs(&self) -> &[CertificateDer<'static>] {
        &self.certs
    }

    /// Its keys valid at `now` (Unix ms).
    pub fn keys_at(&self, now: i64) -> impl Iterator<Item = &Verifier> {
        self.keys
            .iter()
            .filter(move |(_, until)| *until == 0 || now < *until)
            .map(|(v, _)| v)
    }

    /// Whether a DER leaf certificate is the one the peer is pinned to (true when not pinned).
    pub fn pin_matches(&self, leaf: &[u8]) -> bool {
        use sha2::{Digest, Sha256};
        self.record.pin_sha256.is_empty()
            || hex::encode(Sha256::digest(leaf)) == self.record.pin_sha256
    }

    /// Whether a key name is one of this peer's party key names (`<peer>/<party>`, as
    /// `accord-node init` names them). Every other key of the peer is a node key (its key name
    /// is the peer's log origin, `<peer>.accord/log` by default).
    pub fn is_party_key_name(&self, key_name: &str) -> bool {
        key_name
            .strip_prefix(self.record.name.as_str())
            .is_some_and(|rest| rest.starts_with('/'))
    }

    /// The peer's node keys valid at `now` (its keys not named for a party).
    pub fn node_keys_at(&self, now: i64) -> Vec<Verifier> {
        self.keys_at(now)
            .filter(|k| !self.is_party_key_name(k.name()))
            .cloned()
            .collect()
    }

    /// Key ↔ party binding (issue 8): every signature of a record by `author` (`org/party`) is
    /// by the author's own party key or by one of the peer's node keys (the node signs its
    /// parties' declarations, as `Declare` does). A party key signing for another party is
    /// `key_not_for_author`.
    pub fn check_binding(&self, author: &str, sigs: &[Signature]) -> Result<(), Rejection> {
        for (i, sig) in sigs.iter().enumerate() {
            if self.is_party_key_name(&sig.key_name) && sig.key_name != author {
                return Err(Rejection::new(
                    codes::KEY_NOT_FOR_AUTHOR,
                    format!(
                        "signatures[{i}]: party key {:?} signs only for that party, not for {author}",
                        sig.key_name.chars().take(128).collect::<String>()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether a TLS client chain (leaf first) is this peer's identity: the leaf is the pinned
    /// certificate, or it chains to the peer's CA — and, when the peer is pinned
    /// (`pin_sha256`), the leaf is the pinned one.
    pub fn tls_identity_matches(&self, chain: &[CertificateDer<'_>]) -> bool {
        let Some((leaf, rest)) = chain.split_first() else {
            return false;
        };
        if !self.pin_matches(leaf.as_ref()) {
            return false;
        }
        if self.certs.iter().any(|c| c.as_ref() == leaf.as_ref()) {
            return true;
        }
        self.verifier
            .as_ref()
            .is_some_and(|v| v.verify_client_cert(leaf, rest, UnixTime::now()).is_ok())
    }

    /// For each record: true when it has signatures by the peer's keys valid at `now` and all of
    /// them verify — checked for all records as one Ed25519 batch. False means "not established":
    /// the caller checks that record alone with [`Peer::verify`] for its reason code. Each
    /// record's signatures cover its own payload type (a typed Declaration's or the generic one).
    pub fn verify_batch(
        &self,
        records: &[&accord_proto::pb::record::v1::SignedRecord],
        now: i64,
    ) -> Vec<bool> {
        let mut ok = vec![false; records.len()];
        let mut items: Vec<(&Verifier, Vec<u8>, &[u8])> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let pae = signing::pae(&r.payload_type, &r.payload);
            for sig in &r.signatures {
                let valid = self.keys.iter().find(|(k, until)| {
                    k.name() == sig.key_name
                        && k.key_id()[..] == sig.key_id[..]
                        && (*until == 0 || now < *until)
                });
                if let Some((k, _)) = valid {
                    items.push((k, pae.clone(), sig.signature.as_ref()));
                    ok[i] = true;
                }
            }
        }
        let batch: Vec<(&Verifier, &[u8], &[u8])> = items
            .iter()
            .map(|(k, m, s)| (*k, m.as_slice(), *s))
            .collect();
        if signing::verify_batch(&batch).is_ok() {
            ok
        } else {
            vec![false; records.len()]
        }
    }

    /// Checks that `payload` is signed by one of the peer's keys valid at `now`. Err is a reason
    /// code (`unknown_key` or `bad_signature`) with a detail.
    pub fn verify(
        &self,
        payload_type: &str,
        payload: &[u8],
        sigs: &[Signature],
        now: i64,
    ) -> Result<(), Rejection> {
        let mut verified = false;
        let mut expired = None;
        for (i, sig) in sigs.iter().enumerate() {
            let Some((key, until)) = self
                .keys
                .iter()
                .find(|(k, _)| k.name() == sig.key_name && k.key_id()[..] == sig.key_id[..])
            else {
                continue;
            };
            if *until != 0 && now >= *until {
                expired = Some(format!(
                    "signatures[{i}]: key {} expired at {until}",
                    key.name()
                ));
                continue;
            }
            signing::verify(key, payload_type, payload, sig).map_err(|e| {
                Rejection::new(codes::BAD_SIGNATURE, format!("signatures[{i}]: {e}"))
            })?;
            verified = true;
        }
        if verified {
            Ok(())
        } else {
            Err(Rejection::new(
                codes::UNKNOWN_KEY,
                expired.unwrap_or_else(|| {
                    format!("no signature by a key that {} holds", self.record.name)
                }),
            ))
        }
    }
}

/// The peer registry.
pub struct Peers {
    store: Arc<Store>,
    own: String,
    map: RwLock<BTreeMap<String, Arc<Peer>>>,
    changed: watch::Sender<u64>,
    tls: Option<Arc<DynamicClientVerifier>>,
    access: Arc<RwLock<k::Access>>,
    write: std::sync::Mutex<()>,
}

impl std::fmt::Debug for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peers").field("own", &self.own).finish()
    }
}

impl Peers {
    /// Loads the stored peers and seeds the config's peers that are not stored yet.
    pub fn load(
        store: Arc<Store>,
        config: &Config,
        tls: Option<Arc<DynamicClientVerifier>>,
        access: Arc<RwLock<k::Access>>,
    ) -> Result<Peers, Error> {
        let mut map = BTreeMap::new();
        for (_, v) in db::scan(&store, CF, b"", usize::MAX)? {
            let rec: PeerRecord = db::decode(CF, &v)?;
            let name = rec.name.clone();
            match Peer::parse(rec) {
                Ok(p) => {
                    map.insert(name, Arc::new(p));
                }
                Err(e) => {
                    tracing::error!(peer = %name, error = %e, "stored peer does not parse; ignored")
                }
            }
        }
        let mut batch = crate::ledger::Batch::default();
        for (i, p) in config.peers.iter().enumerate() {
            if map.contains_key(&p.name) {
                continue;
            }
            let pem = std::fs::read_to_string(&p.ca).map_err(|e| {
                Error::invalid(format!("peers[{i}].ca"), format!("{}: {e}", p.ca.display()))
            })?;
            let rec = PeerRecord {
                name: p.name.clone(),
                endpoint: p.endpoint.clone(),
                keys: p
                    .vkeys
                    .iter()
                    .map(|v| PeerKey {
                        vkey: v.clone(),
                        valid_until_unix_ms: 0,
                    })
                    .collect(),
                tls_pem: pem,
                enabled: true,
                pin_sha256: p.pin_sha256.trim().to_ascii_lowercase(),
            };
            let peer = Peer::parse(rec)
                .map_err(|e| Error::invalid(format!("peers[{i}]"), e.to_string()))?;
            db::put(&mut batch, &store, CF, p.name.as_bytes(), &peer.record)?;
            map.insert(p.name.clone(), Arc::new(peer));
        }
        // Nothing to write on a standby's read-only open (it writes nothing) once the writer
        // stored the configured peers.
        if !batch.is_empty() {
            db::write(&store, batch, true)?;
        }
        let peers = Peers {
            store,
            own: config.name.clone(),
            map: RwLock::new(map),
            changed: watch::channel(0).0,
            tls,
            access,
            write: std::sync::Mutex::new(()),
        };
        peers.refresh();
        Ok(peers)
    }

    /// One peer by name.
    pub fn get(&self, name: &str) -> Option<Arc<Peer>> {
        self.map.read().ok()?.get(name).cloned()
    }

    /// Every peer, by name.
    pub fn list(&self) -> Vec<Arc<Peer>> {
        self.map
            .read()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Reads the stored peers again, for a standby following the writer (issue 31): a peer
    /// added, changed or removed at the writer since this instance opened. Returns whether
    /// anything changed (the TLS verifier and Access follow, as at an admin change).
    pub fn reload(&self) -> Result<bool, Error> {
        let mut stored = BTreeMap::new();
        for (_, v) in db::scan(&self.store, CF, b"", usize::MAX)? {
            let rec: PeerRecord = db::decode(CF, &v)?;
            stored.insert(rec.name.clone(), rec);
        }
        let same = self.map.read().is_ok_and(|m| {
            m.len() == stored.len()
                && m.iter()
                    .all(|(n, p)| stored.get(n).is_some_and(|r| *r == p.record))
        });
        if same {
            return Ok(false);
        }
        let mut map = BTreeMap::new();
        for (name, rec) in stored {
            match Peer::parse(rec) {
                Ok(p) => {
                    map.insert(name, Arc::new(p));
                }
                Err(e) => {
                    tracing::error!(peer = %name, error = %e, "stored peer does not parse; ignored")
                }
            }
        }
        if let Ok(mut m) = self.map.write() {
            *m = map;
        }
        self.refresh();
        Ok(true)
    }

    /// Ticks whenever the peers change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn refresh(&self) {
        let peers = self.list();
        if let Some(tls) = &self.tls {
            tls.set_peer_certs(
                peers
                    .iter()
                    .filter(|p| p.enabled())
                    .flat_map(|p| p.certs().iter().cloned())
                    .collect(),
            );
        }
        if let Ok(mut a) = self.access.write() {
            // Organisations are added, never removed: records a peer sent while it was one stay
            // valid on replay, and a removed peer's envelopes are refused before the kernel.
            for p in &peers {
                a.organisations
                    .entry(p.name().to_string())
                    .or_insert(k::Members::Any);
            }
        }
        self.changed.send_modify(|g| *g += 1);
    }

    fn save(&self, rec: PeerRecord) -> Result<Arc<Peer>, Error> {
        let peer = Arc::new(Peer::parse(rec)?);
        let mut batch = crate::ledger::Batch::default();
        db::put(
            &mut batch,
            &self.store,
            CF,
            peer.name().as_bytes(),
            &peer.record,
        )?;
        db::write(&self.store, batch, true)?;
        if let Ok(mut m) = self.map.write() {
            m.insert(peer.name().to_string(), peer.clone());
        }
        Ok(peer)
    }

    /// Adds a peer (FailedPrecondition if it exists).
    pub fn add(&self, rec: PeerRecord) -> Result<(), Error> {
        let _w = self
            .write
            .lock()
            .map_err(|_| Error::Internal("peers lock poisoned".into()))?;
        if rec.name == self.own {
            return Err(Error::invalid(
                "peer.name",
                "is this node's own organisation",
            ));
        }
        if self.get(&rec.name).is_some() {
            return Err(Error::FailedPrecondition(format!(
                "peer {:?} exists; remove it first",
                rec.name
            )));
        }
        self.save(rec)?;
        self.refresh();
        Ok(())
    }

    fn update(
        &self,
        name: &str,
        f: impl FnOnce(&mut PeerRecord) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let _w = self
            .write
            .lock()
            .map_err(|_| Error::Internal("peers lock poisoned".into()))?;
        let mut rec = self
            .get(name)
            .ok_or_else(|| Error::NotFound(format!("peer {name:?}")))?
            .record
            .clone();
        f(&mut rec)?;
        self.save(rec)?;
        self.refresh();
        Ok(())
    }

    /// Enables or disables a peer.
    pub fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), Error> {
        self.update(name, |r| {
            r.enabled = enabled;
            Ok(())
        })
    }

    /// Adds `new_vkey`; every other key stays valid until `old_valid_until` (Unix ms) at most.
    pub fn rotate_key(
        &self,
        name: &str,
        new_vkey: &str,
        old_valid_until: i64,
    ) -> Result<(), Error> {
        let v = Verifier::from_vkey(new_vkey.trim())
            .map_err(|e| Error::invalid("new_vkey", e.to_string()))?;
        if old_valid_until <= 0 {
            return Err(Error::invalid(
                "old_valid_until_unix_ms",
                "required: the end of the overlap (Unix ms)",
            ));
        }
        self.update(name, |r| {
            if r.keys.iter().any(|k| {
                Verifier::from_vkey(k.vkey.trim()).is_ok_and(|o| o.to_vkey() == v.to_vkey())
            }) {
                return Err(Error::FailedPrecondition(
                    "the new key is already one of the peer's keys".into(),
                ));
            }
            for k in &mut r.keys {
                if k.valid_until_unix_ms == 0 || k.valid_until_unix_ms > old_valid_until {
                    k.valid_until_unix_ms = old_valid_until;
                }
            }
            r.keys.push(PeerKey {
                vkey: v.to_vkey(),
                valid_until_unix_ms: 0,
            });
            Ok(())
        })
    }

    /// Removes a peer; its envelopes are refused from now on (`unknown_peer`).
    pub fn remove(&self, name: &str) -> Result<(), Error> {
        let _w = self
            .write
            .lock()
            .map_err(|_| Error::Internal("peers lock poisoned".into()))?;
        if self.get(name).is_none() {
            return Err(Error::NotFound(format!("peer {name:?}")));
        }
        let mut batch = crate::ledger::Batch::default();
        db::delete(&mut batch, &self.store, CF, name.as_bytes())?;
        db::write(&self.store, batch, true)?;
        if let Ok(mut m) = self.map.write() {
            m.remove(name);
        }
        self.refresh();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use accord_proto::note::Signer;

    fn peer(keys: &[&Signer]) -> Peer {
        let pem = crate::pki::generate("acme", &["localhost".into()])
            .unwrap()
            .ca_cert_pem;
        Peer::parse(PeerRecord {
            name: "acme".into(),
            endpoint: "https://127.0.0.1:1".into(),
            keys: keys
                .iter()
                .map(|k| PeerKey {
                    vkey: k.verifier().to_vkey(),
                    valid_until_unix_ms: 0,
                })
                .collect(),
            tls_pem: pem,
            enabled: true,
            pin_sha256: String::new(),
        })
        .unwrap()
    }

    #[test]
    fn party_keys_sign_for_their_party_the_node_key_for_any() {
        let rng = &mut rand::rngs::OsRng;
        let node = Signer::generate("acme.accord/log", rng).unwrap();
        let alice = Signer::generate("acme/alice", rng).unwrap();
        let carol = Signer::generate("acme/carol", rng).unwrap();
        let p = peer(&[&node, &alice, &carol]);
        let sig = |s: &Signer| signing::sign(s, "t", b"x");
        assert!(p.check_binding("acme/alice", &[sig(&alice)]).is_ok());
        assert!(p.check_binding("acme/alice", &[sig(&node)]).is_ok());
        assert!(p.check_binding("acme/mallory", &[sig(&node)]).is_ok());
        assert!(p.check_binding("acme/alice", &[sig(&carol)]).is_err());
        assert!(p.check_binding("acme/mallory", &[sig(&alice)]).is_err());
        assert!(
            p.check_binding("acme/alice", &[sig(&alice), sig(&carol)])
                .is_err()
        );
        let node_keys: Vec<String> = p
            .node_keys_at(0)
            .iter()
            .map(|k| k.name().to_string())
            .collect();
        assert_eq!(node_keys, ["acme.accord/log"]);
        assert!(!p.is_party_key_name("acmex/alice"));
    }

    #[test]
    fn a_pin_must_be_a_sha256() {
        let rng = &mut rand::rngs::OsRng;
        let node = Signer::generate("acme.accord/log", rng).unwrap();
        let mut r = peer(&[&node]).record;
        r.pin_sha256 = "ab".repeat(31);
        let e = Peer::parse(r.clone()).unwrap_err();
        assert!(e.to_string().contains("peer.pin_sha256"), "{e}");
        r.pin_sha256 = "ab".repeat(32);
        let p = Peer::parse(r).unwrap();
        assert!(!p.pin_matches(b"some other leaf"));
    }
}
