//! The content of the records that open gates and report execution (seed 000, "Conditions and
//! gates", "Multi-party aggregation", "Other state axes"); re-exported from [`crate::record`].

use serde::{Deserialize, Serialize};

use crate::record::{AggregationRule, ControlReport, ExecutionReport, GateKind, Party, RecordId};

/// A Condition or gate (seed 000, "Conditions and gates"; "Multi-party aggregation").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// What must hold (required).
    pub description: String,
    /// The party the condition is addressed to (required; the first participant when
    /// `participants` is empty).
    pub addressed_to: Option<Party>,
    /// The gate's kind, fixed at creation; `Unspecified` = a plain Condition.
    #[serde(default)]
    pub kind: GateKind,
    /// The gate's deadline: an open participant request times out then (not acceptance).
    #[serde(default)]
    pub deadline: Option<i64>,
    /// The participants (N), fixed at creation and changed only by `amend`; empty = just
    /// `addressed_to`. They may be parties of other organisations.
    #[serde(default)]
    pub participants: Vec<Party>,
    /// How the participants' answers aggregate.
    #[serde(default)]
    pub aggregation: Aggregation,
}

impl Condition {
    /// The participants: `participants`, or the addressee alone.
    pub fn participant_list(&self) -> Vec<Party> {
        if self.participants.is_empty() {
            self.addressed_to.iter().cloned().collect()
        } else {
            self.participants.clone()
        }
    }
}

/// A multi-party aggregation policy (seed 000, "Multi-party aggregation").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aggregation {
    /// The rule; `Unspecified` = All.
    pub rule: AggregationRule,
    /// K, for K of N.
    pub k: u32,
    /// p in percent (1..=100), for Percentage.
    pub percent: u32,
    /// "Any rejection rejects", added to the rule.
    pub any_rejection_rejects: bool,
}

impl Default for Aggregation {
    fn default() -> Self {
        Aggregation {
            rule: AggregationRule::All,
            k: 0,
            percent: 0,
            any_rejection_rejects: false,
        }
    }
}

/// A new participant set for one gate, carried by `amend` (seed 000, "Multi-party aggregation":
/// "The participant set and N are fixed at creation and change only through amend").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateParticipants {
    /// The gate (the record that opened it).
    pub gate: RecordId,
    /// Its new participants.
    pub participants: Vec<Party>,
}

/// An executor's or external system's claim (seed 000, "Other state axes": "Execution, control
/// and liveness come from executor or external Claims"). The executor is the record's author.
/// Every observation is also a heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// The execution claimed; `Unspecified` = no execution claim in this observation.
    pub execution: ExecutionReport,
    /// The control claimed; `Unspecified` = none.
    pub control: ControlReport,
    /// The heartbeat interval the executor declares, in ms (kept until declared again).
    pub heartbeat_interval_ms: Option<i64>,
    /// The executor left cleanly (liveness `left_cleanly`).
    pub left_cleanly: bool,
    /// A checkpoint reference (a control handover may start from one).
    pub checkpoint: String,
    /// An external state the executor reports as is; one the kernel cannot map makes the
    /// execution axis `unknown` (seed 000, "Summary category": unknown).
    pub external_state: String,
}
