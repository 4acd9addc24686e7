//! The router: tails the ledger from a persisted cursor (`meta` key `federation/route_cursor`)
//! and, for each new record, O(batch):
//!
//! * queues a record this node federates ([`federated`]: its parties' applied or
//!   `awaiting_sequence` records, the Work service party's time records and, at a commitment's
//!   home, its final decisions about other organisations' records — issue 26) for every peer
//!   organisation holding its commitment ([`super::join::holders`]: its parties, candidates and
//!   home), every organisation the record names, and, for a decision, the organisation whose
//!   record it decides; before that, a holder that has not had the commitment's history gets it
//!   ([`super::join::newcomers`]). Run records (seed 002) carry the commitment their run
//!   executes as `commitment_id`, so they go to the organisations holding that commitment by the
//!   same rule (a run executing none stays local);
//! * wakes the quarantined records waiting for it (seed 000, "Federation admission": a
//!   quarantine "later closes as admitted").
//!
//! The outbox items and the cursor are written in one batch, so a crash re-routes exactly the
//! records whose items were lost.

use super::FedContext;
use super::outbox::Item;
use crate::error::Error;
use accord_proto::pb::record::v1::{self as pb, Record, record::Operation};
use accord_proto::pb::work::v1::LedgerEntry;
use accord_proto::signing::RecordId;
use prost::Message;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const CURSOR: &str = "federation/route_cursor";
const STEP: usize = 512;

/// The router's cursor: every entry below it was routed (read by the backfill's hand-over).
pub(crate) fn cursor(cx: &FedContext) -> Result<u64, Error> {
    Ok(match cx.ledger.store().meta(CURSOR)? {
        Some(v) => v.as_slice().try_into().map(u64::from_be_bytes).unwrap_or(0),
        None => 0,
    })
}

fn named_parties(r: &Record, out: &mut Vec<pb::PartyRef>) {
    use accord_proto::pb::record::v1::{assign, delegate};
    let mut push = |p: &Option<pb::PartyRef>| {
        if let Some(p) = p {
            out.push(p.clone());
        }
    };
    match &r.operation {
        Some(Operation::Request(q)) => {
            for p in [
                &q.obligee,
                &q.candidate,
                &q.acceptor,
                &q.accountable,
                &q.principal,
            ] {
                push(p);
            }
            if let Some(queue) = &q.queue {
                push(&queue.owner);
                queue.candidates.iter().for_each(|c| push(&Some(c.clone())));
            }
        }
        Some(Operation::Delegate(d)) => {
            if let Some(delegate::Step::Offer(o)) = &d.step {
                push(&o.to);
            }
        }
        Some(Operation::Assign(a)) => {
            if let Some(assign::Step::Offer(o)) = &a.step {
                push(&o.to);
            }
        }
        Some(Operation::Offer(o)) => push(&o.to),
        Some(Operation::Reassign(o)) => push(&o.to),
        Some(Operation::Nominate(n)) => push(&n.candidate),
        Some(Operation::Forward(f)) => {
            if let Some(queue) = &f.to {
                push(&queue.owner);
                queue.candidates.iter().for_each(|c| push(&Some(c.clone())));
            }
        }
        Some(Operation::OpenCondition(c)) => {
            if let Some(c) = &c.condition {
                push(&c.addressed_to);
            }
        }
        Some(Operation::PromiseConditional(c)) => {
            if let Some(c) = &c.condition {
                push(&c.addressed_to);
            }
        }
        _ => {}
    }
}

/// A ledger entry's record, decoded.
pub(crate) fn decoded(entry: &LedgerEntry) -> Option<Record> {
    Record::decode(entry.record.as_ref()?.payload.as_ref()).ok()
}

