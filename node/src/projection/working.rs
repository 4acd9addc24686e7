//! The writer's working copy of the projection: the changes of the batch being committed, over
//! the stored (synced) state. The kernel sees its batch's own earlier records through the
//! overlay; every change is also turned into writes ([`Writes`]) that the ledger adds to the
//! batch's synced `WriteBatch` ([`Working::persist`]), with the watermark.

use super::due::next_due;
use super::restart;
use super::store::{self, Persisted, Stored, StoredAttention, Writes};
use super::timed;
use crate::error::Error;
use crate::ledger::{Batch, Outcome, Store};
use accord_kernel as k;
use accord_proto::pb::work::v1::HistoryEntry;
use accord_proto::signing::RecordId;
use prost::Message;
use std::collections::HashMap;
use std::sync::Arc;

/// The commitments a persisted batch changed, for the readers' cache once it is synced.
pub type Changed = Vec<(String, Option<Arc<Stored>>)>;

/// The commitments the kernel may look at for one record, as its [`k::Directory`].
struct Dir(HashMap<String, Arc<Stored>>);

impl k::Directory for Dir {
    fn commitment(&self, id: &str) -> Option<&k::Commitment> {
        self.0.get(id).map(|s| &s.commitment)
    }
}

/// The working copy (see the module doc).
#[derive(Debug, Default)]
pub struct Working {
    db: Option<Arc<Persisted>>,
    /// Commitments changed by the batch, not synced yet.
    overlay: HashMap<String, Arc<Stored>>,
    /// Commitments changed by persisted batches whose synced write has not been published yet
    /// (issue 14: the writer prepares the next batch while the previous one syncs); dropped
    /// once the readers' cache holds them ([`Working::published`]).
    inflight: HashMap<String, Arc<Stored>>,
    /// Ids found absent from the store since the last persist: a new commitment is looked up
    /// once per batch, not once per look (creation puts it in `overlay`, which is read first).
    absent: std::collections::HashSet<String>,
    /// Each changed commitment as it was before the batch (its deadline-index key and time
    /// index points to delete, its summary to compare for the change feed).
    base: HashMap<String, Option<Arc<Stored>>>,
    /// Commitments the batch gave a new reader (a watch of that party must hear of them).
    new_readers: std::collections::HashSet<String>,
    /// Other writes of the batch (history, readers, attention, acted upon).
    writes: Writes,
    /// The runs the batch changed, over those not published yet, over the store
    /// ([`crate::runs`]).
    pub runs: crate::runs::Runs,
    /// The commit envelopes (seed 003; in memory, see [`Working::apply`]).
    pub envelopes: crate::envelopes::Envelopes,
    /// One past the last record applied.
    next: u64,
    /// The latest record time applied (the deadline index is computed at it).
    now: i64,
    /// A storage read failed: the batch must not be written (the ledger stops).
    failed: Option<Error>,
    /// Records replayed at start-up.
    pub replayed: u64,
    /// Foreign organisations already in `pj_orgs` ([`super::restart`]).
    orgs: std::collections::HashSet<String>,
    /// The buffer every changed commitment is encoded into at persist (kept between batches).
    scratch: Vec<u8>,
    /// This organisation (Access's Work service party's), seen at the last apply.
    local: String,
    /// Access as at the first apply, for the summaries the change feed compares (whose move
    /// names the queue owners Access lets act; issue 29). Grants come from the config.
    view_access: Option<k::Access>,
    /// Records of commitments homed elsewhere, waiting for their home's decision (issue 26,
    /// item 3; cf `pj_pending`, loaded at open).
    pending: HashMap<RecordId, (u64, k::Record)>,
}

/// The outcome of a record that waits for its commitment's home to order it (issue 26).
pub const AWAITING_SEQUENCE: &str = "awaiting_sequence";

impl Working {
    /// Opens on the stored projection `db`, whose watermark is `next`.
    /// One past the last record applied (the watermark once persisted).
    pub fn next(&self) -> u64 {
        self.next
    }

    pub fn open(&mut self, db: Arc<Persisted>, next: u64, orgs: Vec<String>) {
        self.orgs = orgs.into_iter().collect();
        self.db = Some(db);
        self.next = next;
    }

