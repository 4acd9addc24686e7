//! Declared envelope rules run (issue 29 item 3; seed 003, "What happens on abort": "Each
//! participant executes its abort_cleanup rules (reverting any staged state changes)"): two
//! organisations' real nodes both declare a custom `seat_reservation` type in
//! `[[envelope_types]]`; one envelope of it commits and one aborts, and each node's accounts
//! are what its declared `stage` / `abort_cleanup` rules say — worked out by hand below.

use crate::envelopes::{change, two_orgs_with};
use accord_proto::pb::envelope::v1 as env;
use accord_tests::envelopes::{account, client, wait_phase};
use accord_tests::with_token;

/// The type, as both operators declare it: the venue (a debit) takes seats from its `seats`
/// counter through the reservation counter `held` and books the envelope in `bookings`; the
/// customer (a credit) gains `tickets` and marks the envelope `pending` until the outcome.
const SEAT_RESERVATION: &str = r#"
[[envelope_types]]
name = "seat_reservation"
lifecycle = { prepare_event = "SEATS_PREPARED", prepared_event = "SEATS_CONFIRMED", commit_event = "SEATS_COMMITTED", abort_event = "SEATS_ABORTED" }
timeout = { abort_after_seconds = 30, tick_event = "CLOCK_TICK" }
[envelope_types.events.SEATS_PREPARED]
state = "envelope_state"
[envelope_types.events.SEATS_CONFIRMED]
state = "envelope_state"
[envelope_types.events.SEATS_COMMITTED]
state = "envelope_state"
[envelope_types.events.SEATS_ABORTED]
state = "envelope_state"
[envelope_types.events.CLOCK_TICK]
kind = "system"
state = "scheduler"
entity_expr = "event.tick_id"
payload = { tick_id = "string", instant_time = "integer" }
[[envelope_types.participants]]
role = "venue"
stage = [{ op = "debit", field = "seats", reserve = "held" }, { op = "append", field = "bookings" }]
abort_cleanup = [{ op = "subtract", field = "held", cap = { min = 0 } }, { op = "remove_from_list", field = "bookings", filter = "dedup" }]
[[envelope_types.participants]]
role = "customer"
stage = [{ op = "credit", field = "tickets" }, { op = "append", field = "pending", on_commit = "remove" }]
abort_cleanup = [{ op = "remove_from_list", field = "pending", filter = "dedup" }]
"#;

/// alice (acme) starts a seat reservation: acme credits `customer_account` with `seats`
/// tickets, globex debits `seats` from `dst`.
async fn reserve(a: &accord_tests::TestNode, id: &str, customer_account: &str, seats: u64) {
    let req = env::StartRequest {
        envelope: id.into(),
        envelope_type: "seat_reservation".into(),
        participants: vec![
            env::EnvelopeParticipant {
                participant: "acme".into(),
                changes: vec![change(env::ChangeKind::Credit, customer_account, seats)],
            },
            env::EnvelopeParticipant {
                participant: "globex".into(),
                changes: vec![change(env::ChangeKind::Debit, "dst", seats)],
            },
        ],
    };
    client(a)
        .await
        .start(with_token(req, &a.party_token("alice")))
        .await
        .expect("start");
}

fn counter(a: &env::Account, field: &str) -> Option<u64> {
    a.counters.get(field).copied()
}

fn list(a: &env::Account, field: &str) -> Vec<String> {
    a.lists
        .iter()
        .find(|l| l.field == field)
        .map(|l| l.items.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_type_runs_its_declared_rules_at_both_organisations() {
    accord_tests::ensure_fresh_bins();
    // acme's `src` opens at its budget 100, globex's `dst` at 50 (the commitments' budgets).
    let (a, b) = two_orgs_with(SEAT_RESERVATION).await;

    // Commit: 2 seats. By hand from the rules — globex (venue): seats 50 − 2 = 48, held
    // 0 + 2 − 2 = 0, bookings [s-1] (kept); acme (customer): tickets 100 + 2 = 102, pending
    // [s-1] then removed on commit. The budget_transfer fields are not touched.
    reserve(&a, "s-1", "src", 2).await;
    let at_a = wait_phase(&a, "s-1", "COMMITTED").await;
    let at_b = wait_phase(&b, "s-1", "COMMITTED").await;
    let steps: Vec<&str> = at_b.history.iter().map(|h| h.event.as_str()).collect();
    assert!(steps.contains(&"SEATS_COMMITTED"), "{steps:?}");
    let dst = account(&at_b, "dst");
    assert_eq!(
        (counter(&dst, "seats"), counter(&dst, "held")),
        (Some(48), Some(0)),
        "{dst:?}"
    );
    assert_eq!(list(&dst, "bookings"), ["s-1"], "{dst:?}");
    assert_eq!(counter(&dst, "budget"), None, "{dst:?}");
    let src = account(&at_a, "src");
    assert_eq!(counter(&src, "tickets"), Some(102), "{src:?}");
    assert!(list(&src, "pending").is_empty(), "{src:?}");
    assert_eq!(
        counter(&src, "seats"),
        None,
        "the customer has no seats: {src:?}"
    );

    // Abort: acme's change is on an account it does not know, so it NACKs; globex stages on
    // prepare — held 0 + 5 = 5, bookings [s-1, s-2] — and on the abort runs its cleanup:
    // held 5 − 5 = 0, bookings [s-1]; seats stay 48. acme staged nothing; its src is as
    // after s-1.
    reserve(&a, "s-2", "nosuch", 5).await;
    let at_a = wait_phase(&a, "s-2", "ABORTED").await;
    let at_b = wait_phase(&b, "s-2", "ABORTED").await;
    assert_eq!(at_a.abort_cause, "NACK");
    assert_eq!(at_a.votes.get("acme").map(String::as_str), Some("NACK"));
    // globex applied the prepare (it stages on applying it, whether or not its ACK was
    // recorded before acme's NACK aborted the envelope), then the abort.
    let steps: Vec<&str> = at_b.history.iter().map(|h| h.event.as_str()).collect();
    assert!(steps.contains(&"SEATS_PREPARED"), "{steps:?}");
    assert!(steps.contains(&"SEATS_ABORTED"), "{steps:?}");
    let dst = account(&at_b, "dst");
    assert_eq!(
        (counter(&dst, "seats"), counter(&dst, "held")),
        (Some(48), Some(0)),
        "{dst:?}"
    );
    assert_eq!(list(&dst, "bookings"), ["s-1"], "{dst:?}");
    let src = account(&wait_phase(&a, "s-1", "COMMITTED").await, "src");
    assert_eq!(counter(&src, "tickets"), Some(102), "{src:?}");
    assert!(list(&src, "pending").is_empty(), "{src:?}");
}
