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
