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

    /// Reads the stored checkpoints again: a standby follows the writer's (issue 31).
    pub fn reload(&self, store: &Store) -> Result<(), Error> {
        let (latest, witnessed) = (load(store, LATEST)?, load(store, WITNESSED)?);
        if let Ok(mut g) = self.latest.write() {
            *g = latest;
        }
        if let Ok(mut g) = self.witnessed.write() {
            *g = witnessed;
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::grow;
    use crate::ledger::{AcceptAll, LeafScanNodes, Ledger, OneByOneNodes};
    use accord_proto::merkle::{MemoryTree, NodeSource};

    /// Proofs from the batched read paths (`TreeNodes::nodes`: the upper-level cache filled by
    /// range scans, RocksDB multi-get below it; `LeafScanNodes`: the lower levels computed from
    /// scanned leaves) equal those read one node at a time and those of
    /// an in-memory tree over the same leaves, for every index and every older size, at sizes
    /// that are and are not powers of two — while the tree grows under a warm cache (nodes
    /// completed after a cache fill must still be found), and from SST files after a flush.
    #[tokio::test]
    async fn batched_proofs_equal_one_by_one_reads() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, writer) =
            Ledger::open(dir.path(), AcceptAll, 4096, crate::clock::Clock::system())
                .expect("open ledger");
        let store = ledger.store().clone();
        let mut reference = MemoryTree::new();
        let sizes = [
            1u64, 2, 3, 5, 8, 63, 64, 65, 100, 127, 128, 129, 200, 257, 640, 1000, 1025, 4097,
        ];
        for size in sizes {
            grow(&ledger, size).await;
            for i in reference.size()..size {
                reference
                    .push(leaf_hash(&store, i).expect("leaf"))
                    .expect("push");
            }
            if size == 1025 {
                store.flush_all().expect("flush");
            }
            let (batched, plain) = (TreeNodes(&store), OneByOneNodes(&store));
            let scanned = LeafScanNodes(&store);
            let want_root = reference.root();
            assert_eq!(root(&store, size).unwrap(), want_root, "root at {size}");
            assert_eq!(merkle::root(&plain, size).unwrap(), want_root);
            // Every index below 1100; a stride above (4097 × 4097 would be slow in debug).
            let step = if size > 1100 { 37 } else { 1 };
            for index in (0..size).step_by(step).chain([size - 1]) {
                let p = merkle::inclusion_proof(&batched, index, size).unwrap();
                assert_eq!(p, merkle::inclusion_proof(&plain, index, size).unwrap());
                assert_eq!(p, merkle::inclusion_proof(&scanned, index, size).unwrap());
                assert_eq!(p, merkle::inclusion_proof(&reference, index, size).unwrap());
                merkle::verify_inclusion(
                    &reference.node(0, index).unwrap(),
                    index,
                    size,
                    &p,
                    &want_root,
                )
                .expect("inclusion proof verifies");
            }
            for size1 in (0..=size).step_by(step).chain([size]) {
                let p = merkle::consistency_proof(&batched, size1, size).unwrap();
                assert_eq!(p, merkle::consistency_proof(&plain, size1, size).unwrap());
                assert_eq!(p, merkle::consistency_proof(&scanned, size1, size).unwrap());
                assert_eq!(
                    p,
                    merkle::consistency_proof(&reference, size1, size).unwrap()
                );
                if size1 > 0 {
                    assert_eq!(
                        root(&store, size1).unwrap(),
                        reference_root(&reference, size1)
                    );
                }
            }
        }
        // Nodes beyond the tree are unavailable, not zero or stale.
        let missing = TreeNodes(&store).nodes(&[(0, 4097), (6, 64), (0, 3)]);
        assert!(matches!(
            missing,
            Err(accord_proto::Error::NodeUnavailable {
                level: 0,
                index: 4097
            })
        ));
        assert!(store.tree_node(6, 64).unwrap().is_none());
        let missing = LeafScanNodes(&store).nodes(&[(1, 10), (2, 1024), (0, 3)]);
        assert!(matches!(
            missing,
            Err(accord_proto::Error::NodeUnavailable {
                level: 2,
                index: 1024
            })
        ));
        // A lower node whose leaves are only partly stored is unavailable too.
        assert!(store.tree_nodes_from_leaves(&[(3, 512)]).unwrap()[0].is_none());
        assert!(store.tree_cache_bytes() > 0, "the upper levels were cached");
        ledger.stop().await;
        writer.join().unwrap();
    }

    fn reference_root(t: &MemoryTree, size: u64) -> [u8; 32] {
        merkle::root(t, size).unwrap()
    }
}
