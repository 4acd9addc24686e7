//! The envelope-type declaration (seed 003; issue 13 item 1) as a pure, deserializable type
//! the node's config embeds, and its validation. The shape is the seed's:
//!
//! ```toml
//! [[envelope_types]]
//! name = "budget_transfer"
//! lifecycle = { prepare_event = "TRANSFER_PREPARED", prepared_event = "TRANSFER_PREPARE_CONFIRMED",
//!               commit_event = "TRANSFER_COMMITTED", abort_event = "TRANSFER_ABORTED" }
//! timeout = { abort_after_seconds = 30, tick_event = "CLOCK_TICK" }
//! [envelope_types.events.TRANSFER_PREPARED]
//! state = "envelope_state"
//! # … the other three lifecycle events alike …
//! [envelope_types.events.CLOCK_TICK]
//! kind = "system"
//! state = "scheduler"
//! entity_expr = "event.tick_id"
//! payload = { tick_id = "string", instant_time = "integer" }
//! ```
//!
//! [`EnvelopeType::validate`] returns every problem at once, each with the offending field, so
//! the node can refuse the config with a clear reason; warnings do not refuse it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The entity type the four lifecycle events target (seed 003: "All four events must be
/// declared in your events: section targeting the envelope_state entity type").
pub const ENVELOPE_STATE: &str = "envelope_state";

/// One declared envelope type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeType {
    /// The type's name (what `envelope_start` names).
    pub name: String,
    /// The four lifecycle event names.
    pub lifecycle: LifecycleEvents,
    /// The timeout.
    pub timeout: Timeout,
    /// The declared events, by name.
    #[serde(default)]
    pub events: BTreeMap<String, EventDecl>,
    /// The participants' staged changes and abort cleanup rules.
    #[serde(default)]
    pub participants: Vec<ParticipantDecl>,
}

/// `lifecycle:` (seed 003, "Lifecycle events").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifecycleEvents {
    /// Emitted by the start_action core rule: participants stage their changes.
    pub prepare_event: String,
    /// Emitted when every participant ACKed: triggers the commit phase.
    pub prepared_event: String,
    /// Emitted after prepared_event: participants apply their staged changes.
    pub commit_event: String,
    /// Emitted on a NACK or the timeout: participants roll back.
    pub abort_event: String,
}

/// `timeout:` (seed 003, "Timeout").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeout {
    /// Max seconds to wait for every participant to ACK.
    pub abort_after_seconds: u64,
    /// The `kind: system` event the runtime checks elapsed time on.
    pub tick_event: String,
}

/// One entry of `events:`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventDecl {
    /// `system` for the tick event.
    #[serde(default)]
    pub kind: String,
    /// The entity type it targets (`envelope_state`, or `scheduler` for the tick).
    #[serde(default)]
    pub state: String,
    /// How the entity is found from the event.
    #[serde(default)]
    pub entity_expr: String,
    /// Payload fields and their types.
    #[serde(default)]
    pub payload: BTreeMap<String, String>,
}

/// A participant role's staged change and abort cleanup.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParticipantDecl {
    /// The role (e.g. `source`, `destination`).
    pub role: String,
    /// What it stages on prepare.
    #[serde(default)]
    pub stage: Vec<StageRule>,
    /// What it runs on abort; must be idempotent.
    #[serde(default)]
    pub abort_cleanup: Vec<CleanupRule>,
}

/// A staged change rule: what a participant of the role stages on prepare for each change the
/// rule's op takes, applies on commit, and what its abort cleanup must revert (the rule
/// language: ARCHITECTURE.md, "Envelope rules"; README, "Envelope types").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum StageRule {
    /// A debit change's amount is reserved on counter `reserve` (default `reserved`) of its
    /// account, if counter `field` minus `reserve` covers it (else NACK); commit takes it from
    /// `field` and from `reserve`; abort cleanup must `subtract` `reserve`.
    Debit {
        /// The counter debited.
        field: String,
        /// The counter holding the reservation until the outcome (default `reserved`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reserve: Option<String>,
    },
    /// A credit change's amount is noted; commit adds it to counter `field`. Nothing is
    /// changed before commit, so there is nothing to revert.
    Credit {
        /// The counter credited.
        field: String,
    },
    /// The envelope id is appended to list `field` of each account the role's changes touch;
    /// on commit it stays (`on_commit = "keep"`, the default) or goes (`"remove"`, a mark of
    /// work in flight); abort cleanup must `remove_from_list` it.
    Append {
        /// The list.
        field: String,
        /// What commit does with the appended id.
        #[serde(default)]
        on_commit: OnCommit,
    },
    /// Hold the commitment a staged record is about: this organisation's parties write no
    /// other record on it until the envelope ends here. Run by the node's record staging; the
    /// hold is an entry of the node's `holds` list, reverted by `remove_from_list holds`.
    Hold {
        /// The field.
        field: String,
    },
    /// Validate the participant's pre-signed record against its state (prepare) and write it
    /// to its ledger (commit). Run by the node's record staging; nothing to revert (the record
    /// is dropped).
    Submit {
        /// The field.
        field: String,
    },
}

