//! The derived state of one commitment (all axes the records determine). Never edited: it is
//! only ever produced by [`apply`](crate::apply) from records, and a replay of the same records
//! gives the same value.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::{
    AcceptanceCriterion, AdmissionOutcome, Condition, ControlReport, ExecutionReport, GateAnswer,
    NoticeType, Party, Queue, RecheckOutcome, RecordId, RevokeKind, StopAnswer, StopMode, Terms,
};
use crate::state::State;

/// The item key of a commitment without line items (its single, whole item).
pub const WHOLE: &str = "";

/// Derived state of one commitment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commitment {
    /// The commitment id.
    pub id: String,
    /// The home organisation: the one node that sequences this commitment's records and
    /// writes the records its clock produces (issue 26; ARCHITECTURE.md, "How organisations
    /// converge"). The organisation of the author of its `request`; a reopening keeps its
    /// origin's home. Empty only for state derived before homes existed (read as the local
    /// organisation, [`Commitment::home_org`]).
    #[serde(default)]
    pub home: String,
    /// Time of the record that created it.
    pub created_at: i64,
    /// Time of the last record applied.
    pub updated_at: i64,
    /// The record that created it (the request, or the allow that started a reopening). It holds
    /// the validity statement and the implicit acceptance terms.
    pub origin: RecordId,
    /// The obligee.
    pub obligee: Party,
    /// The acceptor; `None` = the obligee.
    pub acceptor: Option<Party>,
    /// The accountable party; `None` = the obligee.
    pub accountable: Option<Party>,
    /// The principal named by the request.
    pub principal: Option<Party>,
    /// The obligor, once known.
    pub obligor: Option<Party>,
    /// The party the commitment is offered to (request candidate, offer, reassign).
    pub offered_to: Option<Party>,
    /// Candidates proposed by nominate.
    pub nominees: Vec<Party>,
    /// The current terms.
    pub terms: Terms,
    /// The record id of the current terms version (request, obligee counter, accepted counter,
    /// amend): what `amend.supersedes` must name.
    pub terms_version: RecordId,
    /// Version number of the terms, from 1.
    pub version: u32,
    /// How many times the content (terms and parameters) has changed since the request: a gate
    /// answer is bound to the count at its time, so any change after the answer invalidates it
    /// for good, even an amend back to the content it answered (seed 000, "Conditions and
    /// gates": "If the content bound to an approval changes after the answer, even by one
    /// parameter, the answer stops being valid and the gate waits again"). An amend that
    /// changes nothing does not count.
    #[serde(default)]
    pub content_changes: u32,
    /// The current counter version (a candidate's counter), while countered.
    pub counter: Option<CounterVersion>,
    /// How delivery is accepted.
    pub acceptance: AcceptanceCriterion,
    /// Implicit acceptance window after `state`, in ms.
    pub implicit_window_ms: Option<i64>,
    /// Per line item state ([`WHOLE`] for a commitment without line items).
    pub items: BTreeMap<String, Item>,
    /// The queue, when pooled.
    pub queue: Option<QueueState>,
    /// The claim, when the obligor claimed from the pool.
    pub claim: Option<ClaimState>,
    /// Every claim record, in order: a produced promise resting on a claim that is no longer
    /// current (unclaimed, lease ended) is refused rather than read as a new promise.
    #[serde(default)]
    pub claims: Vec<RecordId>,
    /// How often the commitment was forwarded.
    pub forward_count: u32,
    /// The open delegate offer (or a reassign of a held commitment).
    pub delegate_offer: Option<HandoverOffer>,
    /// The open assign offer.
    pub assign_offer: Option<HandoverOffer>,
    /// The open defer.
    pub deferral: Option<Deferral>,
    /// The open revoke request.
    pub revoke: Option<OpenRevoke>,
    /// Every reject record applied (disputable).
    pub rejects: Vec<RecordId>,
    /// Dispute marks.
    pub disputes: Vec<DisputeMark>,
    /// Open conditions (including the precondition of a conditional promise).
    pub conditions: Vec<OpenCondition>,
    /// Notices given.
    pub notices: Vec<NoticeMark>,
    /// Consumption reported against the budget.
    pub consumed: u64,
    /// acted_upon records (executor reports): the evidence the kernel knows of.
    pub evidence: Vec<RecordId>,
    /// Admission declarations recorded on this commitment.
    pub admissions: Vec<AdmissionMark>,
    /// When this commitment is the reopening of another.
    pub reopens: Option<ReopenLink>,
    /// Reopenings started from this commitment.
    pub reopened_by: Vec<ReopenLink>,
    /// Ids of the records applied, in order (rejected records are kept by the node).
    pub history: Vec<RecordId>,
    /// Executors that reported through observation claims (seed 000, "Other state axes").
    #[serde(default)]
    pub executors: Vec<ExecutorState>,
    /// The latest stop request (seed 000, "Stop requests").
    #[serde(default)]
    pub stop: Option<StopState>,
    /// The control handover under way (seed 000, "Control handover").
    #[serde(default)]
    pub handover: Option<Handover>,
    /// The outcome of the last completed handover re-check.
    #[serde(default)]
    pub last_recheck: Option<(RecordId, RecheckOutcome)>,
    /// Attention raised for parties (a refused stop request, ...).
    #[serde(default)]
    pub attention: Vec<AttentionMark>,
    /// The parties the queue's distribution policy offered the commitment to since it entered
    /// its current queue, in order (seed 000, "Assignment": offer — "distribution policy"); what
    /// `first_candidate` skips and where `round_robin` moves on from. A forward clears it.
    #[serde(default)]
    pub policy_offers: Vec<Party>,
}

