//! `accordctl work declare <operation> COMMITMENT [flags]`: a party declares one Work kernel
//! operation (seed 000, "Operations"; the record's `operation` field) over WorkService.Declare
//! with its bearer token (`--token-file <node dir>/parties/<p>.token`); the node signs the
//! record for the party. One subcommand per operation, named by its wire name; flags are named
//! after the record's fields (kebab-case; a `*_unix_ms` field's flag drops the suffix and takes
//! a time). Every value is checked before sending ([`crate::flags`]); the answer is printed as
//! the kernel gave it: applied, or the rejection code and what it means.
//!
//! Exit codes: 0 applied (or, at a node that is not the commitment's home, recorded and awaiting
//! the home's order — `--wait` waits for the decision); 1 the call failed; 2 a flag was refused
//! (nothing sent); 3 recorded, but the kernel rejected it.

use accord_proto::pb::record::v1::{self as rpb, record::Operation as Op};
use accord_proto::pb::work::v1 as pb;
use anyhow::{Result, anyhow};
use clap::{Args, Subcommand};
use std::time::Duration;

use crate::flags::{
    self, FlagError, Reason, choice, err, id, now_ms, opt_choice, opt_num, opt_party,
    opt_record_id, opt_time, pair, parties, party, record_id, record_ids, required,
};
use crate::output::Output;

/// What every operation takes: where, who, and the record's common fields.
#[derive(Debug, Args)]
pub struct Common {
    #[command(flatten)]
    conn: crate::creds::ReadArgs,
    /// The commitment the record acts on (for `request`, the new commitment's id).
    #[arg(value_name = "COMMITMENT")]
    commitment_id: String,
    /// A record id (64 hex) this record rests on (`basis`; repeat for more).
    #[arg(long, value_name = "RECORD_ID")]
    basis: Vec<String>,
    /// A line item the operation acts on (`items`; repeat; none = the whole commitment).
    #[arg(long = "item", value_name = "ITEM")]
    items: Vec<String>,
    /// Free text that makes two otherwise identical declarations distinct records.
    #[arg(long)]
    nonce: Option<String>,
    /// When the node is not the commitment's home (the answer is `awaiting_sequence`), wait up
    /// to SECS (default 60) for the home's decision and print that.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "60")]
    wait: Option<String>,
}

/// The terms of a request, counter or amend (`Terms`).
#[derive(Debug, Args)]
pub struct TermsArgs {
    /// Short human title (`terms.title`).
    #[arg(long)]
    title: Option<String>,
    /// What is to be done (`terms.description`).
    #[arg(long)]
    description: Option<String>,
    /// Due date (`terms.due_unix_ms`): Unix ms, RFC 3339 UTC, or +N{s,m,h,d}.
    #[arg(long, value_name = "TIME")]
    due: Option<String>,
    /// A line item `ID` or `ID=DESCRIPTION` (`terms.items`; repeat).
    #[arg(long = "line-item", value_name = "ID[=DESCRIPTION]")]
    line_items: Vec<String>,
    /// Budget amount (`terms.budget.amount`).
    #[arg(long, value_name = "AMOUNT")]
    budget_amount: Option<String>,
    /// Budget unit, e.g. EUR-cents or hours (`terms.budget.unit`).
    #[arg(long, value_name = "UNIT", requires = "budget_amount")]
    budget_unit: Option<String>,
    /// A parameter `KEY=VALUE` bound to the terms (`terms.parameters`; repeat).
    #[arg(long = "parameter", value_name = "KEY=VALUE")]
    parameters: Vec<String>,
}

impl TermsArgs {
    fn given(&self) -> bool {
        self.title.is_some()
            || self.description.is_some()
            || self.due.is_some()
            || !self.line_items.is_empty()
            || self.budget_amount.is_some()
            || !self.parameters.is_empty()
    }

    fn terms(&self, now: i64) -> Result<rpb::Terms, FlagError> {
        let mut items = Vec::new();
        for li in &self.line_items {
            let (i, d) = li.split_once('=').unwrap_or((li, ""));
            items.push(rpb::LineItem {
                id: id("--line-item", i)?,
                description: d.into(),
            });
        }
        let mut parameters = std::collections::HashMap::new();
        for p in &self.parameters {
            let (k, v) = pair("--parameter", p)?;
            parameters.insert(k.to_string(), v.to_string());
        }
        Ok(rpb::Terms {
            title: self.title.clone().unwrap_or_default(),
            description: self.description.clone().unwrap_or_default(),
            due_unix_ms: opt_time("--due", &self.due, now)?,
            items,
            budget: match &self.budget_amount {
                Some(a) => Some(rpb::Budget {
                    amount: flags::num("--budget-amount", a)?,
                    unit: self.budget_unit.clone().unwrap_or_default(),
                }),
                None => None,
            },
            parameters,
        })
    }
}

/// A queue (`Queue`): a request's pool, or where `forward` moves the commitment.
#[derive(Debug, Args)]
pub struct QueueArgs {
    /// The queue's name (`queue.name`).
    #[arg(long, value_name = "NAME")]
    queue: Option<String>,
    /// The queue owner, org/name (`queue.owner`).
    #[arg(long, value_name = "PARTY")]
    queue_owner: Option<String>,
    /// A party that may claim, org/name (`queue.candidates`; repeat).
    #[arg(long = "queue-candidate", value_name = "PARTY")]
    queue_candidates: Vec<String>,
    /// Ownership lease after a claim, in ms (`queue.lease_ms`).
    #[arg(long, value_name = "MS")]
    queue_lease_ms: Option<String>,
    /// When a lease ends, return the commitment to the pool (`queue.return_to_pool_on_lease_end`).
    #[arg(long)]
    queue_return_to_pool_on_lease_end: bool,
    /// If nobody holds it by then, assignment fails (`queue.start_deadline_unix_ms`): a time.
    #[arg(long, value_name = "TIME")]
    queue_start_deadline: Option<String>,
    /// The queue's distribution policy (`queue.distribution`): the Work service party offers
    /// the commitment to the candidate it picks.
    #[arg(long, value_name = "POLICY", value_parser = ["first_candidate", "round_robin"])]
    queue_distribution: Option<String>,
}

impl QueueArgs {
    fn queue(&self, now: i64) -> Result<Option<rpb::Queue>, FlagError> {
        let Some(name) = &self.queue else {
            if self.queue_owner.is_some() || !self.queue_candidates.is_empty() {
                return Err(err(
                    "--queue",
                    Reason::MissingFlag,
                    "--queue-owner and --queue-candidate need the queue's --queue NAME",
                ));
            }
            return Ok(None);
        };
        Ok(Some(rpb::Queue {
            name: id("--queue", name)?,
            owner: opt_party("--queue-owner", &self.queue_owner)?,
            candidates: parties("--queue-candidate", &self.queue_candidates)?,
            lease_ms: opt_num("--queue-lease-ms", &self.queue_lease_ms)?,
            return_to_pool_on_lease_end: self.queue_return_to_pool_on_lease_end,
            start_deadline_unix_ms: opt_time(
                "--queue-start-deadline",
                &self.queue_start_deadline,
                now,
            )?,
            distribution: match self.queue_distribution.as_deref() {
                Some("first_candidate") => rpb::Distribution::FirstCandidate as i32,
                Some("round_robin") => rpb::Distribution::RoundRobin as i32,
                _ => rpb::Distribution::Unspecified as i32,
            },
        }))
    }
}