    /// The records still waiting for their home's decision, read at open.
    pub fn load_pending(&mut self, pending: Vec<(u64, k::Record)>) {
        self.pending = pending.into_iter().map(|(s, r)| (r.id, (s, r))).collect();
    }

    /// The current state of `id`: the batch's, else the stored one.
    fn load(&mut self, id: &str) -> Option<Arc<Stored>> {
        if let Some(s) = self.overlay.get(id).or_else(|| self.inflight.get(id)) {
            return Some(s.clone());
        }
        if self.absent.contains(id) {
            return None;
        }
        let db = self.db.as_ref()?;
        match db.stored(id) {
            Ok(None) => {
                self.absent.insert(id.to_string());
                None
            }
            Ok(s) => s,
            Err(e) => {
                self.failed.get_or_insert(e);
                None
            }
        }
    }

    /// Sets the batch's state of a commitment.
    fn set(&mut self, s: Stored) {
        let id = s.commitment.id.clone();
        if !self.base.contains_key(&id) {
            let base = self.load(&id);
            self.base.insert(id.clone(), base);
        }
        self.overlay.insert(id, Arc::new(s));
    }

    fn put(&mut self, c: k::Commitment) {
        let old = self.load(&c.id);
        let had: std::collections::BTreeSet<k::Party> = old
            .as_ref()
            .map(|o| k::parties_with_role(&o.commitment).into_iter().collect())
            .unwrap_or_default();
        for p in k::parties_with_role(&c) {
            if !had.contains(&p) {
                self.new_readers.insert(c.id.clone());
                self.writes
                    .put(store::READERS, store::reader_key(&c.id, &p), Vec::new());
            }
        }
        // A produced promise is due only while its claim is the commitment's claim.
        let claim = c.claim.as_ref().map(|cl| cl.record);
        let promise_due = old
            .as_ref()
            .and_then(|o| o.promise_due)
            .filter(|due| Some(*due) == claim);
        let claims_due = old
            .as_ref()
            .map(|o| o.claims_due.clone())
            .unwrap_or_default();
        self.set(Stored {
            commitment: c,
            promise_due,
            due_ms: None,
            claims_due,
        });
    }

    /// Keeps the claims a run of this organisation owes its commitment (issue 29: derived from
    /// the run records whichever service recorded them, persisted with them, so a restart
    /// still writes them); a peer's run's claims are its own node's to write.
    fn owe_claims(&mut self, effects: &[k::run::RunEffect]) {
        for e in effects {
            let k::run::RunEffect::ExecutionClaim {
                commitment,
                executor,
                record,
                execution,
                heartbeat_interval_ms,
                left_cleanly,
                ..
            } = e
            else {
                continue;
            };
            if executor.organisation != self.local {
                continue;
            }
            if let Some(s) = self.load(commitment) {
                let mut s = (*s).clone();
                s.claims_due.push(store::OwedClaim {
                    record: *record,
                    executor: executor.clone(),
                    execution: *execution,
                    heartbeat_interval_ms: *heartbeat_interval_ms,
                    left_cleanly: *left_cleanly,
                });
                self.set(s);
            }
        }
    }

    /// An observation resting on an owed claim's run record, by its executor, is in the ledger
    /// (applied, refused or waiting for the home's order): the claim is no longer owed.
    fn claim_written(&mut self, record: &k::Record) {
        let Some(s) = self.load(&record.commitment) else {
            return;
        };
        let owed = |c: &store::OwedClaim| {
            !(c.executor == record.author && record.basis.contains(&c.record))
        };
        if s.claims_due.iter().all(owed) {
            return;
        }
        let mut s = (*s).clone();
        s.claims_due.retain(owed);
        self.set(s);
    }

    fn set_promise(&mut self, id: &str, promise: Option<RecordId>) {
        if let Some(s) = self.load(id) {
            let mut s = (*s).clone();
            s.promise_due = promise;
            self.set(s);
        }
    }