/// What one executor last claimed (the executor is the observation's author).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorState {
    /// The executor.
    pub executor: Party,
    /// Its last observation (a heartbeat).
    pub last_record: RecordId,
    /// When it was applied.
    pub last_seen: i64,
    /// The declared heartbeat interval.
    pub heartbeat_interval_ms: Option<i64>,
    /// The last execution claimed, with its record and its position in the history.
    pub execution: Option<(ExecutionReport, RecordId, usize)>,
    /// The last control claimed.
    pub control: Option<ControlReport>,
    /// It left cleanly.
    pub left_cleanly: bool,
    /// The last external state it reported that the kernel cannot map (cleared by a mapped claim).
    pub unmapped_state: Option<String>,
    /// The last checkpoint, with its record and its position in the history.
    pub checkpoint: Option<(String, RecordId, usize)>,
    /// Order of the observation among all applied records (for "latest" across executors).
    pub seq: usize,
    /// An external claimant (Access's `Observer` authority), not the executor: its claims move
    /// the axes but never confirm a stop (seed 000: "'Stopped' appears on the execution axis
    /// only when the executor confirms it").
    #[serde(default)]
    pub external: bool,
}

/// A stop request and what followed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopState {
    /// The stop_request record.
    pub record: RecordId,
    /// Who asked.
    pub by: Party,
    /// How.
    pub mode: StopMode,
    /// Why.
    pub reason: String,
    /// When.
    pub at: i64,
    /// History length when it was applied (claims after it confirm it).
    pub seq: usize,
    /// The executor's response, with its record.
    pub response: Option<(StopAnswer, RecordId)>,
    /// The executor's confirming claim (stopped, or paused for a pause), with its record and
    /// its position in the history.
    #[serde(default)]
    pub confirmed: Option<(RecordId, usize)>,
    /// The resume_after_stop (or the re-check "continue") that ended it.
    pub resumed: Option<RecordId>,
}

impl StopState {
    /// Whether the stop still holds: not refused and not resumed.
    pub fn in_effect(&self) -> bool {
        self.resumed.is_none() && !matches!(self.response, Some((StopAnswer::Refuse, _)))
    }
}

/// The phase of a control handover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoverPhase {
    /// A person holds control (control axis: manual).
    Leased,
    /// Control was handed back with a handoff note; the re-check is due (control: intervened).
    HandedBack,
}

/// A control handover under way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handover {
    /// The control_lease record.
    pub lease: RecordId,
    /// The person holding control.
    pub holder: Party,
    /// Optional end of the lease.
    pub until: Option<i64>,
    /// The phase.
    pub phase: HandoverPhase,
    /// The hand back record and its note.
    pub handed_back: Option<(RecordId, String)>,
}

/// Attention raised for parties by a record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttentionMark {
    /// The record that raised it.
    pub record: RecordId,
    /// For whom.
    pub to: Vec<Party>,
    /// About what (the operation's wire name).
    pub about: String,
    /// The reason given.
    pub reason: String,
}

/// One participant's answer to a gate, bound to the content it answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerMark {
    /// The answering record (gate_decision, satisfy_condition, accept or reject).
    pub record: RecordId,
    /// The participant.
    pub by: Party,
    /// The answer.
    pub answer: GateAnswer,
    /// The terms version it was given on.
    pub terms_version: RecordId,
    /// The content it answered (the terms and parameters as they were).
    pub content: Terms,
    /// [`Commitment::content_changes`] when it was given: the answer counts while no change
    /// has been made since.
    #[serde(default)]
    pub content_changes: u32,
    /// When.
    pub at: i64,
}

