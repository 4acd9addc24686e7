//! Audit replay (issue 15, item 2): `accordctl ledger verify` checks, offline, that everything
//! the node stores is derived from its records ("records are the truth", DESIGN.md, "Ledger and
//! durability").
//!
//! [`verify`] reads every record from sequence 0 and, for each one, in ledger order:
//!
//! 1. checks that the entry sits at its sequence and that the `ids` index points back at it;
//! 2. hashes it as a leaf (RFC 6962) and pushes it into a compact range, recomputing every
//!    perfect subtree the leaf completes: each must equal the node stored in cf `tree` (so an
//!    altered tree node is reported at the sequence whose leaf completed it);
//! 3. feeds it to the node's own projection machine ([`WorkMachine`], the Work kernel, at the
//!    recorded time) and compares the outcome the replay reaches with the one stored with the
//!    record.
//!
//! At the end the recomputed root is compared with the stored tree's root at the same size, and
//! the latest and the latest witnessed checkpoint are checked: the note's signature by the
//! node's log key, its origin, and its root against the recomputed root at the checkpoint's
//! size. Then the replayed projection is compared with the stored one ([`compare_projection`]).
//!
//! The store is opened exclusively (RocksDB's `LOCK`): a data dir a running node holds is
//! refused with [`Error::FailedPrecondition`]. Nothing is written to it.

use crate::config::Config;
use crate::error::Error;
use crate::ledger::{Machine, Store};
use crate::projection::{Projection, WorkMachine};
use accord_kernel as k;
use accord_proto::merkle::{CompactRange, leaf_hash};
use accord_proto::note::Verifier;
use accord_proto::pb::work::v1::LedgerEntry;
use accord_proto::signing::RecordId;
use prost::Message;
use std::path::Path;
use std::sync::{Arc, RwLock};

mod compare;

/// Records read from the store at once.
const CHUNK: usize = 1024;

/// The first place where what is stored is not what the records give.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Difference {
    /// The first ledger sequence where it appears.
    pub sequence: u64,
    /// What differs (a short, fixed-vocabulary kind: `entry`, `ids`, `tree`, `outcome`,
    /// `root`, `checkpoint`, `projection`).
    pub kind: String,
    /// Detail for people.
    pub detail: String,
}

/// A checkpoint that was checked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CheckedCheckpoint {
    /// `latest` or `witnessed`.
    pub which: String,
    /// Its tree size.
    pub size: u64,
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    /// Records replayed.
    pub records: u64,
    /// The recomputed root of the whole tree, hex.
    pub root: String,
    /// The checkpoints checked against the recomputed tree.
    pub checkpoints: Vec<CheckedCheckpoint>,
    /// The first difference, if any (verification stops there).
    pub difference: Option<Difference>,
}

impl Report {
    /// Whether everything stored matched the replay.
    pub fn ok(&self) -> bool {
        self.difference.is_none()
    }
}

fn diff(sequence: u64, kind: &str, detail: impl Into<String>) -> Option<Difference> {
    Some(Difference {
        sequence,
        kind: kind.to_string(),
        detail: detail.into(),
    })
}

/// Opens the node's store for the audit: every column family it has (whoever declared it), and
/// never a new database.
fn open_store(data_dir: &Path) -> Result<Store, Error> {
    if !data_dir.join("CURRENT").is_file() {
        return Err(Error::invalid(
            "--data-dir",
            format!("{}: not a node's data directory", data_dir.display()),
        ));
    }
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), data_dir)
        .map_err(|e| Error::Storage(e.into_string()))?;
    let extra: Vec<&str> = cfs.iter().map(String::as_str).collect();
    Store::open_unmoved(data_dir, &extra).map_err(|e| match e {
        Error::Storage(m) if m.contains("lock") || m.contains("Resource temporarily") => {
            Error::FailedPrecondition(format!(
                "{} is held by a running node (RocksDB lock): stop it, or verify a copy",
                data_dir.display()
            ))
        }
        other => other,
    })
}

