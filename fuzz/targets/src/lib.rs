//! The bodies of Accord's fuzz targets (issue 16), as plain functions: `fuzz/fuzz_targets/`
//! wraps each in libFuzzer's `fuzz_target!` (nightly, `scripts/fuzz.sh`), and
//! `tests/replay.rs` runs each over its committed seeds (`fuzz/seeds/<target>/`) and whatever
//! `fuzz/corpus/<target>/` and `fuzz/artifacts/<target>/` hold, as a normal `cargo test` on the
//! stable toolchain (issue 30, item 2): a target that stops compiling, or an input that once
//! crashed, fails the suite. The targets that need the node or the witness (`node` feature, on
//! by default) link RocksDB.
//!
//! Below: fixed keys and inputs shared by the targets and the seed generator ([`seeds`]).
//!
//! Keys are derived from constant seeds so that a seed corpus generated once keeps verifying:
//! a target that checks signatures then reaches the code behind a valid signature when the
//! fuzzer mutates a valid input, not only the "bad signature" exits.
#![forbid(unsafe_code)]

pub mod seeds;
pub mod targets;

/// A target's body: one execution over one input, panicking when a property fails.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/<name>.rs` and its seeds directory,
/// with its body. The five that link the node or the witness need the `node` feature.
pub const TARGETS: &[(&str, Target)] = &[
    ("note", targets::note::run),
    ("keys", targets::keys::run),
    ("checkpoint", targets::checkpoint::run),
    ("merkle", targets::merkle::run),
    ("signed_record", targets::signed_record::run),
    ("receipt", targets::receipt::run),
    #[cfg(feature = "node")]
    ("record_edge", targets::record_edge::run),
    #[cfg(feature = "node")]
    ("envelope", targets::envelope::run),
    #[cfg(feature = "node")]
    ("node_config", targets::node_config::run),
    #[cfg(feature = "node")]
    ("witness_config", targets::witness_config::run),
    #[cfg(feature = "node")]
    ("witness_body", targets::witness_body::run),
];

use accord_proto::checkpoint::{Checkpoint, Cosigner};
use accord_proto::merkle::{self, Hash};
use accord_proto::note::{Signer, Verifier};
use accord_proto::pb::record::v1::{PartyRef, Record, Request, SignedRecord, Terms, record};
use ed25519_dalek::SigningKey;

/// The log origin used by the checkpoint and witness targets.
pub const ORIGIN: &str = "example.org/log";
/// The organisation whose node signs envelopes, records and receipts in the seeds.
pub const ORG: &str = "peer";
/// Its log origin (the name of its node key, as `accord-node init` names it).
pub const ORG_ORIGIN: &str = "peer.accord/log";
/// The organisation receiving envelopes.
pub const RECEIVER: &str = "home";

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// The log's note signer (Ed25519, type 0x01), named [`ORIGIN`].
pub fn log_signer() -> Signer {
    Signer::from_signing_key(ORIGIN, key(1)).expect("valid key name")
}

/// A witness cosigner (type 0x04).
pub fn cosigner() -> Cosigner {
    Cosigner::from_signer(&Signer::from_signing_key("witness.example/w1", key(2)).expect("name"))
}

/// The peer organisation's node key, named after its log origin.
pub fn org_node_signer() -> Signer {
    Signer::from_signing_key(ORG_ORIGIN, key(3)).expect("valid key name")
}

/// A party key of the peer organisation (`peer/alice`).
pub fn party_signer() -> Signer {
    Signer::from_signing_key(&format!("{ORG}/alice"), key(4)).expect("valid key name")
}

/// The verifiers the note and checkpoint targets check against (made once per process: key
/// derivation would otherwise dominate each execution).
pub fn note_verifiers() -> Vec<Verifier> {
    static V: std::sync::OnceLock<Vec<Verifier>> = std::sync::OnceLock::new();
    V.get_or_init(|| vec![log_signer().verifier(), cosigner().verifier()])
        .clone()
}

/// The log's verifier, made once per process.
pub fn log_verifier() -> Verifier {
    note_verifiers()[0].clone()
}

/// The witness's verifier, made once per process.
pub fn cosigner_verifier() -> Verifier {
    note_verifiers()[1].clone()
}

/// The leaf hashes of a tree of `n` leaves `i.to_be_bytes()`.
pub fn leaves(n: u64) -> Vec<Hash> {
    (0..n)
        .map(|i| merkle::leaf_hash(&i.to_be_bytes()))
        .collect()
}

/// An in-memory [`merkle::NodeSource`] over leaf hashes (recomputes subtrees; trees are small).
pub struct Leaves<'a>(pub &'a [Hash]);

impl merkle::NodeSource for Leaves<'_> {
    fn node(&self, level: u32, index: u64) -> Result<Hash, accord_proto::Error> {
        let width = 1u64 << level;
        let lo = (index * width) as usize;
        let hi = lo + width as usize;
        Ok(merkle::root_from_leaf_hashes(&self.0[lo..hi]))
    }
}

/// A checkpoint of [`ORIGIN`] at `size` over [`leaves`], signed by the log and cosigned.
pub fn signed_checkpoint(size: u64, timestamp: u64) -> String {
    let root = merkle::root_from_leaf_hashes(&leaves(size));
    let body = Checkpoint::new(ORIGIN, size, root).to_body().expect("body");
    let mut note = accord_proto::Note::new(&body).expect("note");
    note.sign(&log_signer()).expect("sign");
    let cosig = cosigner().cosign(&body, timestamp).expect("cosign");
    note.add_signature(cosig).expect("add");
    note.to_string()
}

/// A well-formed `request` record authored by `peer/alice`.
pub fn sample_record(commitment: &str) -> Record {
    let party = |name: &str| PartyRef {
        organisation: ORG.into(),
        name: name.into(),
    };
    Record {
        author: Some(party("alice")),
        declared_at_unix_ms: 1_700_000_000_000,
        commitment_id: commitment.into(),
        basis: vec![],
        items: vec![],
        nonce: vec![7; 16].into(),
        operation: Some(record::Operation::Request(Request {
            obligee: Some(party("alice")),
            candidate: Some(PartyRef {
                organisation: RECEIVER.into(),
                name: "bob".into(),
            }),
            terms: Some(Terms {
                title: "deliver".into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
    }
}

/// [`sample_record`] signed by the party key.
pub fn sample_signed_record(commitment: &str) -> SignedRecord {
    accord_proto::signing::sign_record(&party_signer(), &sample_record(commitment))
}

/// A scratch directory for targets that need files on disk (config files name paths), made
/// once per fuzzing process under the system temp dir and reused by every execution.
pub fn scratch_dir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("accord-fuzz-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}