const GATE_KINDS: &[(&str, i32)] = &[
    ("approval", rpb::GateKind::Approval as i32),
    (
        "delivery_acceptance",
        rpb::GateKind::DeliveryAcceptance as i32,
    ),
    ("external_check", rpb::GateKind::ExternalCheck as i32),
];
const AGGREGATIONS: &[(&str, i32)] = &[
    ("all", rpb::AggregationRule::All as i32),
    ("any", rpb::AggregationRule::Any as i32),
    ("k_of_n", rpb::AggregationRule::KOfN as i32),
    ("sequential", rpb::AggregationRule::Sequential as i32),
    ("percentage", rpb::AggregationRule::Percentage as i32),
];

/// A Condition or gate (`Condition`).
#[derive(Debug, Args)]
pub struct ConditionArgs {
    /// What must hold (`condition.description`).
    #[arg(long)]
    description: Option<String>,
    /// The party it is addressed to, org/name (`condition.addressed_to`).
    #[arg(long, value_name = "PARTY")]
    addressed_to: Option<String>,
    /// A gate's kind: approval, delivery_acceptance, external_check (`condition.kind`; none = a
    /// plain Condition).
    #[arg(long)]
    kind: Option<String>,
    /// The gate's deadline (`condition.deadline_unix_ms`): a time.
    #[arg(long, value_name = "TIME")]
    condition_deadline: Option<String>,
    /// A participant, org/name (`condition.participants`; repeat; none = --addressed-to alone).
    #[arg(long = "participant", value_name = "PARTY")]
    participants: Vec<String>,
    /// How answers aggregate: all, any, k_of_n, sequential, percentage
    /// (`condition.aggregation.rule`).
    #[arg(long)]
    aggregation: Option<String>,
    /// K, for k_of_n (`condition.aggregation.k`).
    #[arg(long)]
    k: Option<String>,
    /// p in percent, for percentage (`condition.aggregation.percent`).
    #[arg(long)]
    percent: Option<String>,
    /// Any rejection rejects, added to the rule (`condition.aggregation.any_rejection_rejects`).
    #[arg(long)]
    any_rejection_rejects: bool,
}

impl ConditionArgs {
    fn condition(&self, now: i64) -> Result<rpb::Condition, FlagError> {
        let aggregation = if self.aggregation.is_some()
            || self.k.is_some()
            || self.percent.is_some()
            || self.any_rejection_rejects
        {
            Some(rpb::Aggregation {
                rule: opt_choice("--aggregation", &self.aggregation, AGGREGATIONS)?,
                k: opt_num("--k", &self.k)?,
                percent: opt_num("--percent", &self.percent)?,
                any_rejection_rejects: self.any_rejection_rejects,
            })
        } else {
            None
        };
        Ok(rpb::Condition {
            description: required("--description", &self.description)?.to_string(),
            addressed_to: Some(party(
                "--addressed-to",
                required("--addressed-to", &self.addressed_to)?,
            )?),
            kind: opt_choice("--kind", &self.kind, GATE_KINDS)?,
            deadline_unix_ms: opt_time("--condition-deadline", &self.condition_deadline, now)?,
            participants: parties("--participant", &self.participants)?,
            aggregation,
        })
    }
}

/// `request`: the obligee (or someone on its behalf) asks for a commitment.
#[derive(Debug, Args)]
pub struct RequestArgs {
    #[command(flatten)]
    c: Common,
    /// The obligee, org/name (default: the author).
    #[arg(long, value_name = "PARTY")]
    obligee: Option<String>,
    /// The candidate obligor the request is addressed to, org/name.
    #[arg(long, value_name = "PARTY")]
    candidate: Option<String>,
    /// The acceptor, org/name (default: the obligee).
    #[arg(long, value_name = "PARTY")]
    acceptor: Option<String>,
    /// The accountable party, org/name (default: the obligee).
    #[arg(long, value_name = "PARTY")]
    accountable: Option<String>,
    /// A principal who may declare the commitment obsolete, org/name.
    #[arg(long, value_name = "PARTY")]
    principal: Option<String>,
    #[command(flatten)]
    terms: TermsArgs,
    #[command(flatten)]
    queue: QueueArgs,
    /// Validity statement: unanswered by then, the request expires (`valid_until_unix_ms`).
    #[arg(long, value_name = "TIME")]
    valid_until: Option<String>,
    /// Acceptance must cite evidence (`acceptance.requires_evidence`).
    #[arg(long)]
    requires_evidence: bool,
    /// Four-eyes: the acceptor must differ from who stated fulfilment (`acceptance.four_eyes`).
    #[arg(long)]
    four_eyes: bool,
    /// Step-up authentication is required to accept (`acceptance.step_up`).
    #[arg(long)]
    step_up: bool,
    /// Implicit acceptance window after `state`, in ms (`implicit_acceptance.window_ms`).
    #[arg(long, value_name = "MS")]
    implicit_acceptance_window_ms: Option<String>,
}

/// An operation that carries a required free-text `reason`.
#[derive(Debug, Args)]
pub struct ReasonArgs {
    #[command(flatten)]
    c: Common,
    /// Why (`reason`; required).
    #[arg(long)]
    reason: Option<String>,
}

/// An operation whose `reason` is optional.
#[derive(Debug, Args)]
pub struct OptReasonArgs {
    #[command(flatten)]
    c: Common,
    /// Why (`reason`; optional).
    #[arg(long)]
    reason: Option<String>,
}

/// `decline` / `cancel`: a reason code of a closed list and optional text.
#[derive(Debug, Args)]
pub struct CodeArgs {
    #[command(flatten)]
    c: Common,
    /// The reason code (required): for decline no_capacity, no_authority, out_of_scope,
    /// missing_information, unacceptable_terms, other; for cancel cannot_complete, failed,
    /// abandoned, other.
    #[arg(long)]
    reason: Option<String>,
    /// Free text (`text`).
    #[arg(long)]
    text: Option<String>,
}

/// `promise_conditional`: a promise under a precondition with its deadline.
#[derive(Debug, Args)]
pub struct PromiseConditionalArgs {
    #[command(flatten)]
    c: Common,
    #[command(flatten)]
    condition: ConditionArgs,
    /// The precondition's deadline (`deadline_unix_ms`; required): a time.
    #[arg(long, value_name = "TIME")]
    deadline: Option<String>,
}