/// What commit does with an id a stage rule appended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnCommit {
    /// The id stays in the list (a reservation made).
    #[default]
    Keep,
    /// The id is removed (a pending mark).
    Remove,
}

/// The counter a debit reserves on when its `reserve` is not declared.
pub const DEFAULT_RESERVE: &str = "reserved";

/// The node's list of commitments held by staged records (what `hold` stages into).
pub const HOLDS_LIST: &str = "holds";

impl StageRule {
    /// The field the rule names.
    pub fn field(&self) -> &str {
        match self {
            StageRule::Debit { field, .. }
            | StageRule::Credit { field }
            | StageRule::Append { field, .. }
            | StageRule::Hold { field }
            | StageRule::Submit { field } => field,
        }
    }

    /// The op's wire name.
    pub fn op(&self) -> &'static str {
        match self {
            StageRule::Debit { .. } => "debit",
            StageRule::Credit { .. } => "credit",
            StageRule::Append { .. } => "append",
            StageRule::Hold { .. } => "hold",
            StageRule::Submit { .. } => "submit",
        }
    }

    /// A debit's reservation counter.
    pub fn reserve(&self) -> Option<&str> {
        match self {
            StageRule::Debit { reserve, .. } => Some(reserve.as_deref().unwrap_or(DEFAULT_RESERVE)),
            _ => None,
        }
    }
}

impl CleanupRule {
    /// The field the rule names.
    pub fn field(&self) -> &str {
        match self {
            CleanupRule::Subtract { field, .. } | CleanupRule::RemoveFromList { field, .. } => {
                field
            }
        }
    }
}

/// An abort cleanup rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum CleanupRule {
    /// Subtract the staged amount from a field; `cap = { min = 0 }` keeps it idempotent.
    Subtract {
        /// The field.
        field: String,
        /// The floor.
        #[serde(default)]
        cap: Option<Cap>,
    },
    /// Remove the envelope's entries from a list field; `filter = "dedup"` keeps it idempotent.
    RemoveFromList {
        /// The field.
        field: String,
        /// `dedup`.
        #[serde(default)]
        filter: Option<String>,
    },
}

/// `cap: { min: 0 }`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cap {
    /// The floor.
    pub min: i64,
}

/// How bad a declaration problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The type cannot be used; the config is refused.
    Error,
    /// The type works but not as one would expect.
    Warning,
}

/// One problem with a declaration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclIssue {
    /// Error or warning.
    pub severity: Severity,
    /// The offending field, dotted from the type (`timeout.tick_event`, `events.X.state`).
    pub field: String,
    /// A machine-readable code (the `DECL_*` constants).
    pub code: &'static str,
    /// What is wrong.
    pub detail: String,
}

/// A required name is empty.
pub const DECL_MISSING_FIELD: &str = "missing_field";
/// A lifecycle or tick event is not declared in `events` as it must be.
pub const DECL_UNDECLARED_EVENT: &str = "undeclared_event";
/// Two lifecycle events share a name.
pub const DECL_DUPLICATE_EVENT: &str = "duplicate_event";
/// `abort_after_seconds` is zero.
pub const DECL_INVALID_TIMEOUT: &str = "invalid_timeout";
/// An abort cleanup rule that would not be idempotent.
pub const DECL_CLEANUP_NOT_IDEMPOTENT: &str = "cleanup_not_idempotent";
/// Two roles share a name.
pub const DECL_DUPLICATE_ROLE: &str = "duplicate_role";
/// A field used as a counter by one rule and as a list by another.
pub const DECL_FIELD_KIND_CONFLICT: &str = "field_kind_conflict";
/// An abort cleanup rule that reverts no stage rule of its role.
pub const DECL_CLEANUP_REVERTS_NOTHING: &str = "cleanup_reverts_nothing";
/// A stage rule whose staged state no abort cleanup rule of its role reverts.
pub const DECL_STAGE_NOT_REVERTED: &str = "stage_not_reverted";
/// A change kind (debit or credit) more than one rule of the type takes, so a change's role
/// would be ambiguous.
pub const DECL_AMBIGUOUS_ROLE: &str = "ambiguous_role";
/// A role no change reaches: it has rules but no debit, credit, hold or submit.
pub const DECL_UNREACHABLE_ROLE: &str = "unreachable_role";
/// The tick interval is not shorter than the timeout (warning).
pub const DECL_TICK_NOT_SHORTER: &str = "tick_not_shorter_than_timeout";

