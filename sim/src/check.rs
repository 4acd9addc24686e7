//! The invariants of a run (issue 16, item 2), each broken one kept as a violation.

use crate::fixture::ORGS;
use crate::world::World;
use accord_node::embed::EmbeddedNode;
use accord_proto::pb::federation::v1::Signed;
use accord_proto::pb::record::v1::{AdmissionOutcome, Record, record::Operation};
use accord_proto::pb::work::v1::LedgerEntry;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};

/// Every check, after the world is quiet.
pub async fn all(w: &World) {
    for (i, &(org, _)) in ORGS.iter().enumerate() {
        match w.node(i) {
            Some(n) => acked_present(w, i, &n),
            None => w.net.violation(format!("{org} is down after healing")),
        }
    }
    let ledgers: Vec<Vec<Entry>> = (0..ORGS.len())
        .map(|i| w.node(i).map(|n| ledger(w, i, &n)).unwrap_or_default())
        .collect();
    delivered_once_in_order(w, &ledgers);
    same_state(w);
    receipts_verify(w);
}

/// Every record the record door acknowledged to organisation `i` is in its ledger at the
/// acknowledged sequence.
pub fn acked_present(w: &World, i: usize, n: &EmbeddedNode) {
    for (id, seq) in w.acked.get(&i).into_iter().flatten() {
        match n.entries(*seq, 1) {
            Ok(e) if e.first().is_some_and(|e| e.record_id.as_ref() == id) => {}
            Ok(_) => w.net.violation(format!(
                "{}: acknowledged record {} is not at sequence {seq}",
                ORGS[i].0,
                hex::encode(id)
            )),
            Err(e) => w
                .net
                .violation(format!("{}: reading sequence {seq}: {e}", ORGS[i].0)),
        }
    }
}

/// A ledger entry, decoded.
#[derive(Debug, Clone)]
pub struct Entry {
    id: Vec<u8>,
    record: Record,
    applied: bool,
}

fn ledger(w: &World, i: usize, n: &EmbeddedNode) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let page: Vec<LedgerEntry> = match n.entries(from, 512) {
            Ok(p) => p,
            Err(e) => {
                w.net
                    .violation(format!("{}: reading the ledger: {e}", ORGS[i].0));
                return out;
            }
        };
        let Some(last) = page.last() else { break };
        from = last.sequence + 1;
        for e in page {
            let Some(s) = &e.record else { continue };
            match Record::decode(s.payload.as_ref()) {
                Ok(record) => out.push(Entry {
                    id: e.record_id.to_vec(),
                    record,
                    applied: e.outcome.as_ref().is_some_and(|o| o.applied),
                }),
                Err(err) => w
                    .net
                    .violation(format!("{}: undecodable ledger record: {err}", ORGS[i].0)),
            }
        }
    }
    out
}

fn org_of(r: &Record) -> &str {
    r.author.as_ref().map_or("", |a| a.organisation.as_str())
}

fn is_admission(r: &Record) -> bool {
    matches!(r.operation, Some(Operation::Admission(_)))
}

/// Each applied record of an author goes to every other organisation holding its commitment,
/// is decided there exactly once (one opening admission declaration) and finally admitted; a
/// receiver's records of one author and commitment are in the author's order.
fn delivered_once_in_order(w: &World, ledgers: &[Vec<Entry>]) {
    for (r, recv) in ledgers.iter().enumerate() {
        let here = ORGS[r].0;
        // Opening declarations and final decisions per peer record.
        let mut opened: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        let mut admitted: BTreeSet<Vec<u8>> = BTreeSet::new();
        for e in recv {
            if let Some(Operation::Admission(a)) = &e.record.operation
                && org_of(&e.record) == here
            {
                if a.closes.is_empty() {
                    *opened.entry(a.record_id.to_vec()).or_default() += 1;
                }
                if a.outcome == AdmissionOutcome::Admitted as i32 {
                    admitted.insert(a.record_id.to_vec());
                }
            }
        }
        for (id, count) in &opened {
            if *count != 1 {
                w.net.violation(format!(
                    "{here}: {count} opening admission declarations for record {}",
                    hex::encode(id)
                ));
            }
        }
        let position: BTreeMap<&[u8], usize> = recv
            .iter()
            .enumerate()
            .map(|(p, e)| (e.id.as_slice(), p))
            .collect();
        for (a, author) in ledgers.iter().enumerate() {
            if a == r {
                continue;
            }
            let there = ORGS[a].0;
            let mut last: BTreeMap<&str, usize> = BTreeMap::new();
            for e in author {
                let rec = &e.record;
                if org_of(rec) != there || is_admission(rec) || !e.applied {
                    continue;
                }
                let Some(plan) = w.plans.iter().find(|p| p.id == rec.commitment_id) else {
                    continue;
                };
                if !plan.orgs().contains(&r) {
                    continue;
                }
                let id = hex::encode(&e.id);
                w.net.checked_one();
                match position.get(e.id.as_slice()) {
                    None => w.net.violation(format!(
                        "{there}'s record {id} ({}) never reached {here} ({})",
                        rec.commitment_id,
                        quarantined_at(w, r)
                    )),
                    Some(&p) => {
                        if !admitted.contains(&e.id) {
                            w.net.violation(format!(
                                "{here}: {there}'s record {id} is in the ledger without an admitted declaration"
                            ));
                        }
                        let prev = last.insert(rec.commitment_id.as_str(), p);
                        if prev.is_some_and(|q| q > p) {
                            w.net.violation(format!(
                                "{here}: {there}'s records of {} are out of commitment order at {id}",
                                rec.commitment_id
                            ));
                        }
                    }
                }
                if !opened.contains_key(&e.id) {
                    w.net.violation(format!(
                        "{here}: no admission declaration for {there}'s record {id}"
                    ));
                }
            }
        }
    }
}

