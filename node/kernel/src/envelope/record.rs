//! Envelope records (seed 003; issue 13 item 2: "Every event is a signed record in the ledgers
//! involved, under the declared event names, linked by `basis` to its cause"). They travel as
//! kernel [`Record`](crate::Record)s with [`Operation::Envelope`](crate::Operation::Envelope);
//! the scheduler's tick is [`Operation::Tick`](crate::Operation::Tick), one record for every
//! open envelope.

use serde::{Deserialize, Serialize};

use crate::record::RecordId;

/// One envelope record: the envelope, the declared event name it is emitted under, the step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeOperation {
    /// The envelope id (chosen by the coordinator; unique on the node).
    pub envelope: String,
    /// The declared event name (`lifecycle.prepare_event`, …) for the four lifecycle steps;
    /// empty for `envelope_start` and `envelope_vote`.
    pub event: String,
    /// The step.
    pub step: EnvelopeStep,
}

/// The closed list of envelope steps, each with its wire name ([`EnvelopeStep::wire_name`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvelopeStep {
    /// `envelope_start`: the start_action, at the coordinator.
    Start(EnvelopeStart),
    /// `envelope_prepare`: the prepare_event (participants stage their changes).
    Prepare,
    /// `envelope_vote`: a participant's ACK or NACK.
    Vote {
        /// The participant answering (its organisation).
        participant: String,
        /// The answer.
        vote: Vote,
        /// Why (for a NACK).
        reason: String,
    },
    /// `envelope_prepared`: the prepared_event (every participant ACKed).
    Prepared,
    /// `envelope_commit`: the commit_event (participants apply their staged changes).
    Commit,
    /// `envelope_abort`: the abort_event (participants run their abort cleanup).
    Abort {
        /// What caused it.
        cause: AbortCause,
    },
}

impl EnvelopeStep {
    /// The wire name.
    pub const fn wire_name(&self) -> &'static str {
        match self {
            EnvelopeStep::Start(_) => "envelope_start",
            EnvelopeStep::Prepare => "envelope_prepare",
            EnvelopeStep::Vote { .. } => "envelope_vote",
            EnvelopeStep::Prepared => "envelope_prepared",
            EnvelopeStep::Commit => "envelope_commit",
            EnvelopeStep::Abort { .. } => "envelope_abort",
        }
    }
}

/// `envelope_start`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeStart {
    /// The declared envelope type.
    pub envelope_type: String,
    /// The participants (organisations) and the change each stages.
    pub participants: Vec<ParticipantChanges>,
}

/// One participant and its part of the envelope.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParticipantChanges {
    /// The participant (an organisation; the coordinator may be one).
    pub participant: String,
    /// The changes it stages on prepare and applies on commit.
    pub changes: Vec<Change>,
}

/// A change a participant stages. Amounts are in the account's unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Take `amount` from `account` (e.g. a commitment's budget).
    Debit {
        /// The account.
        account: String,
        /// How much.
        amount: u64,
    },
    /// Add `amount` to `account`.
    Credit {
        /// The account.
        account: String,
        /// How much.
        amount: u64,
    },
    /// A kernel record pre-signed by one of the participant's parties (e.g. one half of a
    /// delegate, seed 000 "Operations"), kept as its signed wire bytes: validated against the
    /// participant's state on prepare (without applying), written to the participant's ledger on
    /// commit, dropped on abort. The envelope's record changes, in participant order, are one
    /// sequence: a participant writes its own only once every earlier one is in its ledger.
    Record {
        /// The commitment the record is about (held while the envelope is open).
        commitment: String,
        /// The record's id (SHA-256 of PAE(payload_type, payload)).
        record: RecordId,
        /// The encoded `accord.record.v1.SignedRecord`.
        signed: Vec<u8>,
    },
}

impl Change {
    /// The account changed (the commitment, for a record change).
    pub fn account(&self) -> &str {
        match self {
            Change::Debit { account, .. } | Change::Credit { account, .. } => account,
            Change::Record { commitment, .. } => commitment,
        }
    }

    /// Whether this is a budget change (debit or credit) that a [`Book`](super::Book) stages.
    pub fn is_budget(&self) -> bool {
        matches!(self, Change::Debit { .. } | Change::Credit { .. })
    }
}

/// A participant's answer to prepare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vote {
    /// Staged; ready to commit.
    Ack,
    /// Cannot stage; the envelope must abort.
    Nack,
}

/// Why an envelope aborts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbortCause {
    /// A participant answered NACK.
    Nack,
    /// Not every participant ACKed within `abort_after_seconds`, as seen on a tick.
    Timeout,
}

/// The scheduler's tick (seed 003: a `kind: system` event with `tick_id` and `instant_time`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tick {
    /// The tick's id.
    pub tick_id: String,
    /// The instant it stands for (Unix ms).
    pub instant_time: i64,
}
