//! Seed 000's "Revoke requests" table, read from the seed's text (issue 29 item 4), transcribed
//! in `seed_tables/000_revoke.txt`, with the operations table's rows for the revoke requests and
//! "allow, refuse" (`seed_tables/000_operations.txt`).
//!
//! For each request, from each state where it may be asked ([`ASKED_FROM`]): only the party
//! "Asked by" names may open it (every other party of the cast is refused for its role), only
//! the party "Asked of" names may allow or refuse it, and allow and refuse give the row's "On
//! allow" and "On refuse" — including the follow-up operations those cells promise ("the
//! obligee can still release", "the obligor can still cancel"). The fixture: O (obligee)
//! requests of candidate C, acceptor A, accountable X, principal PR ([`basic_request`]).

mod common;
mod seed_tables;

use accord_kernel::*;
use common::*;
use seed_tables as seed;

/// One row of the seed's revoke table.
struct Row {
    request: String,
    asked_by: String,
    asked_of: String,
    on_allow: String,
    on_refuse: String,
}

fn revokes() -> Vec<Row> {
    assert_eq!(
        seed::header(seed::REVOKE_000, "revokes"),
        ["Request", "Asked by", "Asked of", "On allow", "On refuse"]
    );
    seed::rows(seed::REVOKE_000, "revokes")
        .into_iter()
        .map(|r| Row {
            request: r[0].clone(),
            asked_by: r[1].clone(),
            asked_of: r[2].clone(),
            on_allow: r[3].clone(),
            on_refuse: r[4].clone(),
        })
        .collect()
}

/// The party an "Asked by" / "Asked of" cell names in the fixture, from `state`. The candidate
/// and, once it promised, the obligor is C; the seed's "Candidate or obligor" is C either way.
fn named(cell: &str) -> &'static str {
    match cell {
        "Obligee" => "O",
        "Obligor" | "Candidate or obligor" => "C",
        "Acceptor" => "A",
        other => panic!("no reading of the party cell {other:?}"),
    }
}

/// The states each request is asked from in this test. The table gives no "From" column; these
/// are the states where the thing revoked exists and is the current one: the request while it
/// is open to the candidate and after the promise ("Candidate or obligor"), the promise (plain
/// or conditional), the statement, the acceptance.
const ASKED_FROM: &[(&str, &[&str])] = &[
    ("revoke_request", &["requested", "promised"]),
    ("revoke_promise", &["conditionally_promised", "promised"]),
    ("revoke_statement", &["stated"]),
    ("revoke_acceptance", &["accepted"]),
];

/// The revoke record for a request's wire name (the seed's "Required content": "Reason").
fn revoke(request: &str, reason: &str) -> Operation {
    let reason = reason.to_string();
    match request {
        "revoke_request" => Operation::RevokeRequest { reason },
        "revoke_promise" => Operation::RevokePromise { reason },
        "revoke_statement" => Operation::RevokeStatement { reason },
        "revoke_acceptance" => Operation::RevokeAcceptance { reason },
        other => panic!("no record for {other}"),
    }
}

fn allow() -> Operation {
    // "Reason, for refuse": allow needs none.
    Operation::Allow {
        reason: String::new(),
        reopening_commitment_id: String::new(),
    }
}

fn refuse(reason: &str) -> Operation {
    Operation::Refuse {
        reason: reason.into(),
    }
}

fn state_of(w: &World) -> &'static str {
    w.state().map(|s| s.wire_name()).unwrap_or("mixed")
}

/// Every party but `name` tries `op` on `w`; each must be refused with [`refusal_for`].
fn only(w: &mut World, name: &str, op: &Operation, basis: &[RecordId], ctx: &str) {
    for (other, party) in named_cast() {
        if other == name {
            continue;
        }
        match w.try_op(&party, op.clone(), basis, &[]) {
            Ok(_) => panic!("{ctx}: {other} was let in; only {name} may"),
            Err(e) => assert_eq!(e.code, refusal_for(other), "{ctx}: {other}: {e}"),
        }
    }
}