/// The node's log key: `keys/node.vkey` beside the configured secret key (what `init` writes),
/// or the public half of the secret key.
fn node_key(config: &Config) -> Result<Verifier, Error> {
    let vkey = config.keys.node.with_extension("vkey");
    if let Ok(text) = std::fs::read_to_string(&vkey) {
        return Verifier::from_vkey(text.trim())
            .map_err(|e| Error::invalid("keys.node", format!("{}: {e}", vkey.display())));
    }
    let text = std::fs::read_to_string(&config.keys.node)
        .map_err(|e| Error::invalid("keys.node", format!("{}: {e}", config.keys.node.display())))?;
    accord_proto::note::Signer::from_skey(text.trim())
        .map(|s| s.verifier())
        .map_err(|e| Error::invalid("keys.node", e.to_string()))
}

/// The replay: the node's projection machine, with peer organisations listed as the node's
/// restore lists them (a peer's record is in the ledger only because its organisation was a
/// peer when it was admitted), writing its derived state to a scratch store.
struct Replay {
    machine: WorkMachine,
    access: Arc<RwLock<k::Access>>,
    scratch: compare::Scratch,
}

impl Replay {
    fn new(config: &Config) -> Result<Replay, Error> {
        let published = Arc::new(RwLock::new(Projection::default()));
        let mut machine =
            WorkMachine::new(published, crate::projection::access_from_config(config)?)
                .with_envelopes(crate::envelopes::Envelopes::new(
                    &config.name,
                    crate::envelopes::types::all(config),
                ));
        let scratch = compare::Scratch::new()?;
        machine.open(&scratch.store)?;
        let access = machine.access_handle();
        Ok(Replay {
            machine,
            access,
            scratch,
        })
    }

    /// The outcome the kernel reaches for `entry` at its recorded time, or why it cannot run.
    fn outcome(&mut self, entry: &LedgerEntry) -> Result<crate::ledger::Outcome, String> {
        let id: RecordId = entry
            .record_id
            .as_ref()
            .try_into()
            .map_err(|_| "record id is not 32 bytes".to_string())?;
        let record = crate::projection::restart::decode_entry(entry)?;
        if let Ok(mut a) = self.access.write() {
            let org = record.author.organisation.clone();
            if org != a.service.organisation && !a.organisations.contains_key(&org) {
                a.organisations.insert(org, k::Members::Any);
            }
        }
        Ok(self.machine.apply(
            entry.sequence,
            &id,
            &record,
            crate::ledger::applied_at(entry),
        ))
    }
}

/// Compares the projection the node stores (`stored`: its `pj_*` column families and
/// watermark) with the one the replay of its `total` records derived (`replayed`); the first
/// difference with the sequence where it appears ([`compare`]).
pub(crate) fn compare_projection(
    stored: &Store,
    replayed: &Store,
    total: u64,
) -> Result<Option<(u64, String)>, Error> {
    compare::compare(stored, replayed, total)
}

/// Replays the ledger in `data_dir` (the node configured by `config`) and compares it with what
/// is stored; `progress(done, total)` is called after each chunk of records.
pub fn verify(
    config: &Config,
    data_dir: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Report, Error> {
    let key = node_key(config)?;
    let store = open_store(data_dir)?;
    let total = store.record_count()?;
    let mut replay = Replay::new(config)?;
    let log = crate::log::LogState::load(&store)?;
    let checkpoints: Vec<(&str, crate::log::StoredCheckpoint)> =
        [("latest", log.latest()), ("witnessed", log.witnessed())]
            .into_iter()
            .filter_map(|(w, c)| c.map(|c| (w, c)))
            .collect();
    // Recomputed roots at the checkpoints' sizes, taken as the replay passes them.
    let mut roots: std::collections::HashMap<u64, [u8; 32]> = Default::default();
    let mut range = CompactRange::new();
    let mut report = Report {
        records: 0,
        root: String::new(),
        checkpoints: Vec::new(),
        difference: None,
    };
    let mut seq = 0u64;
    'replay: while seq < total {
        let entries = store.range(seq, CHUNK)?;
        if entries.is_empty() {
            report.difference = diff(seq, "entry", "missing");
            break;
        }
        for e in &entries {
            if let Some(d) = check_entry(&store, &mut range, &mut replay, seq, e)? {
                report.difference = Some(d);
                break 'replay;
            }
            seq += 1;
            if checkpoints.iter().any(|(_, c)| c.size == seq) {
                roots.insert(seq, range.root());
            }
        }
        replay.scratch.flush(&mut replay.machine)?;
        report.records = seq;
        progress(seq, total);
    }
    report.records = seq;
    report.root = hex::encode(range.root());
    if report.difference.is_some() {
        return Ok(report);
    }
    let stored_root = crate::log::root(&store, total).unwrap_or([0; 32]);
    if total > 0 && stored_root != range.root() {
        report.difference = diff(
            total - 1,
            "root",
            "the stored tree's root differs from the recomputed one",
        );
        return Ok(report);
    }
    for (which, c) in &checkpoints {
        if let Some(d) = check_checkpoint(config, &key, which, c, total, &roots) {
            report.difference = Some(d);
            return Ok(report);
        }
        report.checkpoints.push(CheckedCheckpoint {
            which: which.to_string(),
            size: c.size,
        });
    }
    if let Some((sequence, what)) = compare_projection(&store, &replay.scratch.store, total)? {
        report.difference = diff(sequence, "projection", what);
    }
    Ok(report)
}

