//! The commit-envelope lifecycle (seed 003, "Lifecycle & Timeout", the state diagram) as one
//! table. Written out in ARCHITECTURE.md ("Commit envelopes: the transition table").
//!
//! | from | event | when | to | emits |
//! |---|---|---|---|---|
//! | (none) | start | — | PENDING | prepare_event |
//! | PENDING | prepare | — | PREPARING | — |
//! | PREPARING | ack | others still to answer | PREPARING | — |
//! | PREPARING | ack | every participant ACKed | COMMITTING | prepared_event |
//! | PREPARING | nack | — | ABORTING | abort_event |
//! | PREPARING | tick | timeout elapsed | ABORTING | abort_event |
//! | PREPARING | tick | timeout not elapsed | PREPARING | — |
//! | COMMITTING | prepared | first time | COMMITTING | commit_event |
//! | COMMITTING | commit | prepared recorded | COMMITTED | — |
//! | ABORTING | abort | — | ABORTED | — |
//! | any | ack, nack | the same answer again | (stays) | — |
//! | COMMITTING, COMMITTED, ABORTING, ABORTED | ack, nack | a late answer | (stays) | — |
//! | PREPARING, COMMITTING, COMMITTED, ABORTING, ABORTED | prepare | duplicate | (stays) | — |
//! | COMMITTING | prepared | duplicate | (stays) | — |
//! | COMMITTED | prepared, commit | duplicate | (stays) | — |
//! | ABORTED | abort | duplicate | (stays) | — |
//! | PENDING, COMMITTING, COMMITTED, ABORTING, ABORTED | tick | — | (stays) | — |
//!
//! Every other pair is refused: `terminal_state` from COMMITTED or ABORTED, `invalid_state`
//! otherwise (a commit before prepared, an abort once committing, a vote before prepare, …).
//! A participant that changes its answer is refused `vote_changed`. The timeout is checked only
//! on ticks, against the tick's `instant_time` (seed 003: "the runtime checks elapsed time on
//! each tick").

use std::fmt;

use serde::{Deserialize, Serialize};

/// An envelope's phase (the seed's state names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    /// start_action submitted.
    Pending,
    /// prepare_event emitted; waiting for every participant to ACK.
    Preparing,
    /// Every participant ACKed; prepared_event and commit_event follow.
    Committing,
    /// commit_event recorded (terminal).
    Committed,
    /// A NACK, or the timeout seen on a tick; abort_event follows.
    Aborting,
    /// abort_event recorded (terminal).
    Aborted,
}

impl Phase {
    /// The six phases.
    pub const ALL: [Phase; 6] = [
        Phase::Pending,
        Phase::Preparing,
        Phase::Committing,
        Phase::Committed,
        Phase::Aborting,
        Phase::Aborted,
    ];

    /// The seed's name.
    pub const fn wire_name(self) -> &'static str {
        match self {
            Phase::Pending => "PENDING",
            Phase::Preparing => "PREPARING",
            Phase::Committing => "COMMITTING",
            Phase::Committed => "COMMITTED",
            Phase::Aborting => "ABORTING",
            Phase::Aborted => "ABORTED",
        }
    }

    /// From the seed's name.
    pub fn from_wire_name(s: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.wire_name() == s)
    }

    /// COMMITTED and ABORTED.
    pub const fn is_terminal(self) -> bool {
        matches!(self, Phase::Committed | Phase::Aborted)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wire_name())
    }
}

/// What drives the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// start_action.
    Start,
    /// prepare_event.
    Prepare,
    /// A participant's ACK.
    Ack,
    /// A participant's NACK.
    Nack,
    /// The scheduler's tick.
    Tick,
    /// prepared_event.
    Prepared,
    /// commit_event.
    Commit,
    /// abort_event.
    Abort,
}

/// The four declared lifecycle events (seed 003, "Lifecycle events").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// `prepare_event`.
    Prepare,
    /// `prepared_event`.
    Prepared,
    /// `commit_event`.
    Commit,
    /// `abort_event`.
    Abort,
}

/// When a row applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Guard {
    /// Always.
    Any,
    /// A vote, and every participant has now ACKed.
    AllAcked,
    /// A vote, and some participant has not ACKed yet.
    NotAllAcked,
    /// A vote the participant already gave.
    SameVote,
    /// A vote from a participant that had not voted, arriving after the outcome was decided.
    Late,
    /// A tick at or past `preparing_since + abort_after`.
    TimedOut,
    /// A tick before the timeout.
    NotTimedOut,
    /// The event's first record.
    First,
    /// commit_event, once prepared_event is recorded.
    AfterPrepared,
    /// The event was already recorded.
    Duplicate,
}

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvelopeRow {
    /// The phases it applies in (empty: no envelope yet).
    pub from: &'static [Phase],
    /// The events it applies to.
    pub events: &'static [EventKind],
    /// When.
    pub guard: Guard,
    /// The next phase; `None` = stays.
    pub to: Option<Phase>,
    /// The lifecycle event the runtime emits next.
    pub emits: Option<Lifecycle>,
}

use EventKind as E;
use Phase as P;

const AFTER_PREPARING: &[Phase] = &[P::Committing, P::Committed, P::Aborting, P::Aborted];