/// `counter`: a whole new version of the terms.
#[derive(Debug, Args)]
pub struct CounterArgs {
    #[command(flatten)]
    c: Common,
    #[command(flatten)]
    terms: TermsArgs,
}

/// `accept_counter`: the obligee accepts the current counter version.
#[derive(Debug, Args)]
pub struct AcceptCounterArgs {
    #[command(flatten)]
    c: Common,
    /// The counter record's id (`counter_digest`; required; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    counter_digest: Option<String>,
}

/// `state`: the obligor states fulfilment.
#[derive(Debug, Args)]
pub struct StateArgs {
    #[command(flatten)]
    c: Common,
    /// A fulfilment reference (`fulfillment_refs`; at least one; repeat).
    #[arg(long = "fulfillment-ref", value_name = "REF")]
    fulfillment_refs: Vec<String>,
}

/// `accept`: the acceptor accepts the statement.
#[derive(Debug, Args)]
pub struct AcceptArgs {
    #[command(flatten)]
    c: Common,
    /// Evidence reference (`evidence_ref`; required when the criterion requires evidence).
    #[arg(long, value_name = "REF")]
    evidence_ref: Option<String>,
    /// The author passed step-up authentication (`step_up`).
    #[arg(long)]
    step_up: bool,
}

/// `delegate` / `assign`: the offer (`--to`) or the new party's acceptance (`--offer-id`).
#[derive(Debug, Args)]
pub struct HandoverArgs {
    #[command(flatten)]
    c: Common,
    /// The offer: the proposed new party, org/name (`offer.to`).
    #[arg(long, value_name = "PARTY", conflicts_with = "offer_id")]
    to: Option<String>,
    /// The offer's handover note (`offer.handover_note`; required for a delegate offer).
    #[arg(long, value_name = "NOTE")]
    handover_note: Option<String>,
    /// The acceptance: the offer record accepted (`acceptance.offer_id`; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    offer_id: Option<String>,
}

/// `dispute`: the obligor disputes a reject or an open revoke_acceptance.
#[derive(Debug, Args)]
pub struct DisputeArgs {
    #[command(flatten)]
    c: Common,
    /// The disputed record (`disputed_record`; required; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    disputed_record: Option<String>,
    /// Why (`reason`; required).
    #[arg(long)]
    reason: Option<String>,
}

/// `defer`: no state change; category deferred until resumed.
#[derive(Debug, Args)]
pub struct DeferArgs {
    #[command(flatten)]
    c: Common,
    /// Why (`reason`; required).
    #[arg(long)]
    reason: Option<String>,
    /// Return date: the Work service party resumes then (`return_unix_ms`): a time.
    #[arg(long = "return", value_name = "TIME")]
    return_at: Option<String>,
    /// Return event: a `resume --event` naming it closes the deferral (`return_event`).
    #[arg(long, value_name = "EVENT")]
    return_event: Option<String>,
}

/// `resume`: closes the open defer named in `--basis`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    c: Common,
    /// The return event that occurred (`event`).
    #[arg(long)]
    event: Option<String>,
}

/// `allow`: the other side allows the open revoke request named in `--basis`.
#[derive(Debug, Args)]
pub struct AllowArgs {
    #[command(flatten)]
    c: Common,
    /// Why (`reason`; optional).
    #[arg(long)]
    reason: Option<String>,
    /// For an allowed revoke_acceptance: the linked reopening commitment's id.
    #[arg(long, value_name = "COMMITMENT")]
    reopening_commitment_id: Option<String>,
}

/// `amend`: a new version of the terms that supersedes the current one.
#[derive(Debug, Args)]
pub struct AmendArgs {
    #[command(flatten)]
    c: Common,
    /// The version superseded: its record id (`supersedes`; required; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    supersedes: Option<String>,
    #[command(flatten)]
    terms: TermsArgs,
    /// An open gate's new participant set, `GATE_RECORD_ID=org/a,org/b` (`participants`; repeat).
    #[arg(long = "participants", value_name = "GATE=PARTY,...")]
    participants: Vec<String>,
}

/// `notice`: attention and notification, no state change.
#[derive(Debug, Args)]
pub struct NoticeArgs {
    #[command(flatten)]
    c: Common,
    /// at_risk, cannot_complete or obsolete_suggested (`notice_type`; required).
    #[arg(long)]
    notice_type: Option<String>,
    /// Free text (`text`).
    #[arg(long)]
    text: Option<String>,
}

/// `declare_obsolete`: the parent aim or commitment went away.
#[derive(Debug, Args)]
pub struct DeclareObsoleteArgs {
    #[command(flatten)]
    c: Common,
    /// The parent that went away (`parent_ref`; required).
    #[arg(long, value_name = "REF")]
    parent_ref: Option<String>,
}

/// `forward`: moves the commitment to another queue.
#[derive(Debug, Args)]
pub struct ForwardArgs {
    #[command(flatten)]
    c: Common,
    #[command(flatten)]
    to: QueueArgs,
}

/// An operation naming one party with `--to` (`offer`, `reassign`).
#[derive(Debug, Args)]
pub struct ToArgs {
    #[command(flatten)]
    c: Common,
    /// The party, org/name (`to`; required).
    #[arg(long, value_name = "PARTY")]
    to: Option<String>,
}

/// `nominate`: proposes a candidate.
#[derive(Debug, Args)]
pub struct NominateArgs {
    #[command(flatten)]
    c: Common,
    /// The nominee, org/name (`candidate`; required).
    #[arg(long, value_name = "PARTY")]
    candidate: Option<String>,
}

/// `renew_lease`: the obligor extends its lease.
#[derive(Debug, Args)]
pub struct RenewLeaseArgs {
    #[command(flatten)]
    c: Common,
    /// The new lease length from now, in ms (`lease_ms`; none = the queue's).
    #[arg(long, value_name = "MS")]
    lease_ms: Option<String>,
}

/// `open_condition`: opens a Condition or gate (category waiting).
#[derive(Debug, Args)]
pub struct OpenConditionArgs {
    #[command(flatten)]
    c: Common,
    #[command(flatten)]
    condition: ConditionArgs,
}

/// `report_consumption`: consumption against the budget.
#[derive(Debug, Args)]
pub struct ReportConsumptionArgs {
    #[command(flatten)]
    c: Common,
    /// Amount consumed, in the budget's unit (`amount`; required).
    #[arg(long)]
    amount: Option<String>,
}

/// `acted_upon`: an executor reports an act based on a record.
#[derive(Debug, Args)]
pub struct ActedUponArgs {
    #[command(flatten)]
    c: Common,
    /// The record acted on (`record_id`; required; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    record_id: Option<String>,
    /// What was done (`act`).
    #[arg(long)]
    act: Option<String>,
}

const GATE_ANSWERS: &[(&str, i32)] = &[
    ("accept", rpb::GateAnswer::Accept as i32),
    ("reject", rpb::GateAnswer::Reject as i32),
    (
        "closed_without_answer",
        rpb::GateAnswer::ClosedWithoutAnswer as i32,
    ),
];

