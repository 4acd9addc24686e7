//! The commitment axis: the 13 states (seed 000, "Commitment" / "States").

use std::fmt;

use serde::{Deserialize, Serialize};

/// A value of the commitment axis. `mixed` is a summary only and never a value here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// requested
    Requested,
    /// countered
    Countered,
    /// conditionally_promised
    ConditionallyPromised,
    /// promised
    Promised,
    /// stated
    Stated,
    /// accepted (terminal)
    Accepted,
    /// declined (terminal)
    Declined,
    /// withdrawn (terminal)
    Withdrawn,
    /// cancelled (terminal)
    Cancelled,
    /// released (terminal)
    Released,
    /// obsolete (terminal)
    Obsolete,
    /// expired (terminal)
    Expired,
    /// closed_administratively (terminal)
    ClosedAdministratively,
}

impl State {
    /// All 13 states in the seed's order.
    pub const ALL: [State; 13] = [
        State::Requested,
        State::Countered,
        State::ConditionallyPromised,
        State::Promised,
        State::Stated,
        State::Accepted,
        State::Declined,
        State::Withdrawn,
        State::Cancelled,
        State::Released,
        State::Obsolete,
        State::Expired,
        State::ClosedAdministratively,
    ];

    /// The seed's wire name.
    pub const fn wire_name(self) -> &'static str {
        match self {
            State::Requested => "requested",
            State::Countered => "countered",
            State::ConditionallyPromised => "conditionally_promised",
            State::Promised => "promised",
            State::Stated => "stated",
            State::Accepted => "accepted",
            State::Declined => "declined",
            State::Withdrawn => "withdrawn",
            State::Cancelled => "cancelled",
            State::Released => "released",
            State::Obsolete => "obsolete",
            State::Expired => "expired",
            State::ClosedAdministratively => "closed_administratively",
        }
    }

    /// From the seed's wire name.
    pub fn from_wire_name(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|st| st.wire_name() == s)
    }

    /// The seed's "Terminal" column. A terminal state never changes.
    pub const fn is_terminal(self) -> bool {
        !matches!(
            self,
            State::Requested
                | State::Countered
                | State::ConditionallyPromised
                | State::Promised
                | State::Stated
        )
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wire_name())
    }
}

/// A set of states (the "From" column of a rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateSet(u16);

impl StateSet {
    /// No state.
    pub const NONE: StateSet = StateSet(0);
    /// Every state.
    pub const ALL: StateSet = StateSet((1 << 13) - 1);
    /// The open (non-terminal) states: "Any open state".
    pub const OPEN: StateSet = StateSet::of(&[
        State::Requested,
        State::Countered,
        State::ConditionallyPromised,
        State::Promised,
        State::Stated,
    ]);

    /// The set of the given states.
    pub const fn of(states: &[State]) -> StateSet {
        let mut bits = 0u16;
        let mut i = 0;
        while i < states.len() {
            bits |= 1 << (states[i] as u16);
            i += 1;
        }
        StateSet(bits)
    }

    /// Whether `s` is in the set.
    pub const fn contains(self, s: State) -> bool {
        self.0 & (1 << (s as u16)) != 0
    }

    /// The states in the set, in the seed's order.
    pub fn states(self) -> Vec<State> {
        State::ALL
            .into_iter()
            .filter(|s| self.contains(*s))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thirteen_states_five_open() {
        assert_eq!(State::ALL.len(), 13);
        let open: Vec<_> = State::ALL.iter().filter(|s| !s.is_terminal()).collect();
        assert_eq!(open.len(), 5);
        for s in State::ALL {
            assert_eq!(State::from_wire_name(s.wire_name()), Some(s));
            assert_eq!(StateSet::OPEN.contains(s), !s.is_terminal());
            assert!(StateSet::ALL.contains(s));
            assert!(!StateSet::NONE.contains(s));
        }
        assert_eq!(State::from_wire_name("mixed"), None);
    }
}
