//! The node's Merkle log: checkpoints signed by the node's log key, and the witness policy that
//! turns a checkpoint into a witnessed one (DESIGN.md, "Merkle log, checkpoints, witnesses").
//!
//! The tree itself is written by the ledger writer in the same synced batch as the records
//! ([`crate::ledger`]); this module only reads it, in O(log n) node reads per root or proof.

mod checkpointer;
mod witness_client;

pub use checkpointer::{covering, run_checkpointer, step};
pub use witness_client::{WitnessCall, WitnessClient, WitnessEndpoint, WitnessTransport};

use crate::error::Error;
use crate::ledger::{Store, TreeNodes};
use accord_proto::merkle;
use serde::{Deserialize, Serialize};
use std::sync::RwLock;

/// A stored checkpoint: the signed note (with any cosignatures) and what it commits to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCheckpoint {
    /// The C2SP signed note text.
    pub note: String,
    /// Tree size.
    pub size: u64,
    /// Root hash.
    pub root: [u8; 32],
    /// Valid witness cosignatures carried in `note`.
    pub cosignatures: u32,
}

impl StoredCheckpoint {
    /// As the wire type.
    pub fn to_pb(&self) -> accord_proto::pb::log::v1::Checkpoint {
        accord_proto::pb::log::v1::Checkpoint {
            note: self.note.clone(),
            size: self.size,
            root: self.root.to_vec().into(),
            cosignatures: self.cosignatures,
        }
    }
}

/// What the checkpointer and the witness client need of the node (issue 10, item 1): narrow
/// handles, built once in `node.rs`, so that the log does not depend on the node.
#[derive(Debug, Clone)]
pub struct LogContext {
    /// The log origin (the node key's name).
    pub origin: String,
    /// The node key: signs checkpoints.
    pub signer: accord_proto::note::Signer,
    /// The ledger whose tree is checkpointed.
    pub ledger: crate::ledger::Ledger<accord_kernel::Record>,
    /// The latest and the latest witnessed checkpoint.
    pub log: std::sync::Arc<LogState>,
    /// The node's one clock.
    pub clock: crate::clock::Clock,
    /// Checkpoint counters.
    pub metrics: crate::metrics::Metrics,
    /// Checkpoint intervals.
    pub config: crate::config::LogConfig,
}

const LATEST: &str = "checkpoint/latest";
const WITNESSED: &str = "checkpoint/witnessed";

/// The latest and the latest witnessed checkpoint, cached from `meta`.
#[derive(Debug, Default)]
pub struct LogState {
    latest: RwLock<Option<StoredCheckpoint>>,
    witnessed: RwLock<Option<StoredCheckpoint>>,
}

fn load(store: &Store, key: &str) -> Result<Option<StoredCheckpoint>, Error> {
    match store.meta(key)? {
        Some(v) => serde_json::from_slice(&v)
            .map(Some)
            .map_err(|e| Error::Storage(format!("{key}: {e}"))),
        None => Ok(None),
    }
}

fn save(store: &Store, key: &str, c: &StoredCheckpoint) -> Result<(), Error> {
    let v = serde_json::to_vec(c).map_err(|e| Error::Internal(e.to_string()))?;
    store.put_meta(key, &v)
}

impl LogState {
    /// Loads the stored checkpoints (after a restart, checkpointing resumes from them).
    pub fn load(store: &Store) -> Result<LogState, Error> {
        Ok(LogState {
            latest: RwLock::new(load(store, LATEST)?),
            witnessed: RwLock::new(load(store, WITNESSED)?),
        })
    }

    /// The latest signed checkpoint.
    pub fn latest(&self) -> Option<StoredCheckpoint> {
        self.latest.read().ok().and_then(|g| g.clone())
    }

    /// The latest checkpoint with the policy's K cosignatures.
    pub fn witnessed(&self) -> Option<StoredCheckpoint> {
        self.witnessed.read().ok().and_then(|g| g.clone())
    }

    pub(crate) fn set_latest(&self, store: &Store, c: StoredCheckpoint) -> Result<(), Error> {
        save(store, LATEST, &c)?;
        if let Ok(mut g) = self.latest.write() {
            *g = Some(c);
        }
        Ok(())
    }

    pub(crate) fn set_witnessed(&self, store: &Store, c: StoredCheckpoint) -> Result<(), Error> {
        save(store, WITNESSED, &c)?;
        if let Ok(mut g) = self.witnessed.write() {
            *g = Some(c);
        }
        Ok(())
    }
}

fn proof_err(e: accord_proto::Error) -> Error {
    Error::FailedPrecondition(e.to_string())
}

/// The root of the stored tree at `size` (`size` ≤ the ledger's length).
pub fn root(store: &Store, size: u64) -> Result<[u8; 32], Error> {
    merkle::root(&TreeNodes(store), size).map_err(proof_err)
}

/// The inclusion proof of leaf `index` in the tree of `size`.
pub fn inclusion_proof(store: &Store, index: u64, size: u64) -> Result<Vec<[u8; 32]>, Error> {
    merkle::inclusion_proof(&TreeNodes(store), index, size).map_err(proof_err)
}

/// The consistency proof between two sizes.
pub fn consistency_proof(store: &Store, size1: u64, size2: u64) -> Result<Vec<[u8; 32]>, Error> {
    merkle::consistency_proof(&TreeNodes(store), size1, size2).map_err(proof_err)
}

/// The leaf hash of leaf `index`.
pub fn leaf_hash(store: &Store, index: u64) -> Result<[u8; 32], Error> {
    store
        .tree_node(0, index)?
        .ok_or_else(|| Error::NotFound(format!("leaf {index}")))
}