/// `gate_decision`: answers the gate named in `--basis`.
#[derive(Debug, Args)]
pub struct GateDecisionArgs {
    #[command(flatten)]
    c: Common,
    /// accept, reject or closed_without_answer (`answer`; required).
    #[arg(long)]
    answer: Option<String>,
    /// The terms version answered: its record id (`content_digest`; 64 hex; required for a
    /// participant's answer).
    #[arg(long, value_name = "RECORD_ID")]
    content_digest: Option<String>,
    /// Why (`reason`).
    #[arg(long)]
    reason: Option<String>,
}

const EXECUTION: &[(&str, i32)] = &[
    ("not_started", rpb::ExecutionReport::NotStarted as i32),
    ("running", rpb::ExecutionReport::Running as i32),
    ("paused", rpb::ExecutionReport::Paused as i32),
    ("completed", rpb::ExecutionReport::Completed as i32),
    ("failed", rpb::ExecutionReport::Failed as i32),
    ("cancelled", rpb::ExecutionReport::Cancelled as i32),
    ("stopped", rpb::ExecutionReport::Stopped as i32),
];
const CONTROL: &[(&str, i32)] = &[
    ("automatic", rpb::ControlReport::Automatic as i32),
    ("intervened", rpb::ControlReport::Intervened as i32),
    ("manual", rpb::ControlReport::Manual as i32),
];

/// `observation`: an executor's claim about execution, control and liveness.
#[derive(Debug, Args)]
pub struct ObservationArgs {
    #[command(flatten)]
    c: Common,
    /// not_started, running, paused, completed, failed, cancelled, stopped (`execution`).
    #[arg(long)]
    execution: Option<String>,
    /// automatic, intervened, manual (`control`).
    #[arg(long)]
    control: Option<String>,
    /// The heartbeat interval declared, in ms (`heartbeat_interval_ms`).
    #[arg(long, value_name = "MS")]
    heartbeat_interval_ms: Option<String>,
    /// The executor left cleanly (`left_cleanly`).
    #[arg(long)]
    left_cleanly: bool,
    /// A checkpoint reference (`checkpoint`).
    #[arg(long)]
    checkpoint: Option<String>,
    /// An external state the executor cannot map (`external_state`).
    #[arg(long)]
    external_state: Option<String>,
}

/// `stop_request`: asks the executor to stop.
#[derive(Debug, Args)]
pub struct StopRequestArgs {
    #[command(flatten)]
    c: Common,
    /// immediate, finish_then_stop or pause (`mode`; required).
    #[arg(long)]
    mode: Option<String>,
    /// Why (`reason`).
    #[arg(long)]
    reason: Option<String>,
}

/// `stop_response`: the executor answers the stop request named in `--basis`.
#[derive(Debug, Args)]
pub struct StopResponseArgs {
    #[command(flatten)]
    c: Common,
    /// accept, finish_then_stop or refuse (`answer`; required).
    #[arg(long)]
    answer: Option<String>,
    /// Why (`reason`; required for refuse).
    #[arg(long)]
    reason: Option<String>,
}

/// `control_lease`: a person takes control (`--basis` names the stop request).
#[derive(Debug, Args)]
pub struct ControlLeaseArgs {
    #[command(flatten)]
    c: Common,
    /// Who holds control, org/name (`holder`; required).
    #[arg(long, value_name = "PARTY")]
    holder: Option<String>,
    /// End of the lease (`until_unix_ms`): a time.
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
}

/// `hand_back_control`: the holder hands control back (`--basis` names the control_lease).
#[derive(Debug, Args)]
pub struct HandBackControlArgs {
    #[command(flatten)]
    c: Common,
    /// The handoff note (`handoff_note`; required).
    #[arg(long, value_name = "NOTE")]
    handoff_note: Option<String>,
}

/// `recheck`: the re-check of assumptions after control was handed back.
#[derive(Debug, Args)]
pub struct RecheckArgs {
    #[command(flatten)]
    c: Common,
    /// continue or replan (`outcome`; required).
    #[arg(long)]
    outcome: Option<String>,
    /// A note (`note`).
    #[arg(long)]
    note: Option<String>,
}