/// Whether a ledger entry is one this node federates (issue 26): a record this organisation
/// authored that the kernel applied, or that waits for its commitment's home to order it; the
/// Work service party's records (written only at a commitment's home); and, at a commitment's
/// home, its final admission decisions (admitted or rejected) about other organisations'
/// records of it — the order every other holder follows. Not: a peer's record, a record the
/// kernel rejected here, a quarantine's opening, a decision about a commitment homed elsewhere.
pub(crate) fn federated(cx: &FedContext, entry: &LedgerEntry, r: &Record) -> bool {
    if r.author.as_ref().map(|a| a.organisation.as_str()) != Some(cx.name()) {
        return false;
    }
    // A record leaves only signed: an admission declaration written without a signature
    // (`declaration::signed`) is bound by this node's checkpoint and read only here.
    if entry
        .record
        .as_ref()
        .is_none_or(|s| s.signatures.is_empty())
    {
        return false;
    }
    let outcome = entry.outcome.as_ref();
    if let Some(Operation::Admission(a)) = &r.operation {
        return a.outcome != pb::AdmissionOutcome::Quarantined as i32
            && outcome.is_some_and(|o| o.applied)
            && cx.homed_here(&r.commitment_id);
    }
    let service = r
        .author
        .as_ref()
        .is_some_and(|a| a.name == crate::projection::WORK_SERVICE);
    // The Work service party's records that time produces (and the promise a claim produces):
    // federated from the commitment's home. Its other records (envelope votes and ticks) stay
    // local as before.
    if service
        && !matches!(
            r.operation,
            Some(
                Operation::Expire(_)
                    | Operation::Accept(_)
                    | Operation::Resume(_)
                    | Operation::Unclaim(_)
                    | Operation::GateDecision(_)
                    | Operation::Promise(_)
            )
        )
    {
        return false;
    }
    outcome.is_some_and(|o| o.applied || o.rejection_code == crate::projection::AWAITING_SEQUENCE)
}

/// The peer organisations a local ledger entry goes to: none unless it is [`federated`];
/// else the organisations holding its commitment ([`super::join::holders`]: its parties, its
/// candidates, its home), those the record names, and, for a home's decision, the organisation
/// whose record it decides.
pub fn destinations(cx: &FedContext, entry: &LedgerEntry) -> Vec<String> {
    let Some(r) = decoded(entry) else {
        return Vec::new();
    };
    if !federated(cx, entry, &r) {
        return Vec::new();
    }
    let holders = super::join::holders(cx, &r.commitment_id);
    destinations_of(cx, entry, &r, holders)
}

/// `entry`'s destinations, given its commitment's `holders` ([`super::join::holders`]) and
/// that it is [`federated`].
fn destinations_of(
    cx: &FedContext,
    entry: &LedgerEntry,
    r: &Record,
    mut orgs: std::collections::BTreeSet<String>,
) -> Vec<String> {
    if let Some(Operation::Admission(a)) = &r.operation {
        orgs.insert(a.peer.clone());
    }
    let mut named = Vec::new();
    named_parties(r, &mut named);
    orgs.extend(named.into_iter().map(|p| p.organisation));
    // Commit envelopes (seed 003): the coordinator's and participants' organisations.
    orgs.extend(super::envelope_route::destinations(
        &cx.projection,
        r,
        &entry.record_id,
    ));
    orgs.remove(cx.name());
    let fed = &cx.federation;
    orgs.into_iter()
        .filter(|o| fed.peers.get(o).is_some())
        .collect()
}

/// The new cursor, the items queued per peer, and the quarantined records to wake.
type Routed = (u64, BTreeMap<String, u64>, Vec<RecordId>);

