//! Access: who acts for which organisation, who holds which authority, and who the Work service
//! party is (seed 000, "Operations": "An operation is valid only if the author holds the role, the
//! commitment's state allows it, and Access authorizes it"). Built by the node from its config.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::record::{Party, Queue};

/// Which names may act for one organisation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Members {
    /// Any name: the node authenticated the organisation itself (e.g. a peer by its keys).
    Any,
    /// Only these names.
    Only(BTreeSet<String>),
}

/// An authority that Access can confer on a party.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    /// May write `administrative_close` on any commitment.
    AdministrativeClose,
    /// Acts as principal on every commitment (in addition to the principal a request names).
    Principal,
    /// Owns the named queue.
    QueueOwner {
        /// The queue's name.
        queue: String,
    },
    /// An external claimant (seed 000, "Other state axes": "Execution, control and liveness
    /// come from executor or external Claims"): may write `observation` claims about the work
    /// of any commitment whose obligor acts for `organisation`. Its claims move the execution,
    /// control and liveness axes; they never confirm a stop ("'Stopped' appears on the
    /// execution axis only when the executor confirms it").
    Observer {
        /// The obligor's organisation whose work it observes.
        organisation: String,
    },
}

/// One grant of an authority to a party.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Grant {
    /// The authority.
    pub authority: Authority,
    /// The party holding it.
    pub party: Party,
}

/// Access, as configured on this node.
///
/// ```
/// use accord_kernel::{Access, Authority, Party};
/// let access = Access::new(Party::new("acme", "work-service"))
///     .with_members("acme", ["alice", "bob"])
///     .with_organisation("globex") // any name signed by globex's keys
///     .with_grant(Authority::AdministrativeClose, Party::new("acme", "ops"))
///     .with_grant(Authority::QueueOwner { queue: "support".into() }, Party::new("acme", "bob"));
/// assert!(access.acts_for(&Party::new("globex", "carol")));
/// assert!(!access.acts_for(&Party::new("acme", "mallory")));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    /// The Work service party: the only author of expire, implicit accept, service resume and
    /// service unclaim; it also acts as the distribution policy (`offer`) and writes admissions.
    pub service: Party,
    /// Organisation -> which names act for it. An organisation not listed acts for nobody.
    #[serde(default)]
    pub organisations: BTreeMap<String, Members>,
    /// Authorities held.
    #[serde(default)]
    pub grants: BTreeSet<Grant>,
    /// A party whose authorities its own organisation's node has already checked: the author of
    /// a record this node applies on the commitment's home's word (the home's own records, and
    /// the records the home admitted). Grants are each organisation's own configuration, which
    /// no other node holds, so a node following the home takes the home's verdict on them
    /// instead of reading its own grants — else one node applies an `administrative_close` its
    /// peer refuses, and they disagree for good (issue 26, "one order for conflicting records").
    #[serde(skip)]
    pub vouched: Option<Party>,
}

impl Access {
    /// Access with only the Work service party.
    pub fn new(service: Party) -> Self {
        Access {
            service,
            organisations: BTreeMap::new(),
            grants: BTreeSet::new(),
            vouched: None,
        }
    }

    /// This Access, with `party`'s authorities taken as checked by the commitment's home
    /// ([`Access::vouched`]).
    pub fn vouching(&self, party: &Party) -> Access {
        Access {
            vouched: Some(party.clone()),
            ..self.clone()
        }
    }

    /// Any name may act for `organisation`.
    pub fn with_organisation(mut self, organisation: impl Into<String>) -> Self {
        self.organisations.insert(organisation.into(), Members::Any);
        self
    }

    /// These names (in addition to any already listed) act for `organisation`.
    pub fn with_members<I, S>(mut self, organisation: impl Into<String>, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let entry = self
            .organisations
            .entry(organisation.into())
            .or_insert_with(|| Members::Only(BTreeSet::new()));
        if let Members::Only(set) = entry {
            set.extend(names.into_iter().map(Into::into));
        }
        self
    }

    /// Grants `authority` to `party`.
    pub fn with_grant(mut self, authority: Authority, party: Party) -> Self {
        self.grants.insert(Grant { authority, party });
        self
    }