/// `accordctl work declare <operation>`: one subcommand per operation, by its wire name.
#[derive(Debug, Subcommand)]
#[command(rename_all = "snake_case")]
pub enum DeclareOp {
    /// The obligee (or someone on its behalf) asks for a commitment → requested.
    Request(Box<RequestArgs>),
    /// The candidate obligor promises: requested → promised.
    Promise(Common),
    /// The candidate obligor promises under a precondition with a deadline → conditionally_promised.
    #[command(alias = "promise-conditional")]
    PromiseConditional(PromiseConditionalArgs),
    /// The candidate obligor declines with a reason code: requested → declined.
    Decline(CodeArgs),
    /// Changed terms, by the candidate (from requested) or the obligee (from countered).
    Counter(CounterArgs),
    /// The obligee accepts the current counter version: countered → promised.
    #[command(alias = "accept-counter")]
    AcceptCounter(AcceptCounterArgs),
    /// The obligor states fulfilment: promised → stated.
    State(StateArgs),
    /// The acceptor accepts the statement: stated → accepted.
    Accept(AcceptArgs),
    /// The acceptor rejects the statement, with a reason: stated → promised.
    Reject(ReasonArgs),
    /// The obligor cancels with a reason code → cancelled.
    Cancel(CodeArgs),
    /// The obligee releases the obligor → released.
    Release(OptReasonArgs),
    /// Obligor's offer (--to, --handover-note) or the new obligor's acceptance (--offer-id).
    Delegate(HandoverArgs),
    /// Obligee's offer (--to) or the new obligee's acceptance (--offer-id).
    Assign(HandoverArgs),
    /// The obligor disputes a reject or an open revoke_acceptance: a dispute mark.
    Dispute(DisputeArgs),
    /// The obligee or obligor defers: category deferred.
    Defer(DeferArgs),
    /// Closes the open defer named in --basis.
    Resume(ResumeArgs),
    /// The obligee asks to withdraw the request (answered by allow / refuse).
    #[command(alias = "revoke-request")]
    RevokeRequest(ReasonArgs),
    /// The obligor asks to withdraw its promise.
    #[command(alias = "revoke-promise")]
    RevokePromise(ReasonArgs),
    /// The obligor asks to withdraw its statement.
    #[command(alias = "revoke-statement")]
    RevokeStatement(ReasonArgs),
    /// The acceptor asks to withdraw its acceptance.
    #[command(alias = "revoke-acceptance")]
    RevokeAcceptance(ReasonArgs),
    /// The other side allows the open revoke request named in --basis.
    Allow(AllowArgs),
    /// The other side refuses the open revoke request named in --basis, with a reason.
    Refuse(ReasonArgs),
    /// A new version of the terms superseding the current one.
    Amend(AmendArgs),
    /// The obligor raises attention: at_risk, cannot_complete, obsolete_suggested.
    Notice(NoticeArgs),
    /// The obligee or principal: the parent went away → obsolete.
    #[command(alias = "declare-obsolete")]
    DeclareObsolete(DeclareObsoleteArgs),
    /// The Work service party's expiry (--basis: the validity statement); others are refused.
    Expire(Common),
    /// A party with that authority closes it, with a reason → closed_administratively.
    #[command(alias = "administrative-close")]
    AdministrativeClose(ReasonArgs),
    /// A candidate claims a pooled commitment: held, and promised.
    Claim(Common),
    /// The claiming obligor returns it to the pool.
    Unclaim(OptReasonArgs),
    /// Moves the commitment to another queue (--queue ...).
    Forward(ForwardArgs),
    /// Proposes a candidate.
    Nominate(NominateArgs),
    /// Offers the commitment to a party: offered.
    Offer(ToArgs),
    /// An offer opens to a new party.
    Reassign(ToArgs),
    /// The obligor extends its lease.
    #[command(alias = "renew-lease")]
    RenewLease(RenewLeaseArgs),
    /// Opens a Condition or gate: category waiting.
    #[command(alias = "open-condition")]
    OpenCondition(OpenConditionArgs),
    /// The Condition owner withdraws the condition named in --basis.
    #[command(alias = "withdraw-condition")]
    WithdrawCondition(Common),
    /// The addressed party satisfies the condition named in --basis.
    #[command(alias = "satisfy-condition")]
    SatisfyCondition(Common),
    /// A participant answers the gate named in --basis.
    #[command(alias = "gate-decision")]
    GateDecision(GateDecisionArgs),
    /// Consumption reported against the commitment's budget.
    #[command(alias = "report-consumption")]
    ReportConsumption(ReportConsumptionArgs),
    /// An executor reports an act based on a record (durability "acted upon").
    #[command(alias = "acted-upon")]
    ActedUpon(ActedUponArgs),
    /// An executor's claim: execution, control, heartbeat.
    Observation(ObservationArgs),
    /// Asks the executor to stop (immediate, finish_then_stop, pause).
    #[command(alias = "stop-request")]
    StopRequest(StopRequestArgs),
    /// The executor answers the stop request named in --basis.
    #[command(alias = "stop-response")]
    StopResponse(StopResponseArgs),
    /// Continues after the stop request named in --basis.
    #[command(alias = "resume-after-stop")]
    ResumeAfterStop(OptReasonArgs),
    /// A person takes control (--basis: the stop request).
    #[command(alias = "control-lease")]
    ControlLease(ControlLeaseArgs),
    /// The holder hands control back (--basis: the control_lease).
    #[command(alias = "hand-back-control")]
    HandBackControl(HandBackControlArgs),
    /// The re-check after control was handed back: continue or replan.
    Recheck(RecheckArgs),
}

const DECLINE_REASONS: &[(&str, i32)] = &[
    ("no_capacity", rpb::DeclineReason::NoCapacity as i32),
    ("no_authority", rpb::DeclineReason::NoAuthority as i32),
    ("out_of_scope", rpb::DeclineReason::OutOfScope as i32),
    (
        "missing_information",
        rpb::DeclineReason::MissingInformation as i32,
    ),
    (
        "unacceptable_terms",
        rpb::DeclineReason::UnacceptableTerms as i32,
    ),
    ("other", rpb::DeclineReason::Other as i32),
];
const CANCEL_REASONS: &[(&str, i32)] = &[
    ("cannot_complete", rpb::CancelReason::CannotComplete as i32),
    ("failed", rpb::CancelReason::Failed as i32),
    ("abandoned", rpb::CancelReason::Abandoned as i32),
    ("other", rpb::CancelReason::Other as i32),
];
const NOTICE_TYPES: &[(&str, i32)] = &[
    ("at_risk", rpb::NoticeType::AtRisk as i32),
    ("cannot_complete", rpb::NoticeType::CannotComplete as i32),
    (
        "obsolete_suggested",
        rpb::NoticeType::ObsoleteSuggested as i32,
    ),
];
const STOP_MODES: &[(&str, i32)] = &[
    ("immediate", rpb::StopMode::Immediate as i32),
    ("finish_then_stop", rpb::StopMode::FinishThenStop as i32),
    ("pause", rpb::StopMode::Pause as i32),
];
const STOP_ANSWERS: &[(&str, i32)] = &[
    ("accept", rpb::StopAnswer::Accept as i32),
    ("finish_then_stop", rpb::StopAnswer::FinishThenStop as i32),
    ("refuse", rpb::StopAnswer::Refuse as i32),
];
const RECHECK: &[(&str, i32)] = &[
    ("continue", rpb::RecheckOutcome::Continue as i32),
    ("replan", rpb::RecheckOutcome::Replan as i32),
];

fn text(v: &Option<String>) -> String {
    v.clone().unwrap_or_default()
}

fn req_text(flag: &'static str, v: &Option<String>) -> Result<String, FlagError> {
    required(flag, v).map(str::to_string)
}

/// The record's basis must name the record the operation answers.
fn needs_basis(c: &Common, what: &str) -> Result<(), FlagError> {
    if c.basis.is_empty() {
        return Err(err(
            "--basis",
            Reason::MissingFlag,
            format!("required: the record id of {what}"),
        ));
    }
    Ok(())
}

/// A delegate/assign half: the offer (`--to`) or the acceptance (`--offer-id`).
enum Half {
    Offer(rpb::PartyRef, String),
    Acceptance(Vec<u8>),
}

fn half(a: &HandoverArgs, delegate: bool) -> Result<Half, FlagError> {
    match (&a.to, &a.offer_id) {
        (Some(to), None) => {
            let note = if delegate {
                req_text("--handover-note", &a.handover_note)?
            } else {
                text(&a.handover_note)
            };
            Ok(Half::Offer(party("--to", to)?, note))
        }
        (None, Some(o)) => Ok(Half::Acceptance(record_id("--offer-id", o)?)),
        _ => Err(err(
            "--to",
            Reason::ConflictingFlags,
            "give --to PARTY (the offer) or --offer-id RECORD_ID (its acceptance), one of them",
        )),
    }
}