/// Every organisation holding a commitment derives the same state for it.
fn same_state(w: &World) {
    for p in &w.plans {
        let mut seen: Option<(String, String)> = None;
        for &i in &p.orgs() {
            let Some(n) = w.node(i) else { continue };
            let Some(v) = n.commitment(&p.id) else {
                if p.stage != crate::workload::Stage::Request {
                    w.net
                        .violation(format!("{}: commitment {} is unknown", ORGS[i].0, p.id));
                }
                continue;
            };
            let history: Vec<(String, String)> = v
                .history
                .iter()
                // A record the kernel rejected stays with its author (it is not routed), and an
                // admission declaration is each node's own link: neither is shared state.
                .filter(|h| {
                    h.operation != "admission" && h.outcome.as_ref().is_some_and(|o| o.applied)
                })
                .map(|h| (hex::encode(&h.record_id), h.operation.clone()))
                .collect();
            let state = format!(
                "state={} terminal={} obligee={:?} obligor={:?} acceptor={:?} principal={:?} history={history:?}",
                v.state, v.terminal, v.obligee, v.obligor, v.acceptor, v.principal
            );
            match &seen {
                None => seen = Some((ORGS[i].0.to_string(), state)),
                Some((org, s)) if *s != state => w.net.violation(format!(
                    "commitment {}: {org} derives {s}, {} derives {state}",
                    p.id, ORGS[i].0
                )),
                Some(_) => {}
            }
        }
    }
}

/// Every receipt an organisation stored for its acknowledged records verifies with the peer's
/// node key and is about that record.
fn receipts_verify(w: &World) {
    for (&i, acked) in &w.acked {
        let Some(n) = w.node(i) else { continue };
        for (id, _) in acked {
            let stored = match n.receipts(id) {
                Ok(s) => s,
                Err(e) => {
                    w.net.violation(format!("{}: receipts: {e}", ORGS[i].0));
                    continue;
                }
            };
            for s in stored {
                let Some(peer) = w.orgs.iter().find(|o| o.name == s.peer) else {
                    w.net
                        .violation(format!("{}: a receipt from unknown {}", ORGS[i].0, s.peer));
                    continue;
                };
                let ok = Signed::decode(s.receipt.as_slice())
                    .map_err(|e| e.to_string())
                    .and_then(|signed| {
                        accord_proto::receipt::verify(&signed, &[peer.node_key.verifier()], &[])
                    });
                match ok {
                    // An envelope receipt (no decision yet) names the envelope, not the record.
                    Ok(v) if v.decision.is_none() || v.receipt.record_id.as_ref() == id => {}
                    Ok(_) => w.net.violation(format!(
                        "{}: the receipt of {} from {} is about another record",
                        ORGS[i].0,
                        hex::encode(id),
                        s.peer
                    )),
                    Err(e) => w.net.violation(format!(
                        "{}: the receipt of {} from {} does not verify: {e}",
                        ORGS[i].0,
                        hex::encode(id),
                        s.peer
                    )),
                }
            }
        }
    }
}

/// What a receiver holds in quarantine (for the report of a record that never reached it).
fn quarantined_at(w: &World, r: usize) -> String {
    match w.node(r).map(|n| n.quarantine_list()) {
        Some(Ok(list)) if list.is_empty() => "nothing quarantined there".into(),
        Some(Ok(list)) => format!("quarantined there: {}", list.join(", ")),
        Some(Err(e)) => format!("quarantine unreadable: {e}"),
        None => "down".into(),
    }
}
