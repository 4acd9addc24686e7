//! # Commit envelopes (seed 003, "Lifecycle & Timeout")
//!
//! A commit envelope applies a set of changes at several participants — nodes of different
//! organisations — all or nothing: PENDING → PREPARING → COMMITTING → COMMITTED, or → ABORTING
//! → ABORTED. Pure, like the rest of the kernel: records and time in, derived state out.
//!
//! ## Using it (the node)
//!
//! * [`EnvelopeType`] is the declaration the node's config embeds (serde; the seed's field
//!   names); [`EnvelopeType::validate`] lists every problem, errors and the tick-interval
//!   warning, each with its field.
//! * Envelope records are kernel [`Record`](crate::Record)s with
//!   [`Operation::Envelope`](crate::Operation::Envelope) ([`EnvelopeOperation`]), wire names
//!   `envelope_start`, `envelope_prepare`, `envelope_vote`, `envelope_prepared`,
//!   `envelope_commit`, `envelope_abort`; lifecycle records carry their declared event name.
//!   The scheduler's tick is [`Operation::Tick`](crate::Operation::Tick).
//! * Coordinator: [`apply_envelope`]`(state, types, record, access, now)` and, for each open
//!   envelope on each tick, [`apply_tick`]; act on the [`EnvelopeEffect::Emit`]s (write the next
//!   lifecycle record with the given basis and deliver it).
//! * Participant: a [`Book`] per participant: [`Book::prepare`] stages the changes as the
//!   type's declared `stage` rules say and answers ACK/NACK, [`Book::commit`] applies (only
//!   after its own ACK), [`Book::abort`] runs the declared `abort_cleanup` rules, idempotently
//!   ([`rules`] is the interpreter).
//!
//! The transitions are the one table [`ENVELOPE_TRANSITIONS`] (written out in [`table`] and
//! ARCHITECTURE.md).

mod decl;
mod decl_rules;
mod machine;
mod participant;
mod record;
pub mod rules;
mod state;
pub mod table;

pub use decl::{
    Cap, CleanupRule, DECL_AMBIGUOUS_ROLE, DECL_CLEANUP_NOT_IDEMPOTENT,
    DECL_CLEANUP_REVERTS_NOTHING, DECL_DUPLICATE_EVENT, DECL_DUPLICATE_ROLE,
    DECL_FIELD_KIND_CONFLICT, DECL_INVALID_TIMEOUT, DECL_MISSING_FIELD, DECL_STAGE_NOT_REVERTED,
    DECL_TICK_NOT_SHORTER, DECL_UNDECLARED_EVENT, DECL_UNREACHABLE_ROLE, DEFAULT_RESERVE,
    DeclIssue, ENVELOPE_STATE, EnvelopeType, EventDecl, HOLDS_LIST, LifecycleEvents, OnCommit,
    ParticipantDecl, Severity, StageRule, Timeout,
};
pub use machine::{apply_envelope, apply_tick, own_ack};
pub use participant::{Book, may_move_budget};
pub use record::{
    AbortCause, Change, EnvelopeOperation, EnvelopeStart, EnvelopeStep, ParticipantChanges, Tick,
    Vote,
};
pub use rules::{Account, Staged, StagedOp, reverse_list, subtract_capped};
pub use state::{Envelope, EnvelopeApplied, EnvelopeEffect, LogEntry, StartEntry};
pub use table::{ENVELOPE_TRANSITIONS, EnvelopeRow, EventKind, Guard, Lifecycle, Phase};