impl DeclareOp {
    /// The wire name, the common arguments, and the operation built from the flags.
    fn build(&self, now: i64) -> Result<(&'static str, &Common, Op), FlagError> {
        use DeclareOp as D;
        Ok(match self {
            D::Request(a) => (
                "request",
                &a.c,
                Op::Request(rpb::Request {
                    obligee: opt_party("--obligee", &a.obligee)?,
                    candidate: opt_party("--candidate", &a.candidate)?,
                    queue: a.queue.queue(now)?,
                    acceptor: opt_party("--acceptor", &a.acceptor)?,
                    accountable: opt_party("--accountable", &a.accountable)?,
                    principal: opt_party("--principal", &a.principal)?,
                    terms: Some(a.terms.terms(now)?),
                    valid_until_unix_ms: opt_time("--valid-until", &a.valid_until, now)?,
                    acceptance: (a.requires_evidence || a.four_eyes || a.step_up).then_some(
                        rpb::AcceptanceCriterion {
                            requires_evidence: a.requires_evidence,
                            four_eyes: a.four_eyes,
                            step_up: a.step_up,
                        },
                    ),
                    implicit_acceptance: match &a.implicit_acceptance_window_ms {
                        Some(w) => Some(rpb::ImplicitAcceptanceTerms {
                            window_ms: flags::num("--implicit-acceptance-window-ms", w)?,
                        }),
                        None => None,
                    },
                }),
            ),
            D::Promise(c) => ("promise", c, Op::Promise(rpb::Promise {})),
            D::PromiseConditional(a) => (
                "promise_conditional",
                &a.c,
                Op::PromiseConditional(rpb::PromiseConditional {
                    condition: Some(a.condition.condition(now)?),
                    deadline_unix_ms: flags::time(
                        "--deadline",
                        required("--deadline", &a.deadline)?,
                        now,
                    )?,
                }),
            ),
            D::Decline(a) => (
                "decline",
                &a.c,
                Op::Decline(rpb::Decline {
                    reason: choice(
                        "--reason",
                        required("--reason", &a.reason)?,
                        DECLINE_REASONS,
                    )?,
                    text: text(&a.text),
                }),
            ),
            D::Counter(a) => {
                if !a.terms.given() {
                    return Err(err(
                        "--title",
                        Reason::MissingFlag,
                        "counter needs the whole new terms: --title, --description, --due, --line-item, --budget-amount, --parameter",
                    ));
                }
                (
                    "counter",
                    &a.c,
                    Op::Counter(rpb::Counter {
                        terms: Some(a.terms.terms(now)?),
                    }),
                )
            }
            D::AcceptCounter(a) => (
                "accept_counter",
                &a.c,
                Op::AcceptCounter(rpb::AcceptCounter {
                    counter_digest: record_id(
                        "--counter-digest",
                        required("--counter-digest", &a.counter_digest)?,
                    )?
                    .into(),
                }),
            ),
            D::State(a) => {
                if a.fulfillment_refs.is_empty() {
                    return Err(err(
                        "--fulfillment-ref",
                        Reason::MissingFlag,
                        "state needs at least one fulfilment reference",
                    ));
                }
                (
                    "state",
                    &a.c,
                    Op::State(rpb::State {
                        fulfillment_refs: a.fulfillment_refs.clone(),
                    }),
                )
            }
            D::Accept(a) => (
                "accept",
                &a.c,
                Op::Accept(rpb::Accept {
                    evidence_ref: text(&a.evidence_ref),
                    implicit: false,
                    step_up: a.step_up,
                }),
            ),
            D::Reject(a) => (
                "reject",
                &a.c,
                Op::Reject(rpb::Reject {
                    reason: req_text("--reason", &a.reason)?,
                }),
            ),
            D::Cancel(a) => (
                "cancel",
                &a.c,
                Op::Cancel(rpb::Cancel {
                    reason: choice("--reason", required("--reason", &a.reason)?, CANCEL_REASONS)?,
                    text: text(&a.text),
                }),
            ),
            D::Release(a) => (
                "release",
                &a.c,
                Op::Release(rpb::Release {
                    reason: text(&a.reason),
                }),
            ),
            D::Delegate(a) => (
                "delegate",
                &a.c,
                Op::Delegate(rpb::Delegate {
                    step: Some(match half(a, true)? {
                        Half::Offer(to, note) => rpb::delegate::Step::Offer(rpb::DelegateOffer {
                            to: Some(to),
                            handover_note: note,
                        }),
                        Half::Acceptance(id) => {
                            rpb::delegate::Step::Acceptance(rpb::HandoverAcceptance {
                                offer_id: id.into(),
                            })
                        }
                    }),
                }),
            ),
            D::Assign(a) => (
                "assign",
                &a.c,
                Op::Assign(rpb::Assign {
                    step: Some(match half(a, false)? {
                        Half::Offer(to, _) => {
                            rpb::assign::Step::Offer(rpb::AssignOffer { to: Some(to) })
                        }
                        Half::Acceptance(id) => {
                            rpb::assign::Step::Acceptance(rpb::HandoverAcceptance {
                                offer_id: id.into(),
                            })
                        }
                    }),
                }),
            ),
            D::Dispute(a) => (
                "dispute",
                &a.c,
                Op::Dispute(rpb::Dispute {
                    disputed_record: record_id(
                        "--disputed-record",
                        required("--disputed-record", &a.disputed_record)?,
                    )?
                    .into(),
                    reason: req_text("--reason", &a.reason)?,
                }),
            ),
            D::Defer(a) => (
                "defer",
                &a.c,
                Op::Defer(rpb::Defer {
                    reason: req_text("--reason", &a.reason)?,
                    return_unix_ms: opt_time("--return", &a.return_at, now)?,
                    return_event: text(&a.return_event),
                }),
            ),
            D::Resume(a) => {
                needs_basis(&a.c, "the defer it closes")?;
                (
                    "resume",
                    &a.c,
                    Op::Resume(rpb::Resume {
                        event: text(&a.event),
                    }),
                )
            }
            D::RevokeRequest(a) => revoke("revoke_request", a, Op::RevokeRequest)?,
            D::RevokePromise(a) => revoke("revoke_promise", a, Op::RevokePromise)?,
            D::RevokeStatement(a) => revoke("revoke_statement", a, Op::RevokeStatement)?,
            D::RevokeAcceptance(a) => revoke("revoke_acceptance", a, Op::RevokeAcceptance)?,
            D::Allow(a) => {
                needs_basis(&a.c, "the open revoke request")?;
                (
                    "allow",
                    &a.c,
                    Op::Allow(rpb::Allow {
                        reason: text(&a.reason),
                        reopening_commitment_id: a
                            .reopening_commitment_id
                            .as_deref()
                            .map(|s| id("--reopening-commitment-id", s))
                            .transpose()?
                            .unwrap_or_default(),
                    }),
                )
            }
            D::Refuse(a) => {
                needs_basis(&a.c, "the open revoke request")?;
                (
                    "refuse",
                    &a.c,
                    Op::Refuse(rpb::Refuse {
                        reason: req_text("--reason", &a.reason)?,
                    }),
                )
            }
            D::Amend(a) => {
                let supersedes =
                    record_id("--supersedes", required("--supersedes", &a.supersedes)?)?;
                let mut gates = Vec::new();
                for g in &a.participants {
                    let (gate, ps) = pair("--participants", g)?;
                    let ps: Vec<String> = ps
                        .split(',')
                        .filter(|p| !p.is_empty())
                        .map(str::to_string)
                        .collect();
                    gates.push(rpb::GateParticipants {
                        gate: record_id("--participants", gate)?.into(),
                        participants: parties("--participants", &ps)?,
                    });
                }
                (
                    "amend",
                    &a.c,
                    Op::Amend(rpb::Amend {
                        supersedes: supersedes.into(),
                        terms: if a.terms.given() {
                            Some(a.terms.terms(now)?)
                        } else {
                            None
                        },
                        participants: gates,
                    }),
                )
            }
            D::Notice(a) => (
                "notice",
                &a.c,
                Op::Notice(rpb::Notice {
                    notice_type: choice(
                        "--notice-type",
                        required("--notice-type", &a.notice_type)?,
                        NOTICE_TYPES,
                    )?,
                    text: text(&a.text),
                }),
            ),
            D::DeclareObsolete(a) => (
                "declare_obsolete",
                &a.c,
                Op::DeclareObsolete(rpb::DeclareObsolete {
                    parent_ref: req_text("--parent-ref", &a.parent_ref)?,
                }),
            ),
            D::Expire(c) => {
                needs_basis(c, "the validity statement")?;
                ("expire", c, Op::Expire(rpb::Expire {}))
            }
            D::AdministrativeClose(a) => (
                "administrative_close",
                &a.c,
                Op::AdministrativeClose(rpb::AdministrativeClose {
                    reason: req_text("--reason", &a.reason)?,
                }),
            ),
            D::Claim(c) => ("claim", c, Op::Claim(rpb::Claim {})),
            D::Unclaim(a) => (
                "unclaim",
                &a.c,
                Op::Unclaim(rpb::Unclaim {
                    reason: text(&a.reason),
                }),
            ),
            D::Forward(a) => (
                "forward",
                &a.c,
                Op::Forward(rpb::Forward {
                    to: Some(a.to.queue(now)?.ok_or_else(|| {
                        err("--queue", Reason::MissingFlag, "the queue to forward to")
                    })?),
                }),
            ),
            D::Nominate(a) => (
                "nominate",
                &a.c,
                Op::Nominate(rpb::Nominate {
                    candidate: Some(party(
                        "--candidate",
                        required("--candidate", &a.candidate)?,
                    )?),
                }),
            ),
            D::Offer(a) => (
                "offer",
                &a.c,
                Op::Offer(rpb::Offer {
                    to: Some(party("--to", required("--to", &a.to)?)?),
                }),
            ),
            D::Reassign(a) => (
                "reassign",
                &a.c,
                Op::Reassign(rpb::Reassign {
                    to: Some(party("--to", required("--to", &a.to)?)?),
                }),
            ),
            D::RenewLease(a) => (
                "renew_lease",
                &a.c,
                Op::RenewLease(rpb::RenewLease {
                    lease_ms: opt_num("--lease-ms", &a.lease_ms)?,
                }),
            ),
            D::OpenCondition(a) => (
                "open_condition",
                &a.c,
                Op::OpenCondition(rpb::OpenCondition {
                    condition: Some(a.condition.condition(now)?),
                }),
            ),
            D::WithdrawCondition(c) => {
                needs_basis(c, "the open condition")?;
                (
                    "withdraw_condition",
                    c,
                    Op::WithdrawCondition(rpb::WithdrawCondition {}),
                )
            }
            D::SatisfyCondition(c) => {
                needs_basis(c, "the open condition")?;
                (
                    "satisfy_condition",
                    c,
                    Op::SatisfyCondition(rpb::SatisfyCondition {}),
                )
            }
            D::GateDecision(a) => {
                needs_basis(&a.c, "the gate answered")?;
                (
                    "gate_decision",
                    &a.c,
                    Op::GateDecision(rpb::GateDecision {
                        answer: choice("--answer", required("--answer", &a.answer)?, GATE_ANSWERS)?,
                        content_digest: opt_record_id("--content-digest", &a.content_digest)?
                            .into(),
                        participant: None,
                        reason: text(&a.reason),
                    }),
                )
            }
            D::ReportConsumption(a) => (
                "report_consumption",
                &a.c,
                Op::ReportConsumption(rpb::ReportConsumption {
                    amount: flags::num("--amount", required("--amount", &a.amount)?)?,
                }),
            ),
            D::ActedUpon(a) => (
                "acted_upon",
                &a.c,
                Op::ActedUpon(rpb::ActedUpon {
                    record_id: record_id("--record-id", required("--record-id", &a.record_id)?)?
                        .into(),
                    act: text(&a.act),
                }),
            ),
            D::Observation(a) => (
                "observation",
                &a.c,
                Op::Observation(rpb::Observation {
                    execution: opt_choice("--execution", &a.execution, EXECUTION)?,
                    control: opt_choice("--control", &a.control, CONTROL)?,
                    heartbeat_interval_ms: opt_num(
                        "--heartbeat-interval-ms",
                        &a.heartbeat_interval_ms,
                    )?,
                    left_cleanly: a.left_cleanly,
                    checkpoint: text(&a.checkpoint),
                    external_state: text(&a.external_state),
                }),
            ),
            D::StopRequest(a) => (
                "stop_request",
                &a.c,
                Op::StopRequest(rpb::StopRequest {
                    mode: choice("--mode", required("--mode", &a.mode)?, STOP_MODES)?,
                    reason: text(&a.reason),
                }),
            ),
            D::StopResponse(a) => {
                needs_basis(&a.c, "the stop request")?;
                let answer = choice("--answer", required("--answer", &a.answer)?, STOP_ANSWERS)?;
                if answer == rpb::StopAnswer::Refuse as i32 && a.reason.is_none() {
                    return Err(err(
                        "--reason",
                        Reason::MissingFlag,
                        "required with --answer refuse",
                    ));
                }
                (
                    "stop_response",
                    &a.c,
                    Op::StopResponse(rpb::StopResponse {
                        answer,
                        reason: text(&a.reason),
                    }),
                )
            }
            D::ResumeAfterStop(a) => {
                needs_basis(&a.c, "the stop request")?;
                (
                    "resume_after_stop",
                    &a.c,
                    Op::ResumeAfterStop(rpb::ResumeAfterStop {
                        reason: text(&a.reason),
                    }),
                )
            }
            D::ControlLease(a) => {
                needs_basis(&a.c, "the stop request")?;
                (
                    "control_lease",
                    &a.c,
                    Op::ControlLease(rpb::ControlLease {
                        holder: Some(party("--holder", required("--holder", &a.holder)?)?),
                        until_unix_ms: opt_time("--until", &a.until, now)?,
                    }),
                )
            }
            D::HandBackControl(a) => {
                needs_basis(&a.c, "the control_lease")?;
                (
                    "hand_back_control",
                    &a.c,
                    Op::HandBackControl(rpb::HandBackControl {
                        handoff_note: req_text("--handoff-note", &a.handoff_note)?,
                    }),
                )
            }
            D::Recheck(a) => (
                "recheck",
                &a.c,
                Op::Recheck(rpb::Recheck {
                    outcome: choice("--outcome", required("--outcome", &a.outcome)?, RECHECK)?,
                    note: text(&a.note),
                }),
            ),
        })
    }
}

