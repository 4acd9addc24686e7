//! # accord-kernel: the Work kernel (commitments, runs, commit envelopes)
//!
//! Pure, synchronous and deterministic (DESIGN.md, "Components"): the kernel takes records and
//! the ledger time as arguments and derives state. It does no I/O, reads no clock, draws no
//! random numbers and knows no wire types; like raft-rs, the caller persists and sends. The
//! source of every rule is seed 000 ("State machines"); its tables are transcribed as tables
//! here.
//!
//! ## Using it (the node)
//!
//! * [`apply_with`]`(directory, record, access, now)`: what the node calls — like [`apply`], but
//!   it sees every commitment: an allowed revoke_acceptance whose reopening id is taken is
//!   rejected `commitment_exists`, and an admission about a record of no known commitment is
//!   applied with no derived state ([`Applied::next`] is `None`).
//! * [`apply`]`(state, record, access, now)`: one [`Record`] against the commitment's derived
//!   [`Commitment`] (`None` before its `request`). `Ok((next, effects))`: store `next`, act on
//!   the [`Effect`]s. `Err(`[`Rejection`]`)`: record the record with its rejection; the state is
//!   unchanged (seed 000, "Operations": "An invalid operation is rejected with a reason and
//!   recorded").
//! * [`due_work`]`(state, now)`: the records the Work service party must write now (seed 000,
//!   "Records written by the Work service"); turn each into a record authored by
//!   [`Access::service`], sign it and `apply` it.
//! * [`view()`]`(state, now, access)`: the read model — state or per-item states with summary `mixed`,
//!   summary category, flags, whose move, assignment axis, revokes, disputes, deferral, links.
//! * [`Access`] is built from the node's config: who acts for which organisation, which party
//!   holds which [`Authority`], and the Work service party.
//!
//! * Runs and commit envelopes have their own machines: [`run::apply_run`],
//!   [`envelope::apply_envelope`] and [`envelope::apply_tick`]; `apply` refuses their records
//!   (`wrong_machine`).
//!
//! Replaying the applied records in order, each with the time it was applied at, gives the
//! same [`Commitment`] (DESIGN.md, "Ledger": "a replay of all records must give the same
//! projections").
//!
//! ## Modules, by seed 000 section
//!
//! | module | seed 000 section |
//! | --- | --- |
//! | [`state`] | "Commitment" / "States": 13 states, wire names, terminal flags |
//! | [`record`] | "Operations": the closed list of operations (request content in `terms`, gate and claim content in `content`) |
//! | [`reasons`] | "Reason codes" (decline, cancel, notice type); admission outcomes |
//! | [`rules`] | "Operations": the transition table and the role table |
//! | [`revoke`] | "Revoke requests"; the `dispute` row |
//! | [`mod@assignment`] | "Assignment": axis and operations; `delegate` / `assign` two-record handovers |
//! | [`service`] | "Records written by the Work service" |
//! | [`mod@view`] | "Whose move it is", "Summary category" |
//! | [`claims`] | "Other state axes": execution, control, liveness from executor claims |
//! | [`gates`] | "Conditions and gates", "Multi-party aggregation" |
//! | `stop` | "Stop requests", "Control handover" |
//! | [`access`] | "An operation is valid only if … Access authorizes it" |
//! | [`roles`] | who holds which role ("Who" columns) |
//! | [`commitment`] | the derived state (every axis the records determine) |
//! | [`rejection`] | the machine-readable rejection codes |
//! | [`visibility`] | who may read a commitment (the parties with a role on it) |
//! | `items` | the items a record acts on, checked against the transition table |
//! | `ctx`, `effect` | shared by the operation modules: the context of one `apply`, and the [`Effect`]s it returns |
//! | [`run`] | seed 002: run states, the run transition table, run records, receipts, recovery |
//! | [`envelope`] | seed 003: the commit-envelope lifecycle, its declaration, the participant's book |
//!
//! The modules depend downward only: `apply` dispatches to the operation modules, which use
//! `ctx`, `effect`, the tables (`rules`, `state`) and the record types; none imports `apply`.
//!
//! ## Choices where the seed is silent
//!
//! * **Line items.** A record's `items` name the items it acts on; empty means every item that
//!   is still open (every item if none is, so acting on a closed commitment meets
//!   `terminal_state`). Every item acted on must be in a from-state of one row of the transition
//!   table. Terms are commitment-wide; a counter or amend must keep the set of item ids.
//! * **Check order.** existence, Access (`not_authorized`), subject and items, state
//!   (`terminal_state` / `invalid_state`), role (`wrong_role`), content. A missing authority
//!   (administrative_close, principal, queue owner) is `wrong_role`: the author holds no role
//!   the operation needs; `not_authorized` means Access does not let the author act for the
//!   organisation it claims.
//! * **Roles.** Candidate obligor = the party offered to plus the queue's candidates, and once
//!   an obligor is known, the obligor only. Principal = the principal the request names or an
//!   Access grant. Queue owner = the Access grantees for that queue name, or the declared owner
//!   when Access grants none. `amend` is the obligee's. `open_condition` is the obligee's or
//!   obligor's; its opener owns it. `report_consumption` and `acted_upon` are by an executor:
//!   any party of the obligor's organisation. The Work service party is also the distribution
//!   policy (`offer`). `admission` is written by any party of the node's own organisation (the
//!   seed names no role; Access decides who acts for it), e.g. the Work service party or the
//!   operator.
//! * **Conditional promise.** Its precondition is an open Condition (category `waiting`; whose
//!   move: the addressee). `satisfy_condition` by the addressee, or `withdraw_condition` by the
//!   obligor who set it, naming the promise_conditional in basis, makes it `promised`. Its
//!   deadline is the validity statement an `expire` rests on.
//! * **Validity.** The request's `valid_until` is the validity statement of `requested` and
//!   `countered` items; a promise (of any kind) ends it; an unclaim does not restore it.
//! * **Revoke requests.** One open at a time (`revoke_pending`); allow/refuse name it in basis;
//!   it lapses when none of its items is in a state it acts on any more. revoke_request may be
//!   asked in any open state. An allowed revoke_acceptance keeps `accepted` and returns
//!   [`Effect::StartReopening`] with the reopening commitment's initial state: the revoked items
//!   in `requested`, offered to the previous obligor, same obligee/acceptor/terms, linked both
//!   ways; its id is `Allow.reopening_commitment_id`, or `<id>~reopen~<16 hex of the allow id>`.
//! * **Dispute** is allowed in any state (it changes none) and needs a reject of this
//!   commitment or its open revoke_acceptance; each record carries at most one dispute mark.
//! * **Evidence.** An explicit accept cites `evidence_ref`. The kernel's own evidence is the
//!   `acted_upon` records (executor acts): the `unevidenced` flag and the "required evidence is
//!   missing" block of implicit acceptance look at them; a reject clears them.
//! * **Four-eyes**: the acceptor must differ from the party that stated; an implicit accept is
//!   made on the acceptor's behalf, so it is blocked when the acceptor is the party that stated.
//! * **Assignment.** held = an obligor is known and its claim's lease (if any) has not ended;
//!   otherwise failed_to_assign once the queue's
//!   start deadline passed, else offered (a party is offered), else pooled (the queue has
//!   candidates), else failed_to_assign (no candidate). `claim` needs nobody else holding it
//!   (`already_held`). `forward` replaces the queue and drops a pending offer when nobody holds
//!   it; it never moves a held obligation. `reassign` of a held commitment opens a delegate
//!   offer to the new party (the obligation moves only through delegate); otherwise it offers.
//! * **Summary category.** triage = request phase and assignment pooled; waiting = a Condition
//!   or gate not satisfied (or a conditional promise); unknown = liveness stale or unknown, or
//!   execution unknown (an unmapped external state, a stop without the executor's confirmation,
//!   contradicting claims); active = promised and running with liveness live or not
//!   applicable, or rework after a rejection; ready = promised otherwise. A request phase that
//!   is offered or failed_to_assign matches no row: the kernel shows `waiting`. `acted_upon` is
//!   evidence, never "running". Flags: stale (liveness), taken_over (control manual or
//!   intervened), contradiction (two executors' latest execution claims differ, or running
//!   claimed after a confirmed stop with no resume_after_stop).
//! * **Gates.** An answer is bound to the terms it answered and counts only while the terms are
//!   equal; `gate_decision` names the terms version it answers (must be the current one);
//!   `satisfy_condition` is the addressee's accept. A satisfied gate stays (an amend can reopen
//!   it); `withdraw_condition` removes it.
//! * **Whose move** lists every applicable row: the open revoke request, budget exhausted, and
//!   one row per open state. The queue owner shown is whoever Access lets act as the queue's
//!   owner: the grantees when Access grants that queue, else the declared owner.
//! * **Work service records** from [`due_work`] are independent of each other: applied in the
//!   order given, each is accepted.
//! * **Records outside the seed's table.** `gate_decision`, `observation`, `stop_request`,
//!   `stop_response`, `resume_after_stop`, `control_lease`, `hand_back_control` and `recheck`
//!   act on open commitments with no state change (see [`gates`], [`claims`] and the `stop`
//!   module for who may write them). `open_condition`, `withdraw_condition`,
//!   `satisfy_condition`, `report_consumption`, `acted_upon` and `admission` (record.proto) are
//!   accepted on open commitments (`admission` in any state) with no state change of their own,
//!   except the precondition case above.

