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
//! * Participant: a [`Book`] per participant: [`Book::prepare`] answers ACK/NACK,
//!   [`Book::commit`] applies (only after its own ACK), [`Book::abort`] runs the idempotent
//!   cleanup.
//!
//! The transitions are the one table [`ENVELOPE_TRANSITIONS`] (written out in [`table`] and
//! ARCHITECTURE.md).

mod decl;
mod machine;
mod participant;
mod record;
mod state;
pub mod table;

pub use decl::{
    Cap, CleanupRule, DECL_CLEANUP_NOT_IDEMPOTENT, DECL_DUPLICATE_EVENT, DECL_INVALID_TIMEOUT,
    DECL_MISSING_FIELD, DECL_TICK_NOT_SHORTER, DECL_UNDECLARED_EVENT, DeclIssue, ENVELOPE_STATE,
    EnvelopeType, EventDecl, LifecycleEvents, ParticipantDecl, Severity, StageRule, Timeout,
};
pub use machine::{apply_envelope, apply_tick, own_ack};
pub use participant::{Account, Book, may_move_budget, reverse_list, subtract_capped};
pub use record::{
    AbortCause, Change, EnvelopeOperation, EnvelopeStart, EnvelopeStep, ParticipantChanges, Tick,
    Vote,
};
pub use state::{Envelope, EnvelopeApplied, EnvelopeEffect, LogEntry, StartEntry};
pub use table::{ENVELOPE_TRANSITIONS, EnvelopeRow, EventKind, Guard, Lifecycle, Phase};