type Built<'a> = (&'static str, &'a Common, Op);

fn revoke<'a>(
    name: &'static str,
    a: &'a ReasonArgs,
    f: fn(rpb::RevokeRequest) -> Op,
) -> Result<Built<'a>, FlagError> {
    Ok((
        name,
        &a.c,
        f(rpb::RevokeRequest {
            reason: req_text("--reason", &a.reason)?,
        }),
    ))
}

/// The record for `op`, every flag checked.
pub fn record(op: &DeclareOp, now: i64) -> Result<(&'static str, &Common, rpb::Record), FlagError> {
    let (name, c, operation) = op.build(now)?;
    if c.conn.token_file.is_none() {
        return Err(err(
            "--token-file",
            Reason::MissingFlag,
            "a party's token: <node dir>/parties/<party>.token (the node signs for that party)",
        ));
    }
    let record = rpb::Record {
        author: None,
        declared_at_unix_ms: 0,
        commitment_id: id("COMMITMENT", &c.commitment_id)?,
        basis: record_ids("--basis", &c.basis)?
            .into_iter()
            .map(Into::into)
            .collect(),
        items: c
            .items
            .iter()
            .map(|i| id("--item", i))
            .collect::<Result<_, _>>()?,
        nonce: c.nonce.clone().unwrap_or_default().into_bytes().into(),
        operation: Some(operation),
    };
    Ok((name, c, record))
}