/// State of one line item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// What the item is.
    pub description: String,
    /// Its commitment-axis state.
    pub state: State,
    /// The validity statement an expire would rest on, while expirable.
    pub validity: Option<Validity>,
    /// The statement of fulfilment, while stated (kept once accepted).
    pub statement: Option<Statement>,
    /// Accepted by the Work service party's implicit accept.
    pub accepted_implicitly: bool,
    /// While the item is promised or conditionally promised: when that work began and whether an
    /// executor has reported it started (the summary category's ready / active / unknown rows,
    /// [`crate::view::item_rows`]).
    #[serde(default)]
    pub work: Option<WorkPhase>,
}

/// The work phase of an item: from the record that made it promised or conditionally promised
/// (promise, promise_conditional, claim, accept_counter), or that sent a statement back to the
/// doer (reject, an allowed revoke_statement), until it is stated, closed or unclaimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkPhase {
    /// The position in `history` of the record that began it: only claims made after it bear
    /// on this work (an earlier executor's silence is about an earlier attempt).
    pub since: usize,
    /// Execution has begun: an executor reported an execution other than not started (or a
    /// state it cannot map) since `since`, or the work was sent back after a statement (seed
    /// 000, "Summary category": awaiting_acceptance "can move to … active (on rejection)").
    pub begun: bool,
}

/// A validity statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validity {
    /// The record that declared it (request or promise_conditional).
    pub record: RecordId,
    /// When it ends.
    pub until: i64,
}

/// A statement of fulfilment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement {
    /// The `state` record.
    pub record: RecordId,
    /// Who stated.
    pub by: Party,
    /// When.
    pub at: i64,
    /// Fulfilment references.
    pub refs: Vec<String>,
}

/// A candidate's counter version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterVersion {
    /// The counter record: its id is the digest accept_counter must name.
    pub record: RecordId,
    /// Who countered.
    pub by: Party,
    /// The proposed terms.
    pub terms: Terms,
}

/// The queue and the record that declared it (the lease behaviour an unclaim rests on).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueState {
    /// The queue.
    pub queue: Queue,
    /// The request or forward that declared it.
    pub declared_by: RecordId,
}

/// A claim from the pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimState {
    /// The claiming obligor.
    pub by: Party,
    /// The claim record.
    pub record: RecordId,
    /// When the ownership lease ends, if the queue defines one.
    pub lease_until: Option<i64>,
    /// The promise record the claim produced, once written (seed 000, "Assignment": claim — "a
    /// promise record is produced"): one per claim.
    #[serde(default)]
    pub promise: Option<RecordId>,
}

/// An open delegate or assign offer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoverOffer {
    /// The offer record (what the acceptance's `offer_id` names).
    pub record: RecordId,
    /// Who offered.
    pub by: Party,
    /// The proposed new party.
    pub to: Party,
    /// Handover note (delegate).
    pub note: String,
}

/// An open defer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deferral {
    /// The defer record (what a resume names in basis).
    pub record: RecordId,
    /// Who deferred.
    pub by: Party,
    /// Why.
    pub reason: String,
    /// Return date, if any.
    pub return_at: Option<i64>,
    /// Return event, if any.
    pub return_event: Option<String>,
    /// When it was deferred.
    pub at: i64,
    /// The items it holds (the defer's targets): the summary category `deferred` applies to
    /// them (empty in state derived before items were kept: every item).
    #[serde(default)]
    pub items: Vec<String>,
}

/// An open revoke request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenRevoke {
    /// The revoke record (what allow/refuse name in basis).
    pub record: RecordId,
    /// Which revoke.
    pub kind: RevokeKind,
    /// Who asked.
    pub by: Party,
    /// Why.
    pub reason: String,
    /// The items it acts on.
    pub items: Vec<String>,
    /// When.
    pub at: i64,
}

/// A dispute mark (no state change).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeMark {
    /// The record that made the mark (a dispute, or the refuse of a revoke_acceptance).
    pub record: RecordId,
    /// The disputed record (a reject, or the revoke_acceptance).
    pub disputed: RecordId,
    /// Who disputes.
    pub by: Party,
    /// Why.
    pub reason: String,
    /// True when the mark comes from a refused revoke_acceptance.
    pub from_refusal: bool,
}