/// Checks one entry at `seq`: its place, its id index, its leaf and the tree nodes it
/// completes, and the outcome the kernel reaches again.
fn check_entry(
    store: &Store,
    range: &mut CompactRange,
    replay: &mut Replay,
    seq: u64,
    e: &LedgerEntry,
) -> Result<Option<Difference>, Error> {
    if e.sequence != seq {
        return Ok(diff(
            seq,
            "entry",
            format!("entry stored at {seq} says sequence {}", e.sequence),
        ));
    }
    let Some(signed) = &e.record else {
        return Ok(diff(seq, "entry", "entry without a record"));
    };
    let indexed = match <RecordId>::try_from(e.record_id.as_ref()) {
        Ok(id) => store.seq_of(&id)?,
        Err(_) => None,
    };
    if indexed != Some(seq) {
        return Ok(diff(
            seq,
            "ids",
            "the id index does not point at this record",
        ));
    }
    let completed = range
        .push(leaf_hash(&signed.encode_to_vec()))
        .map_err(|e| Error::Internal(format!("tree: {e}")))?;
    for (level, index, hash) in completed {
        let stored = store.tree_node(level, index)?;
        if stored != Some(hash) {
            let what = if stored.is_none() {
                "missing"
            } else {
                "differs"
            };
            return Ok(diff(
                seq,
                "tree",
                format!("tree node (level {level}, index {index}) {what}"),
            ));
        }
    }
    match replay.outcome(e) {
        Ok(o) if Some(&o) == e.outcome.as_ref() => Ok(None),
        Ok(o) => Ok(diff(
            seq,
            "outcome",
            format!(
                "replay: applied={} {:?}; stored: {:?}",
                o.applied,
                o.rejection_code,
                e.outcome
                    .as_ref()
                    .map(|s| (s.applied, s.rejection_code.clone()))
            ),
        )),
        Err(m) => Ok(diff(
            seq,
            "entry",
            format!(
                "record does not convert: {}",
                crate::ident::truncate(&m, 200)
            ),
        )),
    }
}

/// A stored checkpoint against the recomputed tree: signed by the node's log key for its origin,
/// its recorded size and root matching the note, and the note's root the recomputed one.
fn check_checkpoint(
    config: &Config,
    key: &Verifier,
    which: &str,
    c: &crate::log::StoredCheckpoint,
    total: u64,
    roots: &std::collections::HashMap<u64, [u8; 32]>,
) -> Option<Difference> {
    let at = c.size.saturating_sub(1);
    if c.size > total {
        return diff(
            total.saturating_sub(1),
            "checkpoint",
            format!(
                "{which} checkpoint covers {} records, the ledger has {total}",
                c.size
            ),
        );
    }
    let opened = match accord_proto::checkpoint::open_checkpoint(
        c.note.as_bytes(),
        &config.origin(),
        std::slice::from_ref(key),
        &[],
    ) {
        Ok(o) => o,
        Err(e) => {
            return diff(
                at,
                "checkpoint",
                format!("{which} checkpoint does not verify with the node's key: {e}"),
            );
        }
    };
    let cp = &opened.checkpoint;
    if cp.size != c.size || cp.root != c.root {
        return diff(
            at,
            "checkpoint",
            format!("{which} checkpoint's stored size or root differ from its signed note"),
        );
    }
    if roots.get(&c.size) != Some(&cp.root) {
        return diff(
            at,
            "checkpoint",
            format!(
                "{which} checkpoint's root at size {} differs from the recomputed root",
                c.size
            ),
        );
    }
    None
}