    /// Keeps an effect as derived state (at append and at replay alike).
    fn effect(&mut self, seq: u64, record: &k::Record, now: i64, e: k::Effect, n: &mut u32) {
        match e {
            k::Effect::Notify {
                commitment,
                record: rid,
                to,
                about,
            } => {
                for p in to {
                    let a = StoredAttention {
                        commitment: commitment.clone(),
                        record: rid,
                        from: record.author.clone(),
                        at: now,
                        about: about.clone(),
                    };
                    self.writes.put(
                        store::ATTENTION,
                        store::attention_key(&p, seq, *n),
                        store::encode(&a),
                    );
                    *n += 1;
                }
            }
            // The claimant's organisation writes the promise its claim produced, wherever the
            // commitment's home is.
            k::Effect::PromiseProduced {
                commitment,
                claim,
                obligor,
                ..
            } if obligor.organisation == self.local => self.set_promise(&commitment, Some(claim)),
            k::Effect::PromiseProduced { .. } => {}
            k::Effect::StartReopening { commitment, .. } => self.put(*commitment),
        }
    }

    /// The commitments the kernel may look at for `record`: its own, and the reopening id an
    /// `allow` of a revoke_acceptance would take (seed 000, "Revoke").
    fn dir_for(&mut self, record: &k::Record) -> Dir {
        let mut ids = vec![record.commitment.clone()];
        if let k::Operation::Allow {
            reopening_commitment_id,
            ..
        } = &record.op
        {
            ids.push(if reopening_commitment_id.is_empty() {
                format!(
                    "{}~reopen~{}",
                    record.commitment,
                    &k::hex_id(&record.id)[..16]
                )
            } else {
                reopening_commitment_id.clone()
            });
        }
        let mut m = HashMap::new();
        for id in ids {
            if let Some(s) = self.load(&id) {
                m.insert(id, s);
            }
        }
        Dir(m)
    }

    /// The commitments the run machine may look at for a record of run `run`: the record's, and
    /// the one the run executes.
    fn dir_for_run(&mut self, record: &k::Record, executed: Option<String>) -> Dir {
        let mut m = HashMap::new();
        for id in [Some(record.commitment.clone()), executed]
            .into_iter()
            .flatten()
        {
            if !id.is_empty()
                && !m.contains_key(&id)
                && let Some(s) = self.load(&id)
            {
                m.insert(id, s);
            }
        }
        Dir(m)
    }

    /// Applies one record; returns its outcome. Its effects are kept as derived state.
    pub fn apply(&mut self, seq: u64, record: &k::Record, access: &k::Access, now: i64) -> Outcome {
        self.next = seq + 1;
        self.now = now;
        self.local.clone_from(&access.service.organisation);
        if self.view_access.is_none() {
            self.view_access = Some(access.clone());
        }
        let org = &record.author.organisation;
        if *org != access.service.organisation && !self.orgs.contains(org) {
            restart::record_org(&mut self.writes, org);
            self.orgs.insert(org.clone());
        }
        // Run records go to the run machine (seed 002), not to the commitment kernel; it decides
        // who may write them on the commitment the run executes.
        if let k::Operation::Run(op) = &record.op {
            return self.apply_run(record, &op.run, access, now);
        }
        if let k::Operation::Observation(_) = &record.op {
            self.claim_written(record);
        }
        if let k::Operation::Envelope(_) | k::Operation::Tick(_) = record.op {
            return self.apply_envelope(seq, record, access, now);
        }
        if let Some(o) = self.follow_home(seq, record, access) {
            return o;
        }
        self.apply_commitment(seq, seq, record, access, now)
    }

    /// A record of a commitment homed at another organisation (issue 26, item 3: one order):
    /// the home's own records apply as they arrive (a peer's records arrive in its ledger
    /// order); a record of any other organisation — this one's parties' included — waits in
    /// `pj_pending`, with no effect, until the home's admission declaration about it arrives,
    /// which applies it at that point with the time the home applied it, following the home's
    /// verdict. `None`: the record applies as usual.
    fn follow_home(&mut self, seq: u64, record: &k::Record, access: &k::Access) -> Option<Outcome> {
        let c = self.load(&record.commitment)?;
        let home = c.commitment.home_org(&self.local).to_string();
        if home == self.local {
            return None;
        }
        let author = &record.author.organisation;
        if *author == home {
            if let k::Operation::Admission {
                record_id: Some(rid),
                outcome,
                code,
                at,
                ..
            } = &record.op
            {
                return Some(self.sequenced(
                    seq,
                    rid,
                    (*outcome, code),
                    &record.author,
                    *at,
                    access,
                ));
            }
            // The home's own record: it applied it with its own organisation's grants, which
            // this node does not hold; its authorities are taken on the home's word
            // (`Access::vouched`), so both apply the same records.
            let now = self.now;
            return Some(self.apply_commitment(
                seq,
                seq,
                record,
                &access.vouching(&record.author),
                now,
            ));
        }
        // This node's own declarations about peer records stay local, as before; and a
        // commitment this organisation holds in an open commit envelope refuses its parties'
        // other records here at once (seed 003: the hold is the participant's own rule).
        if matches!(record.op, k::Operation::Admission { .. })
            || self.envelopes.hold(record, access).is_some()
        {
            return None;
        }
        self.pending.insert(record.id, (seq, record.clone()));
        self.writes.put(
            store::PENDING,
            record.id.to_vec(),
            store::encode_json(&(seq, record)),
        );
        let outcome = Outcome {
            applied: false,
            rejection_code: AWAITING_SEQUENCE.into(),
            rejection_detail: format!("{home}, the commitment's home, orders its records"),
        };
        self.history(seq, record, &outcome);
        Some(outcome)
    }