impl EnvelopeType {
    /// The timeout in ms.
    pub fn abort_after_ms(&self) -> i64 {
        i64::try_from(self.timeout.abort_after_seconds)
            .unwrap_or(i64::MAX / 1000)
            .saturating_mul(1000)
    }

    /// The four lifecycle names with the field each comes from.
    fn lifecycle_fields(&self) -> [(&'static str, &str); 4] {
        let l = &self.lifecycle;
        [
            ("lifecycle.prepare_event", &l.prepare_event),
            ("lifecycle.prepared_event", &l.prepared_event),
            ("lifecycle.commit_event", &l.commit_event),
            ("lifecycle.abort_event", &l.abort_event),
        ]
    }

    /// Every problem with the declaration. `tick_interval_seconds` is the interval the node's
    /// scheduler ticks at, if it ticks (seed 003: "Set your tick interval shorter than
    /// abort_after_seconds … envelopes may run up to 2× the timeout before aborting").
    pub fn validate(&self, tick_interval_seconds: Option<u64>) -> Vec<DeclIssue> {
        let mut out = Vec::new();
        let mut err = |field: String, code, detail: String| {
            out.push(DeclIssue {
                severity: Severity::Error,
                field,
                code,
                detail,
            })
        };
        if self.name.trim().is_empty() {
            err(
                "name".into(),
                DECL_MISSING_FIELD,
                "the type needs a name".into(),
            );
        }
        let mut seen: Vec<&str> = Vec::new();
        for (field, name) in self.lifecycle_fields() {
            if name.trim().is_empty() {
                err(
                    field.into(),
                    DECL_MISSING_FIELD,
                    format!("{field} is not set"),
                );
                continue;
            }
            if seen.contains(&name) {
                err(
                    field.into(),
                    DECL_DUPLICATE_EVENT,
                    format!("{name:?} names two lifecycle events"),
                );
            }
            seen.push(name);
            match self.events.get(name) {
                None => err(
                    field.into(),
                    DECL_UNDECLARED_EVENT,
                    format!("{name:?} is not declared in events"),
                ),
                Some(e) if e.state != ENVELOPE_STATE => err(
                    format!("events.{name}.state"),
                    DECL_UNDECLARED_EVENT,
                    format!("{name:?} must target {ENVELOPE_STATE}"),
                ),
                Some(_) => {}
            }
        }
        if self.timeout.abort_after_seconds == 0 {
            err(
                "timeout.abort_after_seconds".into(),
                DECL_INVALID_TIMEOUT,
                "abort_after_seconds must be positive".into(),
            );
        }
        let tick = &self.timeout.tick_event;
        if tick.trim().is_empty() {
            err(
                "timeout.tick_event".into(),
                DECL_MISSING_FIELD,
                "timeout.tick_event is not set".into(),
            );
        } else {
            match self.events.get(tick) {
                None => err(
                    "timeout.tick_event".into(),
                    DECL_UNDECLARED_EVENT,
                    format!("{tick:?} is not declared in events"),
                ),
                Some(e) => {
                    if e.kind != "system" {
                        err(
                            format!("events.{tick}.kind"),
                            DECL_UNDECLARED_EVENT,
                            "the tick event must be kind system".into(),
                        );
                    }
                    for (f, ty) in [("tick_id", "string"), ("instant_time", "integer")] {
                        if e.payload.get(f).map(String::as_str) != Some(ty) {
                            err(
                                format!("events.{tick}.payload.{f}"),
                                DECL_UNDECLARED_EVENT,
                                format!("the tick event's payload needs {f}: {ty}"),
                            );
                        }
                    }
                }
            }
        }
        out.extend(super::decl_rules::validate_rules(&self.participants));
        if let Some(every) = tick_interval_seconds
            && every >= self.timeout.abort_after_seconds
            && self.timeout.abort_after_seconds > 0
        {
            out.push(DeclIssue {
                severity: Severity::Warning,
                field: "timeout.abort_after_seconds".into(),
                code: DECL_TICK_NOT_SHORTER,
                detail: format!(
                    "ticks every {every}s are not shorter than the {}s timeout: envelopes may run up to twice the timeout before aborting",
                    self.timeout.abort_after_seconds
                ),
            });
        }
        out
    }

    /// Whether the declaration has no error (warnings allowed).
    pub fn is_valid(&self, tick_interval_seconds: Option<u64>) -> bool {
        self.validate(tick_interval_seconds)
            .iter()
            .all(|i| i.severity == Severity::Warning)
    }
}