/// A world in `from` with the row's revoke request open (asked by its party).
fn opened(row: &Row, from: &str) -> (World, RecordId) {
    let mut w = reach_state(from);
    let id = w.ok_with(
        &cast_party(named(&row.asked_by)),
        revoke(&row.request, "changed our mind"),
        &[],
        &[],
    );
    assert_eq!(
        state_of(&w),
        from,
        "{}: opening changes no state",
        row.request
    );
    (w, id)
}

/// The seed's "On allow" cell, checked after the allow (`w` was in `from`).
fn check_on_allow(cell: &str, w: &World, from: &str, revoke_id: RecordId, ctx: &str) {
    match cell {
        "withdrawn" | "promised" => assert_eq!(state_of(w), cell, "{ctx}"),
        "withdrawn, not counted as a cancel" => {
            assert_eq!(state_of(w), "withdrawn", "{ctx}");
            assert!(!w.view().counts_as_cancel, "{ctx}: counted as a cancel");
        }
        "The terminal outcome stays; a linked reopening commitment starts" => {
            assert_eq!(state_of(w), from, "{ctx}: the terminal outcome stays");
            let starts: Vec<_> = w
                .effects
                .iter()
                .filter_map(|e| match e {
                    Effect::StartReopening { link, commitment } => Some((link, commitment)),
                    _ => None,
                })
                .collect();
            let [(link, reopening)] = starts[..] else {
                panic!("{ctx}: one reopening commitment starts: {:?}", w.effects)
            };
            assert_eq!(link.commitment, w.c().id, "{ctx}: linked from this one");
            assert_eq!(link.revoke, revoke_id, "{ctx}: linked to the revoke");
            assert_eq!(reopening.reopens.as_ref(), Some(link), "{ctx}: linked back");
            assert!(w.c().reopened_by.contains(link), "{ctx}: the link is kept");
            assert_eq!(
                reopening.state().map(|s| s.wire_name()),
                Some("requested"),
                "{ctx}: the reopening commitment starts"
            );
        }
        other => panic!("no reading of On allow {other:?}"),
    }
}

/// The seed's "On refuse" cell, checked after the refuse, with its follow-up operation.
fn check_on_refuse(cell: &str, w: &mut World, from: &str, revoke_id: RecordId, ctx: &str) {
    match cell {
        "Continues; the obligee can still release" => {
            assert_eq!(state_of(w), from, "{ctx}: continues");
            let r = Operation::Release {
                reason: String::new(),
            };
            w.ok(&Cast::o(), r);
            assert_eq!(state_of(w), "released", "{ctx}: the obligee released");
        }
        "Continues; the obligor can still cancel" => {
            assert_eq!(state_of(w), from, "{ctx}: continues");
            let r = Operation::Cancel {
                reason: CancelReason::Other,
                text: String::new(),
            };
            w.ok(&Cast::c(), r);
            assert_eq!(state_of(w), "cancelled", "{ctx}: the obligor cancelled");
        }
        "Stays stated" => assert_eq!(state_of(w), "stated", "{ctx}"),
        "A dispute mark" => {
            assert_eq!(state_of(w), from, "{ctx}: no state change");
            assert!(
                w.c().disputes.iter().any(|d| d.disputed == revoke_id),
                "{ctx}: a dispute mark on the revoke request"
            );
        }
        other => panic!("no reading of On refuse {other:?}"),
    }
}