    /// The home decided `rid` (`outcome`, `code`) at time `at`: a record waiting here applies
    /// now, or is rejected with the home's code. A record not here changes nothing (federation
    /// holds the home's decision until the record arrives: `quarantine::missing`).
    fn sequenced(
        &mut self,
        seq: u64,
        rid: &RecordId,
        (outcome, code): (k::AdmissionOutcome, &str),
        decided_by: &k::Party,
        at: i64,
        access: &k::Access,
    ) -> Outcome {
        let applied = Outcome {
            applied: true,
            ..Default::default()
        };
        let Some((at_seq, r)) = self.pending.remove(rid) else {
            return applied;
        };
        self.writes.put(store::PENDING, rid.to_vec(), Vec::new());
        // The record's history entry (at its own position) now holds its final outcome: one
        // entry per record, the same at every node.
        if outcome == k::AdmissionOutcome::Admitted {
            // The home checked the author's authorities with its grants; its word stands here.
            let o = self.apply_commitment(seq, at_seq, &r, &access.vouching(&r.author), at);
            if !o.applied {
                tracing::error!(
                    commitment = %r.commitment,
                    code = %o.rejection_code,
                    "the home admitted a record this node's kernel rejects: diverged"
                );
            }
        } else {
            // The home's kernel refused it (`invalid_operation:<code>`), or federation did.
            let code = code.strip_prefix("invalid_operation:").unwrap_or(code);
            let o = Outcome {
                applied: false,
                rejection_code: code.to_string(),
                rejection_detail: "rejected by the commitment's home".into(),
            };
            self.history(at_seq, &r, &o);
            // The author's record lost: it is told in its attention list (issue 26, item 3).
            // Only this organisation's parties have their lists here.
            if r.author.organisation == self.local {
                let a = StoredAttention {
                    commitment: r.commitment.clone(),
                    record: r.id,
                    from: decided_by.clone(),
                    at,
                    about: k::Notification::RecordRejected {
                        code: code.to_string(),
                    },
                };
                self.writes.put(
                    store::ATTENTION,
                    store::attention_key(&r.author, seq, 0),
                    store::encode(&a),
                );
            }
        }
        applied
    }

    /// Applies a commitment record through the kernel at ledger position `seq`; its history
    /// entry is kept at `history_seq` (its own position, for a record the home ordered later).
    fn apply_commitment(
        &mut self,
        seq: u64,
        history_seq: u64,
        record: &k::Record,
        access: &k::Access,
        now: i64,
    ) -> Outcome {
        let dir = self.dir_for(record);
        // apply_with sees every commitment it needs: a taken reopening id is refused, and an
        // admission about a record of no known commitment is applied without derived state.
        // Commit envelopes (issue 13 item 7b): a commitment staged in an open envelope is held.
        let result = match self.envelopes.hold(record, access) {
            Some(r) => Err(r),
            None => k::apply_with(&dir, record, access, now),
        };
        if self.envelopes.staged_envelope(&record.id).is_some() {
            // Start-up must know the staged record reached the ledger (`restart`).
            let entry = restart::EnvelopeEntry {
                staged: true,
                ..Default::default()
            };
            restart::record_envelope(&mut self.writes, seq, &entry);
        }
        self.envelopes.note_written(&record.id);
        let outcome = crate::convert::outcome(result.map(|k::Applied { next, effects }| {
            if let Some(c) = next {
                self.put(c);
            }
            let mut n = 0;
            for e in effects {
                self.effect(seq, record, now, e, &mut n);
            }
            match &record.op {
                k::Operation::ActedUpon {
                    record_id: Some(on),
                    ..
                } => self
                    .writes
                    .put(store::ACTED, store::acted_key(on, seq), record.id.to_vec()),
                // The promise a claim produced is in the ledger (by the claimant, or by the
                // Work service party in ledgers from before issue 29).
                k::Operation::Promise => {
                    let due = self.load(&record.commitment).and_then(|s| s.promise_due);
                    if due.is_some_and(|cl| record.basis.contains(&cl)) {
                        self.set_promise(&record.commitment, None);
                    }
                }
                _ => {}
            }
        }));
        self.history(history_seq, record, &outcome);
        outcome
    }

