//! What an authenticated caller may read (issue 8, "Authenticated reads with per-party
//! visibility"). The operator reads everything. A party reads the commitments it has a role on
//! ([`crate::projection::Projection::may_read`]: obligee, obligor, candidate, acceptor,
//! accountable, principal, queue owner, participant), every record on them and their
//! durability, and the records it authored itself. What a caller may not read is answered
//! exactly as an unknown id is (NOT_FOUND, same reason, same message), so a read is no oracle
//! for what exists.

use crate::auth::Caller;
use crate::config::Config;
use crate::error::Error;
use crate::node::Node;
use crate::projection::{Projection, WORK_SERVICE};
use accord_kernel as k;
use accord_proto::pb::record::v1::Record;
use accord_proto::pb::work::v1::LedgerEntry;
use prost::Message;

/// The read rules of one node: its organisation and the Access grants (principals and queue
/// owners by configuration) that give roles on commitments.
#[derive(Debug)]
pub struct Visibility {
    access: k::Access,
}

/// The answer for a record that is unknown or not visible to the caller.
pub fn record_not_found(id: &[u8]) -> Error {
    Error::NotFound(format!("record {}", hex::encode(id)))
}

/// The answer for a commitment that is unknown or not visible to the caller.
pub fn commitment_not_found(id: &str) -> Error {
    Error::NotFound(format!("commitment {id:?}"))
}

fn poisoned() -> Error {
    Error::Internal("projection lock poisoned".into())
}

impl Visibility {
    /// The rules for the node configured by `config` (already validated by `run`).
    pub fn new(config: &Config) -> Self {
        let access = crate::projection::access_from_config(config).unwrap_or_else(|e| {
            // Validation ran before the services are built; without grants, parties read less.
            tracing::error!(error = %e, "access from config; reads use no grants");
            k::Access::new(k::Party::new(&config.name, WORK_SERVICE))
        });
        Self { access }
    }

    /// The caller as a kernel party of `org`; `None` for the operator.
    fn party(org: &str, caller: &Caller) -> Option<k::Party> {
        match caller {
            Caller::Operator => None,
            Caller::Party(name) => Some(k::Party::new(org, name.as_str())),
        }
    }

    /// Whether `caller` may read the commitment `id`.
    pub fn commitment(&self, node: &Node, caller: &Caller, id: &str) -> Result<bool, Error> {
        let Some(who) = Self::party(node.name(), caller) else {
            return Ok(true);
        };
        let p = node.projection.read().map_err(|_| poisoned())?;
        Ok(p.may_read(id, &self.access, &who))
    }

    /// Whether `caller` may read the ledger entry.
    pub fn entry(&self, node: &Node, caller: &Caller, entry: &LedgerEntry) -> Result<bool, Error> {
        let Some(who) = Self::party(node.name(), caller) else {
            return Ok(true);
        };
        let p = node.projection.read().map_err(|_| poisoned())?;
        Ok(self.entry_in(&p, &who, entry))
    }

    /// A filter over many entries under one projection read lock (for `ListRecords`); `None`
    /// when everything passes (the operator).
    pub fn filter<'a>(
        &'a self,
        node: &'a Node,
        caller: &Caller,
    ) -> Result<Option<EntryFilter<'a>>, Error> {
        let Some(who) = Self::party(node.name(), caller) else {
            return Ok(None);
        };
        let projection = node.projection.read().map_err(|_| poisoned())?;
        Ok(Some(EntryFilter {
            rules: self,
            projection,
            who,
        }))
    }

    /// A record is visible to its author and to whoever may read its commitment. A stored
    /// record that does not decode is the operator's only.
    fn entry_in(&self, p: &Projection, who: &k::Party, entry: &LedgerEntry) -> bool {
        let Some(signed) = &entry.record else {
            return false;
        };
        let Ok(r) = Record::decode(signed.payload.as_ref()) else {
            return false;
        };
        let authored = r
            .author
            .as_ref()
            .is_some_and(|a| a.organisation == who.organisation && a.name == who.name);
        authored || p.may_read(&r.commitment_id, &self.access, who)
    }
}

/// [`Visibility`] for one party, holding the projection's read lock.
pub struct EntryFilter<'a> {
    rules: &'a Visibility,
    projection: std::sync::RwLockReadGuard<'a, Projection>,
    who: k::Party,
}

impl EntryFilter<'_> {
    /// Whether the party may read `entry`.
    pub fn allows(&self, entry: &LedgerEntry) -> bool {
        self.rules.entry_in(&self.projection, &self.who, entry)
    }
}

impl Visibility {
    /// Whether `who` may read commitment `id` in `p` (for listings that hold one read lock).
    pub fn may_read(&self, p: &Projection, who: &k::Party, id: &str) -> bool {
        p.may_read(id, &self.access, who)
    }
}
