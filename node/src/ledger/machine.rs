//! What the ledger feeds: the [`Machine`] (the Work projection), and what an append is answered.

use super::store::{Batch, Store};
use crate::error::Error;
use accord_proto::pb::work::v1::{LedgerEntry, Outcome as PbOutcome};
use accord_proto::signing::RecordId;
use std::sync::Arc;

/// The kernel's verdict on one record.
pub type Outcome = PbOutcome;

/// What the ledger feeds: the Work projection. It is called in ledger order, from the writer
/// thread only, exactly once per record (at append, or at restore after a restart).
///
/// The writer is a two-stage pipeline (issue 14): while one group commit is being written and
/// synced, the next one is applied and persisted. So the machine keeps applying records on top
/// of derived state that is not synced yet, and publishes batch by batch: [`Machine::persist`]
/// hands back the batch's [`Machine::Pending`] publication, and [`Machine::publish`] makes
/// exactly that batch visible — never a later batch's state, which may still be unsynced.
pub trait Machine: Send + 'static {
    /// The decoded form of a record that `apply` needs.
    type Input: Send + 'static;
    /// The derived state of one persisted batch, waiting for its synced write before
    /// [`Machine::publish`] shows it to readers.
    type Pending: Default + Send + 'static;
    /// Decides and applies a new record at `now` (the time it is recorded at). It must see every
    /// record applied before it, whether or not their batches are synced yet.
    fn apply(&mut self, seq: u64, id: &RecordId, input: &Self::Input, now: i64) -> Outcome;
    /// Re-applies a stored entry at start-up (replay); must reach the same outcome.
    fn restore(&mut self, entry: &LedgerEntry);
    /// The column families the machine's persisted state lives in (created by the ledger's
    /// store at open).
    fn column_families(&self) -> &'static [&'static str] {
        &[]
    }
    /// Opens the machine's persisted state in `store` at start-up; returns the sequence from
    /// which the ledger replays the records through [`Machine::restore`] (its watermark; 0 —
    /// everything — for a machine that persists nothing).
    fn open(&mut self, store: &Arc<Store>) -> Result<u64, Error> {
        let _ = store;
        Ok(0)
    }
    /// Adds the derived state of the records applied (or restored) since the last call to
    /// `batch`, the synced write that also holds those records (issue 15: persisted
    /// projections, same batch, with the watermark), and returns that state's publication. An
    /// error fails the write.
    fn persist(&mut self, store: &Store, batch: &mut Batch) -> Result<Self::Pending, Error> {
        let _ = (store, batch);
        Ok(Self::Pending::default())
    }
    /// Makes the batch `pending` came from visible to readers. The writer calls it only after
    /// that batch's synced write returned (reads see only synced records), in the order of the
    /// `persist` calls, possibly after later batches were already persisted; the ledger also
    /// calls it for each chunk of the replay at start-up.
    fn publish(&mut self, pending: Self::Pending) {
        let _ = pending;
    }
    /// Opens the persisted state in `store` to follow another instance's writer (a standby,
    /// issue 31): reads only, writes nothing, replays nothing; returns the watermark it
    /// reflects. A machine that cannot follow refuses.
    fn open_follower(&mut self, store: &Arc<Store>) -> Result<u64, Error> {
        let _ = store;
        Err(Error::Internal(
            "this machine cannot follow a writer".into(),
        ))
    }
    /// Shows readers what the writer committed after `from` (the position the last call
    /// returned): reads the stored watermark and what the batches up to it changed, and
    /// returns the new position. Writes nothing.
    fn follow(&mut self, store: &Store, from: u64) -> Result<u64, Error> {
        let _ = store;
        Ok(from)
    }
}

/// The answer to an append.
#[derive(Debug, Clone)]
pub struct AppendResult {
    /// The record's sequence number (leaf index).
    pub sequence: u64,
    /// The kernel's verdict.
    pub outcome: Outcome,
    /// True when the record was already in the ledger.
    pub duplicate: bool,
    /// When it was recorded.
    pub recorded_at: i64,
    /// The time the kernel applied it at ([`crate::ledger::applied_at`]).
    pub applied_at: i64,
}

/// A machine that applies every record and keeps no state: for measuring and testing the
/// ledger's storage (the tree, the group commit) apart from the kernel (`accordctl bench log`,
/// the tree and space tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct AcceptAll;

impl Machine for AcceptAll {
    type Input = ();
    type Pending = ();
    fn apply(&mut self, _: u64, _: &RecordId, _: &(), _: i64) -> Outcome {
        Outcome {
            applied: true,
            ..Default::default()
        }
    }
    fn restore(&mut self, _: &LedgerEntry) {}
}