/// An open Condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenCondition {
    /// The record that opened it (open_condition or promise_conditional).
    pub record: RecordId,
    /// Its owner (who opened it).
    pub owner: Party,
    /// The condition.
    pub condition: Condition,
    /// For the precondition of a conditional promise: the items it holds back. Empty otherwise.
    pub precondition_items: Vec<String>,
    /// The answers given (only those whose content is still the commitment's count).
    #[serde(default)]
    pub answers: Vec<AnswerMark>,
    /// When it was opened.
    #[serde(default)]
    pub opened_at: i64,
}

impl OpenCondition {
    /// Whether this is the precondition of a conditional promise.
    pub fn is_precondition(&self) -> bool {
        !self.precondition_items.is_empty()
    }
}

/// A notice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoticeMark {
    /// The notice record.
    pub record: RecordId,
    /// Who gave it.
    pub by: Party,
    /// Its type.
    pub notice_type: NoticeType,
    /// Its text.
    pub text: String,
    /// When.
    pub at: i64,
}

/// An admission declaration recorded on the commitment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmissionMark {
    /// The admission record.
    pub record: RecordId,
    /// The peer record it is about.
    pub peer_record: RecordId,
    /// The peer.
    pub peer: String,
    /// The outcome.
    pub outcome: AdmissionOutcome,
    /// The reason code, if any.
    pub code: String,
}

/// The link between a commitment whose acceptance was revoked and its reopening.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReopenLink {
    /// The commitment whose acceptance was revoked (it stays accepted).
    pub commitment: String,
    /// The reopening commitment.
    pub reopening: String,
    /// The revoke_acceptance record.
    pub revoke: RecordId,
    /// The allow record that started the reopening.
    pub allow: RecordId,
}

impl Commitment {
    /// The home organisation ([`Commitment::home`]); `local` for state derived before homes
    /// existed.
    pub fn home_org<'a>(&'a self, local: &'a str) -> &'a str {
        if self.home.is_empty() {
            local
        } else {
            &self.home
        }
    }

    /// The acceptor (the obligee unless another was named).
    pub fn acceptor(&self) -> &Party {
        self.acceptor.as_ref().unwrap_or(&self.obligee)
    }

    /// The accountable party (the obligee unless another was named).
    pub fn accountable(&self) -> &Party {
        self.accountable.as_ref().unwrap_or(&self.obligee)
    }

    /// Whether the commitment has line items (otherwise its only item is [`WHOLE`]).
    pub fn has_line_items(&self) -> bool {
        !self.items.contains_key(WHOLE)
    }

    /// The candidate obligors: the obligor once known; otherwise the party it is offered to and
    /// the queue's candidate set.
    pub fn candidate_obligors(&self) -> Vec<Party> {
        if let Some(o) = &self.obligor {
            return vec![o.clone()];
        }
        let mut out: Vec<Party> = self.offered_to.iter().cloned().collect();
        if let Some(q) = &self.queue {
            for c in &q.queue.candidates {
                if !out.contains(c) {
                    out.push(c.clone());
                }
            }
        }
        out
    }

    /// Whether every item is terminal (the commitment reached a terminal state).
    pub fn is_closed(&self) -> bool {
        self.items.values().all(|i| i.state.is_terminal())
    }

    /// The ids of the items that are still open.
    pub fn open_items(&self) -> Vec<String> {
        self.items
            .iter()
            .filter(|(_, i)| !i.state.is_terminal())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The single state, when every item is in the same one; `None` when mixed.
    pub fn state(&self) -> Option<State> {
        let mut states = self.items.values().map(|i| i.state);
        let first = states.next()?;
        states.all(|s| s == first).then_some(first)
    }

    /// Whether the budget is exhausted (consumption reported >= budget).
    pub fn budget_exhausted(&self) -> bool {
        self.terms
            .budget
            .as_ref()
            .is_some_and(|b| self.consumed >= b.amount)
    }

    /// Every party with a role on the commitment (for notifications and routing), without
    /// repeats: obligee, obligor, acceptor, accountable, principal, the control holder and the
    /// participants of its Conditions and gates.
    pub fn parties(&self) -> Vec<Party> {
        let mut out: Vec<Party> = Vec::new();
        let all = [
            Some(&self.obligee),
            self.obligor.as_ref(),
            self.acceptor.as_ref(),
            self.accountable.as_ref(),
            self.principal.as_ref(),
            self.handover.as_ref().map(|h| &h.holder),
        ];
        for p in all.into_iter().flatten() {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        // Gate participants (possibly of other organisations) have a role too: their answers
        // arrive through federation, so the records they answer must reach them.
        for oc in &self.conditions {
            for p in oc.condition.participant_list() {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }
}
