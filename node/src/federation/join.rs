//! Joining mid-way (issue 26, item 4): when an organisation comes to hold a commitment — a
//! record named one of its parties (delegate, assign, offer, forward, nominate, a claim from its
//! queue, a gate or condition participant, a principal or accountable named) — this node sends it
//! every record of the commitment it authored itself and federates (its parties' records, its
//! Work service party's, and, at the commitment's home, its decisions about other
//! organisations' records), in ledger order, before anything later. Every holder does the same
//! on seeing the join, so the newcomer receives the whole history, each record from its author
//! with the proof that it is in its author's log, and orders it by the home's decisions.
//!
//! Which organisations a commitment's records were already sent to is kept in `meta`
//! (`federation/sent/<commitment>\0<org>`), written in the router's batch, so a restart does not
//! send a history twice (a receiver would answer duplicates with their receipts anyway); memory
//! holds a bounded cache of those keys ([`SENT_CACHED`] pairs).

use super::FedContext;
use super::outbox::Item;
use crate::error::Error;
use accord_proto::pb::record::v1::Record;
use accord_proto::pb::work::v1::LedgerEntry;
use accord_proto::signing::RecordId;
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

fn sent_key(commitment: &str, org: &str) -> String {
    format!("federation/sent/{commitment}\0{org}")
}

/// How many (commitment, organisation) pairs [`Sent`] keeps in memory. The store is the truth;
/// the memory only spares a RocksDB read for the commitments being worked on now, so it is
/// bounded however many commitments the node has ever shared (issue 26: nothing grows without
/// bound with the ledger).
const SENT_CACHED: usize = 65_536;

/// The router's memory of which organisations hold which commitment's history here: a bounded
/// cache over the `meta` keys, forgetting the oldest pairs first.
#[derive(Debug, Default)]
pub(crate) struct Sent(std::sync::Mutex<SentCache>);

#[derive(Debug, Default)]
pub(crate) struct SentCache {
    set: HashSet<(String, String)>,
    order: VecDeque<(String, String)>,
}

impl SentCache {
    fn insert(&mut self, key: (String, String)) {
        if !self.set.insert(key.clone()) {
            return;
        }
        self.order.push_back(key);
        while self.order.len() > SENT_CACHED {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }
}

impl Sent {
    fn contains(&self, cx: &FedContext, commitment: &str, org: &str) -> Result<bool, Error> {
        let key = (commitment.to_string(), org.to_string());
        if self.0.lock().map(|s| s.set.contains(&key)).unwrap_or(false) {
            return Ok(true);
        }
        let found = cx
            .ledger
            .store()
            .meta(&sent_key(commitment, org))?
            .is_some();
        if found && let Ok(mut s) = self.0.lock() {
            s.insert(key);
        }
        Ok(found)
    }

    fn mark(
        &self,
        cx: &FedContext,
        batch: &mut crate::ledger::Batch,
        commitment: &str,
        org: &str,
    ) -> Result<(), Error> {
        cx.ledger
            .store()
            .batch_meta(batch, &sent_key(commitment, org), &[])?;
        if let Ok(mut s) = self.0.lock() {
            s.insert((commitment.to_string(), org.to_string()));
        }
        Ok(())
    }
}

/// The peer organisations holding `commitment` here: every party with a role on it (now or
/// before), its candidates, and its home (issue 26: the home orders its records, so it always
/// receives them).
pub(crate) fn holders(cx: &FedContext, commitment: &str) -> BTreeSet<String> {
    let mut orgs = BTreeSet::new();
    // The projection's lock is held for the in-memory part only: the scan of past readers
    // below reads RocksDB, and the ledger writer waits for this lock to publish.
    let db = {
        let Ok(p) = cx.projection.read() else {
            return orgs;
        };
        let Some(c) = p.get(commitment) else {
            return orgs;
        };
        for party in accord_kernel::parties_with_role(&c)
            .into_iter()
            .chain(c.parties())
            .chain(c.candidate_obligors())
        {
            orgs.insert(party.organisation);
        }
        orgs.insert(c.home_org(cx.name()).to_string());
        p.persisted().cloned()
    };
    if let Some(db) = db {
        match db.past_organisations(commitment) {
            Ok(past) => orgs.extend(past),
            Err(e) => tracing::error!(error = %e, %commitment, "past holders not read"),
        }
    }
    orgs.remove(cx.name());
    orgs.retain(|o| cx.federation.peers.get(o).is_some());
    orgs
}

/// Before `entry` is routed: for every peer organisation that holds its commitment and has not
/// been sent the commitment's history, queues this node's earlier federated records of it (in
/// ledger order) and remembers the organisation. `queued` counts the items per peer in `batch`.
pub(crate) fn newcomers(
    cx: &FedContext,
    entry: &LedgerEntry,
    record: &Record,
    holders: &BTreeSet<String>,
    batch: &mut crate::ledger::Batch,
    queued: &mut BTreeMap<String, u64>,
    now: i64,
) -> Result<(), Error> {
    let commitment = &record.commitment_id;
    if commitment.is_empty() {
        return Ok(());
    }
    let sent = &cx.federation.sent;
    let mut new = Vec::new();
    for org in holders {
        if !sent.contains(cx, commitment, org)? {
            new.push(org.clone());
        }
    }
    if new.is_empty() {
        return Ok(());
    }
    let history = cx
        .projection
        .read()
        .map(|p| p.history(commitment))
        .unwrap_or_default();
    let store = cx.ledger.store();
    let mut seen = HashSet::new();
    for h in history {
        if h.sequence >= entry.sequence || !seen.insert(h.sequence) {
            continue;
        }
        let Some(e) = store.get(h.sequence)? else {
            continue;
        };
        let Some(r) = super::route::decoded(&e) else {
            continue;
        };
        if !super::route::federated(cx, &e, &r) {
            continue;
        }
        let Ok(id) = <RecordId>::try_from(e.record_id.as_ref()) else {
            continue;
        };
        let item = Item {
            ledger_seq: e.sequence,
            record_id: id,
            queued_at: now,
        };
        // Queued even while the peer is behind (a peer just added is backfilled from where it
        // was added, with the holders of that time: it would never get this history). One
        // commitment's history is bounded; it may exceed `outbox_max` by that much.
        for org in &new {
            cx.federation.outbox.enqueue(batch, org, &item)?;
            *queued.entry(org.clone()).or_insert(0) += 1;
        }
    }
    for org in &new {
        tracing::info!(%commitment, peer = %org, "federation: sending a commitment's history to a new holder");
        sent.mark(cx, batch, commitment, org)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache keeps at most [`SENT_CACHED`] pairs, forgetting the oldest: after one more
    /// pair than the bound, the first is gone and the last two are kept.
    #[test]
    fn the_sent_cache_is_bounded_and_forgets_the_oldest() {
        let mut c = SentCache::default();
        let key = |i: usize| (format!("c{i}"), "globex".to_string());
        for i in 0..=SENT_CACHED {
            c.insert(key(i));
        }
        // A repeated pair takes no second place.
        c.insert(key(SENT_CACHED));
        assert_eq!(c.set.len(), SENT_CACHED);
        assert_eq!(c.order.len(), SENT_CACHED);
        assert!(!c.set.contains(&key(0)));
        assert!(c.set.contains(&key(1)));
        assert!(c.set.contains(&key(SENT_CACHED)));
    }
}