    /// Keeps `record`'s outcome in its commitment's history, at ledger position `seq`.
    fn history(&mut self, seq: u64, record: &k::Record, outcome: &Outcome) {
        let entry = HistoryEntry {
            record_id: record.id.to_vec().into(),
            operation: record.op.wire_name().to_string(),
            outcome: Some(outcome.clone()),
            sequence: seq,
        };
        self.writes.put(
            store::HISTORY,
            store::history_key(&record.commitment, seq),
            entry.encode_to_vec(),
        );
    }

    /// Applies a run record of run `run` (seed 002), reading the runs it needs from the store
    /// (through the run cache) unless the batch or an unpublished one changed them.
    fn apply_run(
        &mut self,
        record: &k::Record,
        run: &str,
        access: &k::Access,
        now: i64,
    ) -> Outcome {
        let db = self.db.clone();
        let failed = std::cell::RefCell::new(None);
        let load = |id: &str| {
            db.as_ref()?
                .run(id)
                .map_err(|e| *failed.borrow_mut() = Some(e))
                .ok()
                .flatten()
        };
        let executed = self.runs.get(run, &load).and_then(|r| r.commitment.clone());
        let dir = self.dir_for_run(record, executed);
        let (outcome, effects) = self.runs.apply(&load, &dir, record, access, now);
        if let Some(e) = failed.into_inner() {
            self.failed.get_or_insert(e);
        }
        self.owe_claims(&effects);
        outcome
    }

    /// Applies an envelope or tick record to the in-memory envelopes, indexing it (with the
    /// balances it looked up) for start-up ([`super::restart`]).
    fn apply_envelope(
        &mut self,
        seq: u64,
        record: &k::Record,
        access: &k::Access,
        now: i64,
    ) -> Outcome {
        let seen = std::cell::RefCell::new(restart::EnvelopeEntry::default());
        let failed = std::cell::RefCell::new(None);
        let (overlay, db) = (&self.overlay, &self.db);
        let inflight = &self.inflight;
        // The account's balance, only if its commitment is known here and the envelope's
        // author consented as its holder or accountable party (issue 27).
        let budget = |a: &str, author: &k::Party| {
            let s = match overlay.get(a).or_else(|| inflight.get(a)) {
                Some(s) => Some(s.clone()),
                None => db
                    .as_ref()
                    .and_then(|d| d.stored(a).map_err(|e| *failed.borrow_mut() = Some(e)).ok())
                    .flatten(),
            };
            let v = s
                .filter(|s| k::envelope::may_move_budget(&s.commitment, author))
                .and_then(|s| s.commitment.terms.budget.as_ref().map(|b| b.amount));
            seen.borrow_mut().budgets.push((a.to_string(), v));
            v
        };
        let outcome = self.envelopes.apply(record, access, now, &budget);
        if let Some(e) = failed.into_inner() {
            self.failed.get_or_insert(e);
        }
        restart::record_envelope(&mut self.writes, seq, &seen.into_inner());
        outcome
    }

