//! The runs the node knows (seed 002, "Run states and execution receipts"), beside the
//! commitments in the `Projection` (`crate::projection`): every `Operation::Run`
//! record, in ledger order, goes to the kernel's run machine ([`kr::apply_run`]); a rejected one
//! is recorded with its rejection and changes nothing. Like the commitments, runs are derived
//! and live in storage (`pj_runs`, issue 15; issue 27 item 3): each run a batch changed is
//! written in the batch's synced write, and a run is read through a bounded cache
//! (`projection.cache_runs`), never all held in memory; a parent's children are counted from a
//! stored index (`pj_run_children`, parent ‖ 0 ‖ child), not over every run. Who may write which
//! run record is the kernel's ([`kr::who`]: the executor's records, decisions by the executed
//! commitment's approvers); writing one grants no reading.
//!
//! This module owns the writer's side ([`Runs`]: the batch's runs over those persisted but not
//! yet published, over the store) and the published effects ([`RunEffects`]); it does not
//! depend on the projection, which hands it a loader for the stored runs.

use crate::ledger::Outcome;
use accord_kernel as k;
use accord_kernel::run as kr;
use accord_proto::signing::RecordId;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// How many applied records' effects are kept for [`RunEffects::take`]: effects are taken by
/// the RunService right after its own write; the bound keeps records submitted elsewhere (whose
/// effects nobody takes) from growing the map.
const EFFECTS_KEPT: usize = 1024;

/// Reads a stored (published) run.
pub type Load<'a> = &'a dyn Fn(&str) -> Option<Arc<kr::Run>>;

/// The runs `apply_run` may look at for one record: the run and the parent a start names.
struct Dir(HashMap<String, Arc<kr::Run>>);

impl kr::RunDirectory for Dir {
    fn run(&self, id: &str) -> Option<&kr::Run> {
        self.0.get(id).map(|r| &**r)
    }
}

/// The writer's working copy of the runs (see the module doc).
#[derive(Debug, Default)]
pub struct Runs {
    /// Runs changed by the batch being prepared.
    batch: BTreeMap<String, Arc<kr::Run>>,
    /// Runs changed by persisted batches not published yet; dropped once the readers' cache
    /// holds them ([`Runs::published`]).
    inflight: HashMap<String, Arc<kr::Run>>,
    /// (parent, child) links made by the batch.
    children: Vec<(String, String)>,
    /// The effects of the batch's applied records.
    effects: Vec<(RecordId, Vec<kr::RunEffect>)>,
}

/// What one persisted batch changed, to write and then to publish.
#[derive(Debug, Default)]
pub struct RunBatch {
    /// The runs changed, as they now are.
    pub runs: Vec<(String, Arc<kr::Run>)>,
    /// New (parent, child) links.
    pub children: Vec<(String, String)>,
    /// The effects of the applied records.
    pub effects: Vec<(RecordId, Vec<kr::RunEffect>)>,
}

impl Runs {
    /// Run `id` as the writer sees it: the batch's, else an unpublished one, else the store's.
    pub fn get(&self, id: &str, load: Load<'_>) -> Option<Arc<kr::Run>> {
        self.batch
            .get(id)
            .or_else(|| self.inflight.get(id))
            .cloned()
            .or_else(|| load(id))
    }

    /// Applies one run record at ledger time `now`; `commitments` holds the commitment the run
    /// executes (and the record's), as derived before it. Returns the outcome and the applied
    /// record's effects (also kept for [`RunEffects::take`]).
    pub fn apply(
        &mut self,
        load: Load<'_>,
        commitments: &dyn k::Directory,
        record: &k::Record,
        access: &k::Access,
        now: i64,
    ) -> (Outcome, Vec<kr::RunEffect>) {
        // The run and, for a start, the parent it names (a non-run record is the kernel's
        // `wrong_machine`).
        let (run, parent) = match &record.op {
            k::Operation::Run(op) => match &op.body {
                kr::RunBody::Start(s) => (op.run.clone(), s.parent.clone()),
                _ => (op.run.clone(), None),
            },
            _ => (String::new(), None),
        };
        let mut dir = HashMap::new();
        for id in std::iter::once(run).chain(parent.clone()) {
            if let Some(r) = self.get(&id, load) {
                dir.insert(id, r);
            }
        }
        let mut applied_effects = Vec::new();
        let verdict = kr::apply_run(&Dir(dir), commitments, record, access, now).map(
            |kr::RunApplied { next, effects }| {
                if !effects.is_empty() {
                    applied_effects.clone_from(&effects);
                    self.effects.push((record.id, effects));
                }
                // Only an applied start names a parent: the new run is its child.
                if let Some(p) = parent {
                    self.children.push((p, next.id.clone()));
                }
                self.batch.insert(next.id.clone(), Arc::new(next));
            },
        );
        (crate::convert::outcome(verdict), applied_effects)
    }

    /// Takes what the batch changed, for its synced write and, once synced, its publication;
    /// until then later batches read those runs here.
    pub fn persist(&mut self) -> RunBatch {
        let runs: Vec<_> = std::mem::take(&mut self.batch).into_iter().collect();
        for (id, r) in &runs {
            self.inflight.insert(id.clone(), r.clone());
        }
        RunBatch {
            runs,
            children: std::mem::take(&mut self.children),
            effects: std::mem::take(&mut self.effects),
        }
    }

    /// The batch holding `runs` is in the readers' cache: later batches read them there
    /// (unless a later batch changed one again).
    pub fn published(&mut self, runs: &[(String, Arc<kr::Run>)]) {
        for (id, r) in runs {
            if self.inflight.get(id).is_some_and(|now| Arc::ptr_eq(now, r)) {
                self.inflight.remove(id);
            }
        }
    }
}

/// The effects of recently applied run records, published for the RunService to take.
#[derive(Debug, Default)]
pub struct RunEffects {
    effects: HashMap<RecordId, Vec<kr::RunEffect>>,
    order: VecDeque<RecordId>,
}

impl RunEffects {
    /// The effects of the applied record `id` (an execution claim, an acted-upon), once.
    pub fn take(&mut self, id: &RecordId) -> Vec<kr::RunEffect> {
        self.effects.remove(id).unwrap_or_default()
    }

    /// Keeps `effects` of record `id`, forgetting the oldest beyond [`EFFECTS_KEPT`].
    pub fn keep(&mut self, id: RecordId, effects: Vec<kr::RunEffect>) {
        if self.order.len() >= EFFECTS_KEPT
            && let Some(old) = self.order.pop_front()
        {
            self.effects.remove(&old);
        }
        self.order.push_back(id);
        self.effects.insert(id, effects);
    }
}

/// One run as stored (`pj_runs`, JSON). (Stores written before issue 27 also list who wrote
/// the run; that list granted reading and is ignored.)
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoredRun {
    /// The run's derived state.
    pub run: kr::Run,
}

/// [`StoredRun`] by reference, for writing without a copy (the same JSON).
#[derive(Debug, serde::Serialize)]
pub struct StoredRunRef<'a> {
    /// The run's derived state.
    pub run: &'a kr::Run,
}
