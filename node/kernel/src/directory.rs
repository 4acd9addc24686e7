//! What the node knows beyond one commitment: [`Directory`] (for the checks that look across
//! commitments) and the result of [`apply_with`](crate::apply_with).

use std::collections::{BTreeMap, HashMap};

use crate::commitment::Commitment;
use crate::effect::Effect;

/// The commitments the node knows, for the checks that look beyond one commitment (a taken
/// reopening id; an admission about a record of no known commitment).
pub trait Directory {
    /// The derived state of commitment `id`, if it exists.
    fn commitment(&self, id: &str) -> Option<&Commitment>;
}

impl Directory for HashMap<String, Commitment> {
    fn commitment(&self, id: &str) -> Option<&Commitment> {
        self.get(id)
    }
}

impl Directory for BTreeMap<String, Commitment> {
    fn commitment(&self, id: &str) -> Option<&Commitment> {
        self.get(id)
    }
}

/// A directory of at most one commitment (what [`apply`] knows).
pub(crate) struct Single<'a>(pub(crate) Option<&'a Commitment>);

impl Directory for Single<'_> {
    fn commitment(&self, id: &str) -> Option<&Commitment> {
        self.0.filter(|c| c.id == id)
    }
}

/// The result of [`apply_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The commitment's new state; `None` for a record that acts on no known commitment (an
    /// admission declaration about a record whose commitment this node does not know).
    pub next: Option<Commitment>,
    /// The effects to act on.
    pub effects: Vec<Effect>,
}