    /// Adds the batch's writes to `batch`: the changed commitments with their deadline-index
    /// keys and time-index points, the other derived state, the changed runs, and the
    /// watermark. Returns the changed commitments, for the readers' cache once the batch is
    /// synced (until then later batches read them here, `inflight`), and the ids the change
    /// feed is to carry: those whose summary at the batch's time differs from before it, or
    /// that gained a reader ([`super::timed`]).
    pub fn persist(
        &mut self,
        st: &Store,
        batch: &mut Batch,
    ) -> Result<(Changed, Vec<String>, crate::runs::RunBatch), Error> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        // The apply step's writes (history, readers, attention, ...) touch other column families
        // than the commitments and their deadline index below, so their order does not matter.
        std::mem::take(&mut self.writes).into_batch(st, batch)?;
        let mut changed = Vec::with_capacity(self.overlay.len());
        let mut feed = Vec::new();
        // One buffer for every commitment's encoding, put straight into the batch (which copies
        // it): no allocation, regrowth and second copy per commitment (issue 14: the writer's
        // profile had 12 % in `to_allocvec` and 11 % in moving those vectors into the batch).
        let mut buf = std::mem::take(&mut self.scratch);
        let no_grants = k::Access::default();
        let view_access = self.view_access.as_ref().unwrap_or(&no_grants);
        for (id, mut s) in std::mem::take(&mut self.overlay) {
            // Only the home's clock acts on a commitment (issue 26, item 1): one homed elsewhere
            // is kept out of the deadline index.
            // Claims a run of this organisation owes are written here, wherever the home is.
            let due = if s.commitment.home_org(&self.local) == self.local {
                next_due(
                    &s.commitment,
                    s.promise_due.is_some() || !s.claims_due.is_empty(),
                    self.now,
                )
            } else if !s.claims_due.is_empty() || s.promise_due.is_some() {
                Some(self.now)
            } else {
                None
            };
            let before = self.base.get(&id).cloned().flatten();
            if before.as_ref().is_none_or(|b| {
                timed::summary_key(&b.commitment, self.now, view_access)
                    != timed::summary_key(&s.commitment, self.now, view_access)
            }) || self.new_readers.contains(&id)
            {
                feed.push(id.clone());
            }
            let old_points = before
                .as_ref()
                .map(|b| timed::change_points(&b.commitment))
                .unwrap_or_default();
            let points = timed::change_points(&s.commitment);
            for t in old_points.iter().filter(|t| !points.contains(t)) {
                st.delete_extra(batch, store::TIMED, &timed::key(*t, &id))?;
            }
            for t in points.iter().filter(|t| !old_points.contains(t)) {
                st.put_extra(batch, store::TIMED, &timed::key(*t, &id), &[])?;
            }
            let base = before.and_then(|b| b.due_ms);
            if base != due {
                if let Some(b) = base {
                    st.delete_extra(batch, store::DUE, &store::due_key(b, &id))?;
                }
                if let Some(d) = due {
                    st.put_extra(batch, store::DUE, &store::due_key(d, &id), &[])?;
                }
            }
            // Usually the only holder: set the due time in place rather than clone the state.
            Arc::make_mut(&mut s).due_ms = due;
            buf.clear();
            buf = store::encode_into(&*s, buf);
            st.put_extra(batch, store::COMMITMENTS, id.as_bytes(), &buf)?;
            self.inflight.insert(id.clone(), s.clone());
            changed.push((id, Some(s)));
        }
        self.scratch = buf;
        self.base.clear();
        self.new_readers.clear();
        self.absent.clear();
        let mut writes = store::Writes::default();
        let runs = self.runs.persist();
        for (id, run) in &runs.runs {
            let stored = crate::runs::StoredRunRef { run };
            writes.put(
                store::RUNS,
                id.as_bytes().to_vec(),
                store::encode_json(&stored),
            );
        }
        for (parent, child) in &runs.children {
            writes.put(
                store::RUN_CHILDREN,
                store::run_child_key(parent, child),
                Vec::new(),
            );
        }
        writes.into_batch(st, batch)?;
        st.batch_meta(batch, store::WATERMARK, &self.next.to_be_bytes())?;
        st.batch_meta(batch, store::LAYOUT, store::LAYOUT_VERSION)?;
        Ok((changed, feed, runs))
    }

    /// The batch that changed `changed` is synced and in the readers' cache: later batches read
    /// those commitments there (unless a later batch changed one again).
    pub fn published(&mut self, changed: &[(String, Option<Arc<Stored>>)]) {
        for (id, s) in changed {
            if let (Some(now), Some(s)) = (self.inflight.get(id), s)
                && Arc::ptr_eq(now, s)
            {
                self.inflight.remove(id);
            }
        }
    }
}