    /// Whether `party` may act for the organisation it claims. The Work service party always may.
    pub fn acts_for(&self, party: &Party) -> bool {
        if *party == self.service {
            return true;
        }
        match self.organisations.get(&party.organisation) {
            Some(Members::Any) => !party.name.is_empty(),
            Some(Members::Only(names)) => names.contains(&party.name),
            None => false,
        }
    }

    /// Whether `party` holds `authority`.
    pub fn holds(&self, authority: &Authority, party: &Party) -> bool {
        self.vouched.as_ref() == Some(party)
            || self
                .grants
                .iter()
                .any(|g| g.authority == *authority && g.party == *party)
    }

    /// Whether `party` owns `queue`: when Access grants ownership of a queue of that name, only
    /// the grantees own it; otherwise the owner the queue declares does.
    pub fn owns_queue(&self, queue: &Queue, party: &Party) -> bool {
        let authority = Authority::QueueOwner {
            queue: queue.name.clone(),
        };
        let configured = self.grants.iter().any(|g| g.authority == authority);
        if self.vouched.as_ref() == Some(party) {
            true
        } else if configured {
            self.holds(&authority, party)
        } else {
            queue.owner.as_ref() == Some(party)
        }
    }

    /// Every party [`Access::owns_queue`] admits for `queue`, in a fixed order: the vouched
    /// author (only while this Access applies that author's record), then the grantees when
    /// Access grants ownership of a queue of that name, else the declared owner. "Whose move"
    /// names these (seed 000: "requested — Candidate obligor, or queue owner"), so it names
    /// exactly the parties whose queue-owner operations `apply` accepts.
    pub fn queue_owners(&self, queue: &Queue) -> Vec<Party> {
        let authority = Authority::QueueOwner {
            queue: queue.name.clone(),
        };
        let mut out: Vec<Party> = self.vouched.iter().cloned().collect();
        let granted: Vec<&Party> = self
            .grants
            .iter()
            .filter(|g| g.authority == authority)
            .map(|g| &g.party)
            .collect();
        let owners: Vec<&Party> = if granted.is_empty() {
            queue.owner.iter().collect()
        } else {
            granted
        };
        for p in owners {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_ownership_prefers_access() {
        let q = Queue {
            name: "q".into(),
            owner: Some(Party::new("a", "declared")),
            ..Queue::default()
        };
        let open = Access::new(Party::new("a", "svc"));
        assert!(open.owns_queue(&q, &Party::new("a", "declared")));
        let strict = open.with_grant(
            Authority::QueueOwner { queue: "q".into() },
            Party::new("a", "granted"),
        );
        assert!(!strict.owns_queue(&q, &Party::new("a", "declared")));
        assert!(strict.owns_queue(&q, &Party::new("a", "granted")));
    }

    /// `queue_owners` lists exactly the parties `owns_queue` admits: declared owner, grantees,
    /// and the vouched author.
    #[test]
    fn queue_owners_are_exactly_who_owns_the_queue() {
        let q = Queue {
            name: "q".into(),
            owner: Some(Party::new("a", "declared")),
            ..Queue::default()
        };
        let everyone = [
            Party::new("a", "declared"),
            Party::new("a", "granted"),
            Party::new("b", "vouched"),
            Party::new("c", "stranger"),
        ];
        let open = Access::new(Party::new("a", "svc"));
        let strict = open.clone().with_grant(
            Authority::QueueOwner { queue: "q".into() },
            Party::new("a", "granted"),
        );
        let other_queue = open.clone().with_grant(
            Authority::QueueOwner { queue: "r".into() },
            Party::new("a", "granted"),
        );
        let vouching = strict.vouching(&Party::new("b", "vouched"));
        for access in [open, strict, other_queue, vouching] {
            let listed = access.queue_owners(&q);
            for p in &everyone {
                assert_eq!(
                    access.owns_queue(&q, p),
                    listed.contains(p),
                    "{p} under {access:?}"
                );
            }
        }
    }

    #[test]
    fn members() {
        let a = Access::new(Party::new("n", "svc"))
            .with_members("a", ["x"])
            .with_organisation("b");
        assert!(a.acts_for(&Party::new("n", "svc")));
        assert!(a.acts_for(&Party::new("a", "x")));
        assert!(!a.acts_for(&Party::new("a", "y")));
        assert!(a.acts_for(&Party::new("b", "anyone")));
        assert!(!a.acts_for(&Party::new("b", "")));
        assert!(!a.acts_for(&Party::new("c", "x")));
    }
}
