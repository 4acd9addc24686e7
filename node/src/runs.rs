//! The runs the node knows (seed 002, "Run states and execution receipts"), beside the
//! commitments in the `Projection` (`crate::projection`): every `Operation::Run`
//! record, in ledger order, goes to the kernel's run machine ([`kr::apply_run`]); a rejected one
//! is recorded with its rejection and changes nothing. Like the commitments, runs are derived
//! and persisted (`pj_runs`, issue 15): each run a batch changed is written in the batch's synced
//! write, and start-up loads the stored runs instead of replaying the ledger (a replay from
//! sequence 0 reaches the same runs). Runs stay in memory: a parent's children are counted over
//! them. Who may write which run record is the kernel's ([`kr::who`]: the executor's records,
//! decisions by the executed commitment's approvers); writing one grants no reading.

use crate::ledger::Outcome;
use accord_kernel as k;
use accord_kernel::run as kr;
use accord_proto::signing::RecordId;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// How many applied records' effects are kept for [`Runs::take_effects`]: effects are taken by
/// the RunService right after its own write; the bound keeps records submitted elsewhere (whose
/// effects nobody takes) from growing the map.
const EFFECTS_KEPT: usize = 1024;

/// Every run's derived state and the effects of recently applied records.
#[derive(Debug, Default)]
pub struct Runs {
    runs: BTreeMap<String, kr::Run>,
    effects: HashMap<RecordId, Vec<kr::RunEffect>>,
    effects_order: VecDeque<RecordId>,
    /// Since the last [`Runs::publish_into`] (the machine's working copy only): the runs
    /// changed and the records whose effects were kept.
    touched: BTreeSet<String>,
    new_effects: Vec<RecordId>,
}

impl Runs {
    /// One run's derived state.
    pub fn get(&self, id: &str) -> Option<&kr::Run> {
        self.runs.get(id)
    }

    /// How many runs name `id` as their parent.
    pub fn child_count(&self, id: &str) -> usize {
        kr::child_count(self.runs.values(), id)
    }

    /// The effects of the applied record `id` (an execution claim, an acted-upon), once.
    pub fn take_effects(&mut self, id: &RecordId) -> Vec<kr::RunEffect> {
        self.effects.remove(id).unwrap_or_default()
    }

    /// Keeps `effects` of record `id`, forgetting the oldest beyond [`EFFECTS_KEPT`].
    fn keep_effects(&mut self, id: RecordId, effects: Vec<kr::RunEffect>) {
        if self.effects_order.len() >= EFFECTS_KEPT
            && let Some(old) = self.effects_order.pop_front()
        {
            self.effects.remove(&old);
        }
        self.effects_order.push_back(id);
        self.effects.insert(id, effects);
    }

    /// The runs as stored at start-up.
    pub fn load(stored: Vec<StoredRun>) -> Runs {
        let mut r = Runs::default();
        for s in stored {
            r.runs.insert(s.run.id.clone(), s.run);
        }
        r
    }

    /// The runs changed since the last [`Runs::publish_into`], as stored.
    pub fn changed(&self) -> Vec<(String, StoredRun)> {
        self.touched
            .iter()
            .filter_map(|id| {
                let run = self.runs.get(id)?.clone();
                Some((id.clone(), StoredRun { run }))
            })
            .collect()
    }

    /// Copies what changed since the last call into `published`: O(runs touched by the batch),
    /// not O(all runs), since it runs on the writer's path after every synced batch.
    pub fn publish_into(&mut self, published: &mut Runs) {
        for id in std::mem::take(&mut self.touched) {
            if let Some(r) = self.runs.get(&id) {
                published.runs.insert(id, r.clone());
            }
        }
        for rid in std::mem::take(&mut self.new_effects) {
            if let Some(e) = self.effects.get(&rid) {
                published.keep_effects(rid, e.clone());
            }
        }
    }

    /// Moves one batch's changes — what [`Runs::publish_into`] copied into an empty `Runs` when
    /// the batch was persisted — into `published`, once the batch is synced (issue 14).
    pub fn merge_into(mut self, published: &mut Runs) {
        published.runs.append(&mut self.runs);
        for rid in self.effects_order {
            if let Some(e) = self.effects.remove(&rid) {
                published.keep_effects(rid, e);
            }
        }
    }

    /// Applies one run record at ledger time `now`; `commitments` holds the commitment the run
    /// executes (and the record's), as derived before it.
    pub fn apply(
        &mut self,
        commitments: &dyn k::Directory,
        record: &k::Record,
        access: &k::Access,
        now: i64,
    ) -> Outcome {
        let verdict = kr::apply_run(&self.runs, commitments, record, access, now).map(
            |kr::RunApplied { next, effects }| {
                if !effects.is_empty() {
                    self.keep_effects(record.id, effects);
                    self.new_effects.push(record.id);
                }
                self.touched.insert(next.id.clone());
                self.runs.insert(next.id.clone(), next);
            },
        );
        crate::convert::outcome(verdict)
    }
}

/// One run as stored (`pj_runs`, JSON). (Stores written before issue 27 also list who wrote
/// the run; that list granted reading and is ignored.)
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoredRun {
    /// The run's derived state.
    pub run: kr::Run,
}
