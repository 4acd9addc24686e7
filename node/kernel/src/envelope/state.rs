//! [`Envelope`]: the derived state of one commit envelope at the coordinator, and what applying
//! a record asks of the node ([`EnvelopeEffect`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::decl::{EnvelopeType, LifecycleEvents};
use super::record::{AbortCause, EnvelopeStart, EnvelopeStep, ParticipantChanges, Vote};
use super::table::{EventKind, Lifecycle, Phase};
use crate::record::{Party, Record, RecordId};

/// One line of the event history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// The record (an envelope record or the tick that timed it out).
    pub record: RecordId,
    /// The event.
    pub event: EventKind,
    /// The phase before.
    pub from: Phase,
    /// The phase after (equal to `from` for a duplicate or late event).
    pub to: Phase,
    /// Ledger time (Unix ms).
    pub at: i64,
}

/// The `envelope_start` record as kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartEntry {
    /// The record.
    pub record: RecordId,
    /// When.
    pub at: i64,
}

/// The derived state of one envelope. The declared names and timeout are copied from the type
/// at start, so a replay gives the same envelope even if the config changed since.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The envelope id.
    pub id: String,
    /// Its declared type.
    pub envelope_type: String,
    /// The party that submitted start_action; its organisation's node coordinates.
    pub coordinator: Party,
    /// The participants and their changes.
    pub participants: Vec<ParticipantChanges>,
    /// The four lifecycle event names, as declared at start.
    pub lifecycle: LifecycleEvents,
    /// The timeout, in ms, as declared at start.
    pub abort_after_ms: i64,
    /// The phase.
    pub phase: Phase,
    /// The start record.
    pub start: StartEntry,
    /// The prepare_event record.
    pub prepare: Option<RecordId>,
    /// When PREPARING began (the prepare_event's ledger time); the timeout runs from here.
    pub preparing_since: Option<i64>,
    /// Each participant's answer and its record.
    pub votes: BTreeMap<String, (Vote, RecordId)>,
    /// The ACK that completed the votes (the prepared_event's cause).
    pub commit_trigger: Option<RecordId>,
    /// The prepared_event record.
    pub prepared: Option<RecordId>,
    /// The commit_event record.
    pub commit: Option<RecordId>,
    /// The NACK or tick that caused the abort (the abort_event's cause).
    pub abort_trigger: Option<RecordId>,
    /// Why it aborts.
    pub abort_cause: Option<AbortCause>,
    /// The abort_event record.
    pub abort: Option<RecordId>,
    /// The event history.
    pub log: Vec<LogEntry>,
    /// Every record applied.
    pub history: Vec<RecordId>,
    /// Ledger time of the last record applied.
    pub updated_at: i64,
}

/// What the node must do after an envelope record or tick was applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvelopeEffect {
    /// Emit the lifecycle event `lifecycle` under its declared name `event`: the coordinator
    /// writes an envelope record with this step, `basis` in its basis, and delivers it to `to`
    /// (the participants, for prepare, commit and abort).
    Emit {
        /// The envelope.
        envelope: String,
        /// Which lifecycle event.
        lifecycle: Lifecycle,
        /// Its declared name.
        event: String,
        /// The step to write.
        step: EnvelopeStep,
        /// Its cause.
        basis: RecordId,
        /// Where to deliver it (organisations).
        to: Vec<String>,
    },
}

/// The result of applying a record to an envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvelopeApplied {
    /// The new state.
    pub next: Envelope,
    /// The effects to act on.
    pub effects: Vec<EnvelopeEffect>,
}

impl Envelope {
    pub(crate) fn start(
        id: &str,
        ty: &EnvelopeType,
        start: &EnvelopeStart,
        record: &Record,
        now: i64,
    ) -> Envelope {
        Envelope {
            id: id.to_string(),
            envelope_type: ty.name.clone(),
            coordinator: record.author.clone(),
            participants: start.participants.clone(),
            lifecycle: ty.lifecycle.clone(),
            abort_after_ms: ty.abort_after_ms(),
            phase: Phase::Pending,
            start: StartEntry {
                record: record.id,
                at: now,
            },
            prepare: None,
            preparing_since: None,
            votes: BTreeMap::new(),
            commit_trigger: None,
            prepared: None,
            commit: None,
            abort_trigger: None,
            abort_cause: None,
            abort: None,
            log: Vec::new(),
            history: vec![record.id],
            updated_at: now,
        }
    }

    /// The declared name of a lifecycle event.
    pub fn event_name(&self, l: Lifecycle) -> &str {
        match l {
            Lifecycle::Prepare => &self.lifecycle.prepare_event,
            Lifecycle::Prepared => &self.lifecycle.prepared_event,
            Lifecycle::Commit => &self.lifecycle.commit_event,
            Lifecycle::Abort => &self.lifecycle.abort_event,
        }
    }

    /// Whether a tick at `instant_time` sees the timeout: PREPARING began at least
    /// `abort_after_ms` before.
    pub fn timed_out(&self, instant_time: i64) -> bool {
        self.phase == Phase::Preparing
            && self
                .preparing_since
                .is_some_and(|since| instant_time.saturating_sub(since) >= self.abort_after_ms)
    }

    /// The participants' organisations.
    pub fn participant_names(&self) -> Vec<String> {
        self.participants
            .iter()
            .map(|p| p.participant.clone())
            .collect()
    }

    /// The changes `participant` stages.
    pub fn changes_of(&self, participant: &str) -> &[super::record::Change] {
        self.participants
            .iter()
            .find(|p| p.participant == participant)
            .map_or(&[], |p| p.changes.as_slice())
    }

    /// How long the envelope has been open at `now` (for listing open envelopes by age).
    pub fn age(&self, now: i64) -> i64 {
        now.saturating_sub(self.start.at)
    }

    /// The lifecycle event the coordinator owes and has not recorded yet, if any: what a
    /// coordinator rebuilt from its ledger after a crash emits to drive the envelope on (issue
    /// 13, "Crash recovery"). An open PREPARING envelope owes nothing but waits for answers and
    /// ticks.
    pub fn due(&self) -> Option<EnvelopeEffect> {
        match self.phase {
            Phase::Pending if self.prepare.is_none() => {
                Some(self.emit(Lifecycle::Prepare, self.start.record))
            }
            Phase::Committing if self.prepared.is_none() => self
                .commit_trigger
                .map(|b| self.emit(Lifecycle::Prepared, b)),
            Phase::Committing if self.commit.is_none() => {
                self.prepared.map(|b| self.emit(Lifecycle::Commit, b))
            }
            Phase::Aborting if self.abort.is_none() => {
                self.abort_trigger.map(|b| self.emit(Lifecycle::Abort, b))
            }
            _ => None,
        }
    }

    pub(crate) fn emit(&self, l: Lifecycle, basis: RecordId) -> EnvelopeEffect {
        let step = match l {
            Lifecycle::Prepare => EnvelopeStep::Prepare,
            Lifecycle::Prepared => EnvelopeStep::Prepared,
            Lifecycle::Commit => EnvelopeStep::Commit,
            Lifecycle::Abort => EnvelopeStep::Abort {
                cause: self.abort_cause.unwrap_or(AbortCause::Timeout),
            },
        };
        let to = match l {
            Lifecycle::Prepared => Vec::new(),
            _ => self.participant_names(),
        };
        EnvelopeEffect::Emit {
            envelope: self.id.clone(),
            lifecycle: l,
            event: self.event_name(l).to_string(),
            step,
            basis,
            to,
        }
    }
}
