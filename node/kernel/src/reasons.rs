//! The closed code lists records carry (seed 000, "Reason codes"; "Federation admission"). Each
//! keeps the wire number it was read with, so the kernel tells a missing code (`Unspecified`)
//! from one outside the list (`Unknown`).

use serde::{Deserialize, Serialize};

macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $num:literal => $wire:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            /// Wire value 0: not given.
            Unspecified,
            $($(#[$vdoc])* $variant,)+
            /// A number outside the closed list.
            Unknown(i32),
        }

        impl Default for $name {
            fn default() -> Self {
                $name::Unspecified
            }
        }

        impl $name {
            /// Every value of the closed list, in wire order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// From the protobuf enum number.
            pub fn from_wire(n: i32) -> Self {
                match n {
                    0 => $name::Unspecified,
                    $($num => $name::$variant,)+
                    other => $name::Unknown(other),
                }
            }

            /// The protobuf enum number.
            pub fn to_wire(self) -> i32 {
                match self {
                    $name::Unspecified => 0,
                    $($name::$variant => $num,)+
                    $name::Unknown(n) => n,
                }
            }

            /// The seed's snake_case name; `None` for unspecified or unknown values.
            pub fn wire_name(self) -> Option<&'static str> {
                match self {
                    $($name::$variant => Some($wire),)+
                    _ => None,
                }
            }

            /// From the seed's snake_case name.
            pub fn from_wire_name(s: &str) -> Option<Self> {
                match s {
                    $($wire => Some($name::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

wire_enum!(
    /// Decline reasons (seed 000, "Reason codes").
    DeclineReason {
        /// no_capacity
        NoCapacity = 1 => "no_capacity",
        /// no_authority
        NoAuthority = 2 => "no_authority",
        /// out_of_scope
        OutOfScope = 3 => "out_of_scope",
        /// missing_information
        MissingInformation = 4 => "missing_information",
        /// unacceptable_terms
        UnacceptableTerms = 5 => "unacceptable_terms",
        /// other
        Other = 6 => "other",
    }
);

wire_enum!(
    /// Cancel reasons (seed 000, "Reason codes").
    CancelReason {
        /// cannot_complete
        CannotComplete = 1 => "cannot_complete",
        /// failed
        Failed = 2 => "failed",
        /// abandoned
        Abandoned = 3 => "abandoned",
        /// other
        Other = 4 => "other",
    }
);

wire_enum!(
    /// Notice types (seed 000, "Reason codes").
    NoticeType {
        /// at_risk
        AtRisk = 1 => "at_risk",
        /// cannot_complete
        CannotComplete = 2 => "cannot_complete",
        /// obsolete_suggested
        ObsoleteSuggested = 3 => "obsolete_suggested",
    }
);

wire_enum!(
    /// Federation admission outcomes (seed 000, "Federation admission").
    AdmissionOutcome {
        /// admitted
        Admitted = 1 => "admitted",
        /// quarantined
        Quarantined = 2 => "quarantined",
        /// rejected
        Rejected = 3 => "rejected",
    }
);

wire_enum!(
    /// A gate's kind, fixed when the gate is opened (seed 000, "Conditions and gates": "A gate's
    /// kind is fixed when it is created; if it is wrong, the gate is withdrawn and a new one is
    /// opened"). `Unspecified` is a plain Condition.
    GateKind {
        /// An approval of the commitment's content.
        Approval = 1 => "approval",
        /// Delivery acceptance: closed by `accept` / `reject` as well as by `gate_decision`.
        DeliveryAcceptance = 2 => "delivery_acceptance",
        /// A check by an external system.
        ExternalCheck = 3 => "external_check",
    }
);

wire_enum!(
    /// A participant's answer to a gate (seed 000, "Conditions and gates": the answer table).
    /// "Timed out" is derived from the gate's deadline, never written.
    GateAnswer {
        /// Accept: the only answer that counts as acceptance.
        Accept = 1 => "accept",
        /// Reject.
        Reject = 2 => "reject",
        /// Closed without an answer.
        ClosedWithoutAnswer = 3 => "closed_without_answer",
        /// Closed as obsolete by the Work service party after an early decision (seed 000,
        /// "Multi-party aggregation": "the remaining open participant requests close as obsolete").
        Obsolete = 4 => "obsolete",
    }
);

wire_enum!(
    /// The aggregation rule of a multi-party gate (seed 000, "Multi-party aggregation").
    /// `Unspecified` is All.
    AggregationRule {
        /// All N accepted.
        All = 1 => "all",
        /// The first acceptance.
        Any = 2 => "any",
        /// K acceptances.
        KOfN = 3 => "k_of_n",
        /// In order; the next participant's request opens after the previous acceptance.
        Sequential = 4 => "sequential",
        /// Acceptances >= ceil(N x p).
        Percentage = 5 => "percentage",
    }
);

wire_enum!(
    /// What a `stop_request` asks (seed 000, "Stop requests").
    StopMode {
        /// Stop now.
        Immediate = 1 => "immediate",
        /// Finish the current step, then stop.
        FinishThenStop = 2 => "finish_then_stop",
        /// Pause (the first step of a control handover).
        Pause = 3 => "pause",
    }
);

wire_enum!(
    /// The executor's `stop_response` (seed 000, "Stop requests").
    StopAnswer {
        /// Accepts the stop.
        Accept = 1 => "accept",
        /// Will finish, then stop.
        FinishThenStop = 2 => "finish_then_stop",
        /// Refuses (with a reason); attention for the principal and the requester.
        Refuse = 3 => "refuse",
    }
);

wire_enum!(
    /// The execution an executor claims (seed 000, "Other state axes": Execution). `stopped` is
    /// the executor's confirmation of a stop.
    ExecutionReport {
        /// Not started.
        NotStarted = 1 => "not_started",
        /// Running.
        Running = 2 => "running",
        /// Paused.
        Paused = 3 => "paused",
        /// Completed (reported).
        Completed = 4 => "completed_reported",
        /// Failed.
        Failed = 5 => "failed",
        /// Cancelled (reported).
        Cancelled = 6 => "cancelled_reported",
        /// Stopped: the executor confirms a stop.
        Stopped = 7 => "stopped",
    }
);

wire_enum!(
    /// The control an executor claims (seed 000, "Other state axes": Control).
    ControlReport {
        /// automatic
        Automatic = 1 => "automatic",
        /// intervened
        Intervened = 2 => "intervened",
        /// manual
        Manual = 3 => "manual",
    }
);

wire_enum!(
    /// The outcome of the re-check after control is handed back (seed 000, "Control handover":
    /// "re-check assumptions → continue OR re-plan").
    RecheckOutcome {
        /// Continue the work as planned.
        Continue = 1 => "continue",
        /// Re-plan.
        Replan = 2 => "replan",
    }
);

wire_enum!(
    /// A queue's distribution policy (seed 000, "Assignment": offer — "Queue owner or
    /// distribution policy"). `Unspecified` = no policy: only the queue owner offers. Both
    /// policies pick from the records alone (no randomness, no clock), over the queue's
    /// candidate set in its declared order:
    ///
    /// * `first_candidate`: the first candidate the policy has not yet offered this commitment
    ///   to (since it entered the queue); once every candidate was offered, no candidate is left.
    /// * `round_robin`: starts at the candidate at position (first 8 bytes of the request's
    ///   record id, big-endian) mod N, so commitments spread over the candidates, then moves on
    ///   to the next candidate (wrapping) each time the commitment returns unassigned.
    Distribution {
        /// first_candidate
        FirstCandidate = 1 => "first_candidate",
        /// round_robin
        RoundRobin = 2 => "round_robin",
    }
);