fn status(s: tonic::Status) -> anyhow::Error {
    crate::hints::status_error(&s, "--token-file <node dir>/parties/<party>.token")
}

/// Runs `accordctl work declare <op>`.
pub async fn run(op: DeclareOp, out: Output) -> Result<()> {
    let (name, c, record) = match record(&op, now_ms()) {
        Ok(r) => r,
        Err(e) => return Err(flags::report(e, out)),
    };
    let wait = match c.wait.as_deref().map(|s| flags::num::<u64>("--wait", s)) {
        None => None,
        Some(Ok(s)) => Some(Duration::from_secs(s)),
        Some(Err(e)) => return Err(flags::report(e, out)),
    };
    let mut client = c.conn.work().await?;
    let commitment = record.commitment_id.clone();
    let r: pb::SubmitResponse = client
        .declare(pb::DeclareRequest {
            record: Some(record),
        })
        .await
        .map_err(status)?
        .into_inner()
        .into();
    let mut outcome = r.outcome.clone();
    if let Some(limit) = wait
        && outcome
            .as_ref()
            .is_some_and(|o| o.rejection_code == flags::AWAITING_SEQUENCE)
    {
        outcome = Some(decided(&mut client, &commitment, &r.record_id, limit).await?);
    }
    flags::submitted(
        &[("operation", name.into()), ("commitment", commitment)],
        &r,
        outcome.as_ref(),
        out,
    )
}

/// Polls the commitment's history until the home decided the record (its outcome is no longer
/// `awaiting_sequence`), for at most `limit`.
async fn decided(
    client: &mut crate::creds::WorkClient,
    commitment: &str,
    record: &[u8],
    limit: Duration,
) -> Result<pb::Outcome> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut delay = Duration::from_millis(50);
    loop {
        let v = client
            .get_commitment(pb::GetCommitmentRequest {
                commitment_id: commitment.into(),
            })
            .await
            .map_err(status)?
            .into_inner();
        if let Some(o) = v
            .history
            .iter()
            .find(|h| h.record_id.as_ref() == record)
            .and_then(|h| h.outcome.clone())
            .filter(|o| o.rejection_code != flags::AWAITING_SEQUENCE)
        {
            return Ok(o);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(anyhow!(
                "record {} is still awaiting its commitment's home after {}s — is the home node reachable as a peer? (accordctl admin peer health)",
                hex::encode(record),
                limit.as_secs()
            ));
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        op: DeclareOp,
    }

    fn parse(args: &[&str]) -> DeclareOp {
        let mut v = vec!["declare"];
        v.extend(args);
        v.extend([
            "--node",
            "https://127.0.0.1:1",
            "--ca",
            "ca.pem",
            "--token-file",
            "t",
        ]);
        Cli::try_parse_from(v).expect("parses").op
    }

    fn refused(args: &[&str]) -> (&'static str, Reason) {
        let e = record(&parse(args), 0).expect_err("refused");
        (e.flag, e.reason)
    }

    #[test]
    fn a_request_carries_its_flags() {
        let op = parse(&[
            "request",
            "deal-1",
            "--candidate",
            "globex/bob",
            "--title",
            "Ship",
            "--due",
            "+1d",
            "--line-item",
            "a=first",
            "--parameter",
            "k=v",
            "--requires-evidence",
        ]);
        let (name, _, r) = record(&op, 1_000).unwrap();
        assert_eq!(name, "request");
        assert_eq!(r.commitment_id, "deal-1");
        let Some(Op::Request(q)) = r.operation else {
            panic!("not a request")
        };
        assert_eq!(q.candidate.unwrap().organisation, "globex");
        let t = q.terms.unwrap();
        assert_eq!((t.title.as_str(), t.due_unix_ms), ("Ship", 86_401_000));
        assert_eq!(t.items[0].description, "first");
        assert_eq!(t.parameters["k"], "v");
        assert!(q.acceptance.unwrap().requires_evidence);
    }

    #[test]
    fn bad_flags_are_named_with_a_reason() {
        assert_eq!(
            refused(&["decline", "d", "--reason", "busy"]),
            ("--reason", Reason::UnknownValue)
        );
        assert_eq!(
            refused(&["decline", "d"]),
            ("--reason", Reason::MissingFlag)
        );
        assert_eq!(
            refused(&["request", "d", "--candidate", "bob"]),
            ("--candidate", Reason::InvalidParty)
        );
        assert_eq!(
            refused(&["state", "d"]),
            ("--fulfillment-ref", Reason::MissingFlag)
        );
        assert_eq!(refused(&["resume", "d"]), ("--basis", Reason::MissingFlag));
        assert_eq!(
            refused(&["accept_counter", "d", "--counter-digest", "zz"]),
            ("--counter-digest", Reason::InvalidRecordId)
        );
        assert_eq!(
            refused(&["request", "a//b"]),
            ("COMMITMENT", Reason::InvalidId)
        );
        assert_eq!(
            refused(&["delegate", "d"]),
            ("--to", Reason::ConflictingFlags)
        );
        assert_eq!(
            refused(&["request", "d", "--valid-until", "soon"]),
            ("--valid-until", Reason::InvalidTime)
        );
    }

    #[test]
    fn kebab_case_names_are_aliases() {
        assert!(matches!(
            parse(&["accept-counter", "d", "--counter-digest", &"ab".repeat(32)]),
            DeclareOp::AcceptCounter(_)
        ));
    }
}