#![forbid(unsafe_code)]

pub mod access;
mod apply;
pub mod assignment;
pub mod claims;
pub mod commitment;
mod content;
mod ctx;
mod deferral;
mod directory;
pub mod distribution;
mod effect;
pub mod envelope;
pub mod gates;
mod items;
mod marks;
mod ops;
pub mod reasons;
pub mod record;
pub mod rejection;
mod request;
pub mod return_event;
pub mod revoke;
pub mod roles;
pub mod rules;
pub mod run;
pub mod service;
pub mod state;
mod stop;
mod terms;
pub mod view;
pub mod visibility;

pub use access::{Access, Authority, Grant, Members};
pub use apply::{apply, apply_with};
pub use assignment::{Assignment, assignment};
pub use commitment::{Commitment, WHOLE};
pub use directory::{Applied, Directory};
pub use effect::{Effect, Notification};
pub use gates::{GateStatus, Participation};
pub use record::{
    AcceptanceCriterion, AdmissionOutcome, Aggregation, AggregationRule, Budget, CancelReason,
    Condition, ControlReport, DeclineReason, Distribution, ExecutionReport, GateAnswer, GateKind,
    GateParticipants, LineItem, NoticeType, Observation, Operation, Party, Queue, RecheckOutcome,
    Record, RecordId, Request, RevokeKind, StopAnswer, StopMode, Terms, hex_id,
};
pub use rejection::{Rejection, RejectionCode};
pub use rules::{Outcome, Role, RuleKey};
pub use service::{ImplicitBlock, ServiceAction, ServiceKind, due_work, is_service_party};
pub use state::State;
pub use view::{Category, Control, Execution, Flag, Liveness, Move, MoveRow, View, view};
pub use visibility::{may_read, parties_with_role};