/// Routes `[from, to)`; returns the new cursor and, per peer, how many items were queued, and
/// the quarantined records to wake.
fn step(cx: &FedContext, from: u64, to: u64) -> Result<Routed, Error> {
    let store = cx.ledger.store();
    // One step at a time with the backfill's changes of which peers are behind (outbox.rs).
    let _routing = cx.federation.outbox.route_guard()?;
    let entries = store.range(from, ((to - from) as usize).min(STEP))?;
    let Some(last) = entries.last() else {
        return Ok((from, BTreeMap::new(), Vec::new()));
    };
    let next = last.sequence + 1;
    let fed = &cx.federation;
    let mut batch = crate::ledger::Batch::default();
    let mut queued = BTreeMap::new();
    let mut wake = Vec::new();
    let now = cx.clock.now_ms();
    for e in &entries {
        let Ok(id) = <RecordId>::try_from(e.record_id.as_ref()) else {
            continue;
        };
        wake.extend(fed.quarantine.waiters(&id)?);
        // A request for a commitment that quarantined records wait for (they came by another
        // peer before it: quarantine.rs); decoded only while some commitment is awaited.
        if fed.quarantine.awaits_commitments()
            && let Some(signed) = &e.record
            && let Ok(r) = Record::decode(signed.payload.as_ref())
            && matches!(r.operation, Some(Operation::Request(_)))
        {
            wake.extend(fed.quarantine.commitment_arrived(&r.commitment_id)?);
        }
        // The commitment's holders are read once per entry, for both uses.
        let dests = match decoded(e) {
            Some(r) if !r.commitment_id.is_empty() => {
                let holders = super::join::holders(cx, &r.commitment_id);
                super::join::newcomers(cx, e, &r, &holders, &mut batch, &mut queued, now)?;
                if federated(cx, e, &r) {
                    destinations_of(cx, e, &r, holders)
                } else {
                    Vec::new()
                }
            }
            Some(r) if federated(cx, e, &r) => destinations_of(cx, e, &r, Default::default()),
            _ => Vec::new(),
        };
        for peer in dests {
            let item = Item {
                ledger_seq: e.sequence,
                record_id: id,
                queued_at: now,
            };
            // A full queue or a peer being backfilled: left to the backfill (outbox.rs).
            let in_batch = queued.get(&peer).copied().unwrap_or(0);
            if fed.outbox.offer(&mut batch, &peer, &item, in_batch)? {
                *queued.entry(peer).or_insert(0) += 1;
            }
        }
    }
    store.batch_meta(&mut batch, CURSOR, &next.to_be_bytes())?;
    super::db::write(store, batch, false)?;
    Ok((next, queued, wake))
}

/// Runs until `shutdown`.
pub async fn run(cx: FedContext, shutdown: CancellationToken) {
    let mut len = cx.ledger.watch_len();
    let mut at = match cursor(&cx) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "federation router: cannot read its cursor; not routing");
            return;
        }
    };
    loop {
        let target = *len.borrow_and_update();
        let mut stalled = false;
        while at < target && !stalled {
            let n = cx.clone();
            let from = at;
            match tokio::task::spawn_blocking(move || step(&n, from, target)).await {
                Ok(Ok((next, queued, wake))) => {
                    for (peer, count) in queued {
                        cx.federation.outbox.committed(&peer, count);
                    }
                    cx.federation.quarantine.wake(wake);
                    stalled = next == at;
                    at = next;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "federation router step failed; retrying");
                    stalled = true;
                }
                Err(e) => {
                    tracing::error!(error = %e, "federation router step panicked");
                    return;
                }
            }
        }
        if stalled {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            r = len.changed() => if r.is_err() { return },
        }
    }
}

/// Routes every record up to the ledger's length now, in steps as [`run`] does (the
/// simulation's step; see `crate::embed`).
pub async fn route_all(cx: &FedContext) -> Result<(), Error> {
    let target = cx.ledger.len();
    let mut at = cursor(cx)?;
    while at < target {
        let (c, from) = (cx.clone(), at);
        let (next, queued, wake) = tokio::task::spawn_blocking(move || step(&c, from, target))
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
        for (peer, count) in queued {
            cx.federation.outbox.committed(&peer, count);
        }
        cx.federation.quarantine.wake(wake);
        if next == at {
            break;
        }
        at = next;
    }
    Ok(())
}