#[test]
fn every_row_is_read() {
    let rows = revokes();
    let names: Vec<&str> = rows.iter().map(|r| r.request.as_str()).collect();
    let read: Vec<&str> = ASKED_FROM.iter().map(|(r, _)| *r).collect();
    assert_eq!(names, read, "the seed's four revoke requests, in order");
    // The operations table names the same four in its revoke row.
    let ops = seed::operations();
    let row = ops
        .iter()
        .find(|r| r.operation.starts_with("revoke_request"))
        .expect("the operations table's revoke row");
    assert_eq!(row.operation.split(", ").collect::<Vec<_>>(), names);
    for r in &rows {
        assert_eq!(revoke(&r.request, "x").wire_name(), r.request);
    }
}

#[test]
fn only_asked_by_opens_a_revoke_request() {
    for row in revokes() {
        for from in ASKED_FROM
            .iter()
            .find(|(r, _)| *r == row.request)
            .unwrap()
            .1
        {
            let ctx = format!("{} from {from}", row.request);
            let mut w = reach_state(from);
            let by = named(&row.asked_by);
            only(&mut w, by, &revoke(&row.request, "because"), &[], &ctx);
            // The operations table's "Required content" for the revoke row: "Reason".
            let e = w
                .try_op(&cast_party(by), revoke(&row.request, " "), &[], &[])
                .expect_err("a revoke request without a reason");
            assert_eq!(e.code, RejectionCode::MissingReason, "{ctx}: {e}");
            opened(&row, from);
        }
    }
}

#[test]
fn only_asked_of_allows_and_allow_gives_on_allow() {
    for row in revokes() {
        for from in ASKED_FROM
            .iter()
            .find(|(r, _)| *r == row.request)
            .unwrap()
            .1
        {
            let ctx = format!("allow {} from {from}", row.request);
            let (mut w, id) = opened(&row, from);
            let of = named(&row.asked_of);
            only(&mut w, of, &allow(), &[id], &ctx);
            w.ok_with(&cast_party(of), allow(), &[id], &[]);
            check_on_allow(&row.on_allow, &w, from, id, &ctx);
        }
    }
}

#[test]
fn only_asked_of_refuses_and_refuse_gives_on_refuse() {
    for row in revokes() {
        for from in ASKED_FROM
            .iter()
            .find(|(r, _)| *r == row.request)
            .unwrap()
            .1
        {
            let ctx = format!("refuse {} from {from}", row.request);
            let (mut w, id) = opened(&row, from);
            let of = named(&row.asked_of);
            only(&mut w, of, &refuse("no"), &[id], &ctx);
            w.ok_with(&cast_party(of), refuse("no"), &[id], &[]);
            check_on_refuse(&row.on_refuse, &mut w, from, id, &ctx);
        }
    }
}

/// The operations table's row "allow, refuse": "The other side of a revoke request", "An open
/// revoke request", "Reason, for refuse".
#[test]
fn allow_and_refuse_need_an_open_revoke_request_and_refuse_a_reason() {
    let ops = seed::operations();
    let row = ops
        .iter()
        .find(|r| r.operation == "allow, refuse")
        .expect("the operations table's allow, refuse row");
    assert_eq!(row.from, "An open revoke request");
    assert_eq!(row.content, "Reason, for refuse");
    for r in revokes() {
        let from = ASKED_FROM.iter().find(|(x, _)| *x == r.request).unwrap().1[0];
        let of = cast_party(named(&r.asked_of));
        // Without an open revoke request, neither applies.
        let mut w = reach_state(from);
        for op in [allow(), refuse("no")] {
            assert!(
                w.try_op(&of, op, &[], &[]).is_err(),
                "{} none open",
                r.request
            );
        }
        // Refuse without a reason is refused; the request stays open and is then allowed.
        let (mut w, id) = opened(&r, from);
        let e = w
            .try_op(&of, refuse(""), &[id], &[])
            .expect_err("a refuse without a reason");
        assert_eq!(e.code, RejectionCode::MissingReason, "{}: {e}", r.request);
        w.ok_with(&of, allow(), &[id], &[]);
        // Once closed, the request is no longer open: a second answer is refused.
        assert!(w.try_op(&of, refuse("no"), &[id], &[]).is_err());
    }
}