/// The table, the seed's arrows first, then the rows where an event changes nothing.
pub const ENVELOPE_TRANSITIONS: [EnvelopeRow; 17] = [
    row(
        &[],
        &[E::Start],
        Guard::Any,
        Some(P::Pending),
        Some(Lifecycle::Prepare),
    ),
    row(
        &[P::Pending],
        &[E::Prepare],
        Guard::Any,
        Some(P::Preparing),
        None,
    ),
    row(
        &[P::Preparing],
        &[E::Ack],
        Guard::NotAllAcked,
        Some(P::Preparing),
        None,
    ),
    row(
        &[P::Preparing],
        &[E::Ack],
        Guard::AllAcked,
        Some(P::Committing),
        Some(Lifecycle::Prepared),
    ),
    row(
        &[P::Preparing],
        &[E::Nack],
        Guard::Any,
        Some(P::Aborting),
        Some(Lifecycle::Abort),
    ),
    row(
        &[P::Preparing],
        &[E::Tick],
        Guard::TimedOut,
        Some(P::Aborting),
        Some(Lifecycle::Abort),
    ),
    row(
        &[P::Preparing],
        &[E::Tick],
        Guard::NotTimedOut,
        Some(P::Preparing),
        None,
    ),
    row(
        &[P::Committing],
        &[E::Prepared],
        Guard::First,
        Some(P::Committing),
        Some(Lifecycle::Commit),
    ),
    row(
        &[P::Committing],
        &[E::Commit],
        Guard::AfterPrepared,
        Some(P::Committed),
        None,
    ),
    row(
        &[P::Aborting],
        &[E::Abort],
        Guard::Any,
        Some(P::Aborted),
        None,
    ),
    row(&Phase::ALL, &[E::Ack, E::Nack], Guard::SameVote, None, None),
    row(AFTER_PREPARING, &[E::Ack, E::Nack], Guard::Late, None, None),
    row(
        &[
            P::Preparing,
            P::Committing,
            P::Committed,
            P::Aborting,
            P::Aborted,
        ],
        &[E::Prepare],
        Guard::Duplicate,
        None,
        None,
    ),
    row(
        &[P::Committing],
        &[E::Prepared],
        Guard::Duplicate,
        None,
        None,
    ),
    row(
        &[P::Committed],
        &[E::Prepared, E::Commit],
        Guard::Duplicate,
        None,
        None,
    ),
    row(&[P::Aborted], &[E::Abort], Guard::Duplicate, None, None),
    row(
        &[
            P::Pending,
            P::Committing,
            P::Committed,
            P::Aborting,
            P::Aborted,
        ],
        &[E::Tick],
        Guard::Any,
        None,
        None,
    ),
];

const fn row(
    from: &'static [Phase],
    events: &'static [EventKind],
    guard: Guard,
    to: Option<Phase>,
    emits: Option<Lifecycle>,
) -> EnvelopeRow {
    EnvelopeRow {
        from,
        events,
        guard,
        to,
        emits,
    }
}

impl EventKind {
    /// The name used in the table.
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::Start => "start",
            EventKind::Prepare => "prepare",
            EventKind::Ack => "ack",
            EventKind::Nack => "nack",
            EventKind::Tick => "tick",
            EventKind::Prepared => "prepared",
            EventKind::Commit => "commit",
            EventKind::Abort => "abort",
        }
    }
}

impl Lifecycle {
    /// The declaration field naming it.
    pub const fn field(self) -> &'static str {
        match self {
            Lifecycle::Prepare => "prepare_event",
            Lifecycle::Prepared => "prepared_event",
            Lifecycle::Commit => "commit_event",
            Lifecycle::Abort => "abort_event",
        }
    }
}

impl Guard {
    /// How the table writes it.
    pub const fn text(self) -> &'static str {
        match self {
            Guard::Any => "—",
            Guard::AllAcked => "every participant ACKed",
            Guard::NotAllAcked => "others still to answer",
            Guard::SameVote => "the same answer again",
            Guard::Late => "a late answer",
            Guard::TimedOut => "timeout elapsed",
            Guard::NotTimedOut => "timeout not elapsed",
            Guard::First => "first time",
            Guard::AfterPrepared => "prepared recorded",
            Guard::Duplicate => "duplicate",
        }
    }
}

/// The table as Markdown (the form in ARCHITECTURE.md and the doc comment above).
pub fn markdown() -> String {
    let mut s = String::from("| from | event | when | to | emits |\n|---|---|---|---|---|\n");
    for r in &ENVELOPE_TRANSITIONS {
        let from = if r.from.is_empty() {
            "(none)".to_string()
        } else if r.from.len() == Phase::ALL.len() {
            "any".to_string()
        } else {
            r.from
                .iter()
                .map(|p| p.wire_name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let events = r
            .events
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", ");
        let to = r.to.map_or("(stays)", Phase::wire_name);
        let emits = r.emits.map_or("—", Lifecycle::field);
        s.push_str(&format!(
            "| {from} | {events} | {} | {to} | {emits} |\n",
            r.guard.text()
        ));
    }
    s
}

/// The first row that applies to `event` in `from` (`None` = no envelope yet) whose guard
/// `holds`.
pub fn lookup(
    from: Option<Phase>,
    event: EventKind,
    holds: impl Fn(Guard) -> bool,
) -> Option<&'static EnvelopeRow> {
    ENVELOPE_TRANSITIONS.iter().find(|r| {
        let phase_ok = match from {
            None => r.from.is_empty(),
            Some(p) => r.from.contains(&p),
        };
        phase_ok && r.events.contains(&event) && holds(r.guard)
    })
}
