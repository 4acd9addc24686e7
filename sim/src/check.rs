//! The invariants of a run (issue 16, item 2), each broken one kept as a violation.

use crate::Tamper;
use crate::fixture::ORGS;
use crate::world::World;
use accord_node::embed::EmbeddedNode;
use accord_proto::pb::federation::v1::Signed;
use accord_proto::pb::record::v1::{AdmissionOutcome, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1::{GetCommitmentResponse, LedgerEntry};
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
    let mut ledgers: Vec<Vec<Entry>> = (0..ORGS.len())
        .map(|i| w.node(i).map(|n| ledger(w, i, &n)).unwrap_or_default())
        .collect();
    tamper_ledgers(w, &mut ledgers);
    delivered_once_in_order(w, &ledgers);
    same_view(w);
    decided(w);
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

/// Breaks the ledgers as read, for the tests that show `delivered_once_in_order` fires: the
/// first receiver's first admitted peer record removed, its opening declaration doubled, or two
/// of one author's records of one commitment swapped.
fn tamper_ledgers(w: &World, ledgers: &mut [Vec<Entry>]) {
    for (r, l) in ledgers.iter_mut().enumerate() {
        let here = ORGS[r].0;
        // A peer's applied record on a planned commitment this receiver holds: what
        // `delivered_once_in_order` checks.
        let checked = |e: &Entry| {
            org_of(&e.record) != here
                && !is_admission(&e.record)
                && e.applied
                && w.plans
                    .iter()
                    .any(|p| p.id == e.record.commitment_id && p.orgs().contains(&r))
        };
        let peer_record = |l: &[Entry]| l.iter().position(checked);
        match w.opts.tamper {
            Tamper::Undelivered => {
                if let Some(p) = peer_record(l) {
                    l.remove(p);
                    return;
                }
            }
            Tamper::DecidedTwice => {
                let opening = l.iter().position(|e| {
                    org_of(&e.record) == here
                        && matches!(&e.record.operation, Some(Operation::Admission(a)) if a.closes.is_empty())
                });
                if let Some(p) = opening {
                    let again = l[p].clone();
                    l.push(again);
                    return;
                }
            }
            Tamper::Reordered => {
                for p in 0..l.len() {
                    if !checked(&l[p]) {
                        continue;
                    }
                    let first = &l[p].record;
                    let later = (p + 1..l.len()).find(|&q| {
                        let e = &l[q];
                        checked(e)
                            && org_of(&e.record) == org_of(first)
                            && e.record.commitment_id == first.commitment_id
                    });
                    if let Some(q) = later {
                        l.swap(p, q);
                        return;
                    }
                }
            }
            _ => return,
        }
    }
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

/// The commitments of a run: the plans' and the races'.
fn commitment_ids(w: &World) -> Vec<String> {
    w.plans
        .iter()
        .map(|p| p.id.clone())
        .chain(w.races.iter().map(|r| r.id.clone()))
        .collect()
}

/// The organisations a view names in a role (issue 26 item 4: each of them holds the
/// commitment, so each must have received it).
fn named_orgs(v: &GetCommitmentResponse) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |p: Option<&PartyRef>| {
        if let Some(p) = p {
            out.insert(p.organisation.clone());
        }
    };
    for p in [
        &v.obligee,
        &v.obligor,
        &v.acceptor,
        &v.principal,
        &v.accountable,
    ] {
        add(p.as_ref());
    }
    v.candidates.iter().for_each(|p| add(Some(p)));
    v.nominees.iter().for_each(|p| add(Some(p)));
    for o in [&v.pending_delegate, &v.pending_assign]
        .into_iter()
        .flatten()
    {
        add(o.to.as_ref());
    }
    for g in &v.gates {
        add(g.owner.as_ref());
        add(g.addressed_to.as_ref());
        g.participants.iter().for_each(|p| add(p.party.as_ref()));
    }
    out
}

/// The compared fields of a view, each by name. Excluded, as legitimately local: `history`
/// (each node's ledger order of arrival, its own admission declarations, and the outcomes of
/// records that stayed at their author), replaced by `applied`, the set of applied records
/// (sorted: every holder must have applied the same records, in whatever ledger order);
/// `commitment_id` (equal by construction). Every node is read at one instant (the world sets
/// the clock offsets to 0 first), so the fields derived at the reader's now (flags, category,
/// assignment at lease end, gate status at a deadline) compare too.
fn view_fields(v: &GetCommitmentResponse) -> Vec<(&'static str, String)> {
    let mut applied: Vec<String> = v
        .history
        .iter()
        .filter(|h| h.operation != "admission" && h.outcome.as_ref().is_some_and(|o| o.applied))
        .map(|h| format!("{} {}", h.operation, hex::encode(&h.record_id)))
        .collect();
    applied.sort();
    macro_rules! f {
        ($($name:ident),* $(,)?) => {
            vec![$((stringify!($name), format!("{:?}", v.$name))),*]
        };
    }
    let mut out = f!(
        state,
        items,
        terminal,
        category,
        flags,
        next_move,
        next_move_reason,
        assignment,
        open_revokes,
        disputes,
        deferral,
        version,
        obligee,
        obligor,
        acceptor,
        forward_count,
        reopened_as,
        reopens,
        execution,
        control,
        control_holder,
        liveness,
        gates,
        candidates,
        principal,
        accountable,
        budget,
        consumed,
        budget_exhausted,
        lease_until_unix_ms,
        counter_version,
        pending_delegate,
        pending_assign,
        nominees,
        stop,
        handover,
        attention_marks,
        terms_version_number,
    );
    out.push(("applied", format!("{applied:?}")));
    out
}

/// Issue 26 item 6 (extends issue 16's `same_state`, which compared state, parties and the
/// applied history in ledger order): after quiescence every organisation holding a
/// commitment — every one whose node shows it, and every one a holder's view names in a role —
/// shows it, and shows an identical view of it ([`view_fields`]: state, items, axes,
/// category, gates, assignment, obligor, deferral, revokes, terms version, ...).
fn same_view(w: &World) {
    let mut tampered = false;
    for id in commitment_ids(w) {
        let mut views: Vec<(usize, GetCommitmentResponse)> = Vec::new();
        let mut up: Vec<usize> = Vec::new();
        for i in 0..ORGS.len() {
            let Some(n) = w.node(i) else { continue };
            up.push(i);
            if let Some(v) = n.commitment(&id) {
                views.push((i, v));
            }
        }
        if !tampered && views.len() >= 2 {
            match w.opts.tamper {
                Tamper::View => {
                    views[0].1.state = "tampered".into();
                    tampered = true;
                }
                Tamper::Missing => {
                    // Keep what it names, drop what it shows.
                    let v = views.remove(0).1;
                    views.push((
                        usize::MAX,
                        GetCommitmentResponse {
                            state: String::new(),
                            ..v
                        },
                    ));
                    tampered = true;
                }
                _ => {}
            }
        }
        let named: BTreeSet<String> = views.iter().flat_map(|(_, v)| named_orgs(v)).collect();
        let views: Vec<(usize, GetCommitmentResponse)> = views
            .into_iter()
            .filter(|(i, _)| *i != usize::MAX)
            .collect();
        for &i in &up {
            let org = ORGS[i].0;
            if named.contains(org) && !views.iter().any(|(j, _)| *j == i) {
                let by: Vec<&str> = views
                    .iter()
                    .filter(|(_, v)| named_orgs(v).contains(org))
                    .map(|(j, _)| ORGS[*j].0)
                    .collect();
                w.net.violation(format!(
                    "same_view: commitment {id}: {org} is named in it (by the views at {by:?}) but does not show it ({})",
                    quarantined_at(w, i)
                ));
            }
        }
        let Some(((first, v0), rest)) = views.split_first() else {
            continue;
        };
        let f0 = view_fields(v0);
        for (i, v) in rest {
            let diff: Vec<String> = f0
                .iter()
                .zip(view_fields(v))
                .filter(|((_, a), (_, b))| a != b)
                .map(|((name, a), (_, b))| format!("{name}: {a} vs {b}"))
                .collect();
            if !diff.is_empty() {
                w.net.violation(format!(
                    "same_view: commitment {id}: {} and {} differ: {}",
                    ORGS[*first].0,
                    ORGS[*i].0,
                    diff.join("; ")
                ));
            }
        }
    }
}

/// Issue 26 item 3: no party's record is silently dropped. After quiescence every record a
/// race acknowledged shows, at its author's node, as applied or as rejected with a code — not
/// as still waiting for its commitment's order.
fn decided(w: &World) {
    let mut tampered = false;
    for r in &w.races {
        for (i, rid) in &r.acked {
            let Some(n) = w.node(*i) else { continue };
            let Some(v) = n.commitment(&r.id) else {
                continue;
            };
            let Some(h) = v.history.iter().find(|h| h.record_id.as_ref() == rid) else {
                continue;
            };
            let mut outcome = h.outcome.clone().unwrap_or_default();
            if w.opts.tamper == Tamper::Pending && !tampered {
                outcome.applied = false;
                outcome.rejection_code = "awaiting_sequence".into();
                tampered = true;
            }
            let pending = !outcome.applied
                && (outcome.rejection_code.is_empty()
                    || outcome.rejection_code == "awaiting_sequence");
            if pending {
                w.net.violation(format!(
                    "decided: {}'s record {} ({}) on {} is still undecided at its author after quiescence ({:?})",
                    ORGS[*i].0,
                    hex::encode(rid),
                    h.operation,
                    r.id,
                    outcome.rejection_code
                ));
            }
        }
    }
}

/// Every receipt an organisation stored for its acknowledged records verifies with the peer's
/// node key and is about that record.
fn receipts_verify(w: &World) {
    let mut tampered = false;
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
            for mut s in stored {
                if w.opts.tamper == Tamper::Receipt && !tampered && !s.receipt.is_empty() {
                    let last = s.receipt.len() - 1;
                    s.receipt[last] ^= 1;
                    tampered = true;
                }
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
