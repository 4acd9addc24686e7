//! Declared envelope rules run (issue 29 item 3; seed 003, "What happens on abort": "Each
//! participant executes its abort_cleanup rules (reverting any staged state changes)"): a
//! custom type's `stage` and `abort_cleanup` rules are what a participant's book does on
//! prepare, commit and abort — per op, with the expected values worked out by hand from the
//! declared rules — and a declaration whose rules could not run, or whose cleanup would not
//! revert its stage, is refused with its field and code.

use accord_kernel::envelope::*;

/// A seat reservation, declared in the config's TOML: the venue's `seats` counter is debited
/// (reserved on `held`) and the envelope is listed in `bookings` (kept on commit); the
/// customer's `tickets` counter is credited and the envelope listed in `pending` (removed on
/// commit).
const SEATS: &str = r#"
name = "seat_reservation"
lifecycle = { prepare_event = "SEATS_PREPARED", prepared_event = "SEATS_CONFIRMED", commit_event = "SEATS_COMMITTED", abort_event = "SEATS_ABORTED" }
timeout = { abort_after_seconds = 30, tick_event = "CLOCK_TICK" }
[events.SEATS_PREPARED]
state = "envelope_state"
[events.SEATS_CONFIRMED]
state = "envelope_state"
[events.SEATS_COMMITTED]
state = "envelope_state"
[events.SEATS_ABORTED]
state = "envelope_state"
[events.CLOCK_TICK]
kind = "system"
state = "scheduler"
entity_expr = "event.tick_id"
payload = { tick_id = "string", instant_time = "integer" }

[[participants]]
role = "venue"
stage = [{ op = "debit", field = "seats", reserve = "held" }, { op = "append", field = "bookings" }]
abort_cleanup = [{ op = "subtract", field = "held", cap = { min = 0 } }, { op = "remove_from_list", field = "bookings", filter = "dedup" }]

[[participants]]
role = "customer"
stage = [{ op = "credit", field = "tickets" }, { op = "append", field = "pending", on_commit = "remove" }]
abort_cleanup = [{ op = "remove_from_list", field = "pending", filter = "dedup" }]
"#;

fn seats() -> EnvelopeType {
    toml::from_str(SEATS).expect("the declaration parses")
}

fn debit(account: &str, amount: u64) -> Change {
    Change::Debit {
        account: account.into(),
        amount,
    }
}

fn credit(account: &str, amount: u64) -> Change {
    Change::Credit {
        account: account.into(),
        amount,
    }
}

/// A venue book with `show` opened at 10 seats, and a customer book with `me` at 0 tickets.
fn books() -> (Book, Book) {
    let ty = seats();
    let venue_fields = rules::quantity_fields(&ty, &debit("show", 1));
    let customer_fields = rules::quantity_fields(&ty, &credit("me", 1));
    assert_eq!(
        (venue_fields.as_slice(), customer_fields.as_slice()),
        (&["seats"][..], &["tickets"][..])
    );
    let mut venue = Book::default();
    venue.open("show", 10, &venue_fields);
    let mut customer = Book::default();
    customer.open("me", 0, &customer_fields);
    (venue, customer)
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_declaration_is_valid() {
    let issues = seats().validate(Some(5));
    assert!(issues.is_empty(), "{issues:?}");
}

/// Prepare stages exactly what the rules declare; commit applies it.
/// By hand: venue debit 3 of seats=10 → held=3, bookings=[e1]; commit → seats=7, held=0,
/// bookings=[e1] (kept). Customer credit 3 → nothing but pending=[e1]; commit → tickets=3,
/// pending=[] (removed).
#[test]
fn prepare_stages_and_commit_applies_the_declared_rules() {
    let ty = seats();
    let (mut venue, mut customer) = books();
    assert_eq!(venue.prepare("e1", &ty, &[debit("show", 3)]), Vote::Ack);
    let show = &venue.accounts["show"];
    assert_eq!((show.counter("seats"), show.counter("held")), (10, 3));
    assert_eq!(show.list("bookings"), ids(&["e1"]));
    assert_eq!(
        show.counter("reserved"),
        0,
        "the declared reserve, not the default"
    );
    assert_eq!(customer.prepare("e1", &ty, &[credit("me", 3)]), Vote::Ack);
    let me = &customer.accounts["me"];
    assert_eq!(
        me.counter("tickets"),
        0,
        "a credit changes nothing before commit"
    );
    assert_eq!(me.list("pending"), ids(&["e1"]));

    venue.commit("e1").unwrap();
    customer.commit("e1").unwrap();
    let show = &venue.accounts["show"];
    assert_eq!((show.counter("seats"), show.counter("held")), (7, 0));
    assert_eq!(show.list("bookings"), ids(&["e1"]), "on_commit keep");
    let me = &customer.accounts["me"];
    assert_eq!(me.counter("tickets"), 3);
    assert!(me.list("pending").is_empty(), "on_commit remove");
    // A second commit changes nothing.
    let once = (venue.clone(), customer.clone());
    venue.commit("e1").unwrap();
    customer.commit("e1").unwrap();
    assert_eq!((venue, customer), once);
}

/// Abort runs the declared cleanup: the reservation subtracted from `held`, the id removed
/// from `bookings` and `pending`; twice is once. Another envelope's staging is untouched.
/// By hand: e1 reserves 3 and e2 reserves 4 of 10 → held=7, bookings=[e1,e2]; abort e1 →
/// held=4, bookings=[e2]; again → the same; commit e2 → seats=6, held=0, bookings=[e2].
#[test]
fn abort_runs_the_declared_cleanup_idempotently() {
    let ty = seats();
    let (mut venue, mut customer) = books();
    assert_eq!(venue.prepare("e1", &ty, &[debit("show", 3)]), Vote::Ack);
    assert_eq!(venue.prepare("e2", &ty, &[debit("show", 4)]), Vote::Ack);
    assert_eq!(customer.prepare("e1", &ty, &[credit("me", 3)]), Vote::Ack);
    assert_eq!(venue.accounts["show"].counter("held"), 7);
    assert_eq!(venue.accounts["show"].list("bookings"), ids(&["e1", "e2"]));
    // 10 − 7 = 3 left: a debit of 4 is refused with its reason.
    assert_eq!(venue.prepare("e3", &ty, &[debit("show", 4)]), Vote::Nack);
    assert!(venue.reasons["e3"].starts_with("insufficient_budget"));

    venue.abort("e1").unwrap();
    customer.abort("e1").unwrap();
    let show = &venue.accounts["show"];
    assert_eq!((show.counter("seats"), show.counter("held")), (10, 4));
    assert_eq!(show.list("bookings"), ids(&["e2"]));
    let me = &customer.accounts["me"];
    assert_eq!((me.counter("tickets"), me.list("pending").len()), (0, 0));
    let once = (venue.clone(), customer.clone());
    venue.abort("e1").unwrap();
    customer.abort("e1").unwrap();
    assert_eq!((venue.clone(), customer.clone()), once, "twice = once");
    assert_eq!(venue.aborted, ids(&["e1"]));

    venue.commit("e2").unwrap();
    let show = &venue.accounts["show"];
    assert_eq!((show.counter("seats"), show.counter("held")), (6, 0));
    assert_eq!(show.list("bookings"), ids(&["e2"]));
}

/// The cleanup rules on their own: a capped subtraction floors at its cap and a dedup list
/// reversal run again changes nothing.
/// By hand: held=2 (a stale value below the staged 5) − 5 floors at 0; bookings [a,e,a,e] →
/// [a].
#[test]
fn cleanup_rules_floor_and_dedup() {
    let staged = Staged {
        ops: vec![StagedOp::Reserve {
            account: "show".into(),
            field: "seats".into(),
            reserve: "held".into(),
            amount: 5,
        }],
        cleanup: vec![
            (
                "show".into(),
                CleanupRule::Subtract {
                    field: "held".into(),
                    cap: Some(Cap { min: 0 }),
                },
            ),
            (
                "show".into(),
                CleanupRule::RemoveFromList {
                    field: "bookings".into(),
                    filter: Some("dedup".into()),
                },
            ),
        ],
    };
    let mut accounts = std::collections::BTreeMap::from([(
        "show".to_string(),
        Account {
            counters: [("seats".to_string(), 10), ("held".to_string(), 2)].into(),
            lists: [("bookings".to_string(), ids(&["a", "e", "a", "e"]))].into(),
        },
    )]);
    rules::cleanup(&mut accounts, &staged, "e");
    assert_eq!(accounts["show"].counter("held"), 0);
    assert_eq!(accounts["show"].counter("seats"), 10);
    assert_eq!(accounts["show"].list("bookings"), ids(&["a"]));
    let once = accounts.clone();
    rules::cleanup(&mut accounts, &staged, "e");
    assert_eq!(accounts, once, "at the floor, the cleanup is idempotent");
}

/// A change no role of the type takes is NACKed with `no_rule`, and nothing is staged.
#[test]
fn a_change_without_a_role_is_nacked() {
    let mut ty = seats();
    ty.participants.truncate(1); // the venue only: no role takes a credit
    let (_, mut customer) = books();
    let before = customer.accounts.clone();
    assert_eq!(customer.prepare("e1", &ty, &[credit("me", 3)]), Vote::Nack);
    assert!(
        customer.reasons["e1"].starts_with("no_rule"),
        "{:?}",
        customer.reasons
    );
    assert_eq!(customer.accounts, before);
    assert!(customer.staged.is_empty());
}

fn errors(t: &EnvelopeType) -> Vec<(String, &'static str)> {
    t.validate(None)
        .into_iter()
        .filter(|i| i.severity == Severity::Error)
        .map(|i| (i.field, i.code))
        .collect()
}

fn with_venue(stage: &str, cleanup: &str) -> EnvelopeType {
    let text = SEATS
        .replace(
            r#"stage = [{ op = "debit", field = "seats", reserve = "held" }, { op = "append", field = "bookings" }]"#,
            &format!("stage = [{stage}]"),
        )
        .replace(
            r#"abort_cleanup = [{ op = "subtract", field = "held", cap = { min = 0 } }, { op = "remove_from_list", field = "bookings", filter = "dedup" }]"#,
            &format!("abort_cleanup = [{cleanup}]"),
        );
    toml::from_str(&text).expect("parses")
}

/// Every rule problem is refused with its field and code (checked before bind by the node).
#[test]
fn rules_that_cannot_run_as_declared_are_refused_with_their_field() {
    let sub_held = r#"{ op = "subtract", field = "held", cap = { min = 0 } }"#;
    let rm_bookings = r#"{ op = "remove_from_list", field = "bookings", filter = "dedup" }"#;
    let debit_held = r#"{ op = "debit", field = "seats", reserve = "held" }"#;
    let append = r#"{ op = "append", field = "bookings" }"#;
    // The debit's reservation is not reverted.
    assert_eq!(
        errors(&with_venue(&format!("{debit_held}, {append}"), rm_bookings)),
        [(
            "participants[0].stage[0]".to_string(),
            DECL_STAGE_NOT_REVERTED
        )]
    );
    // The append is not reverted.
    assert_eq!(
        errors(&with_venue(&format!("{debit_held}, {append}"), sub_held)),
        [(
            "participants[0].stage[1]".to_string(),
            DECL_STAGE_NOT_REVERTED
        )]
    );
    // A cleanup that reverts nothing staged (the debit reserves on `held`, not `reserved`).
    let sub_reserved = r#"{ op = "subtract", field = "reserved", cap = { min = 0 } }"#;
    assert_eq!(
        errors(&with_venue(
            &format!("{debit_held}, {append}"),
            &format!("{sub_held}, {rm_bookings}, {sub_reserved}")
        )),
        [(
            "participants[0].abort_cleanup[2].field".to_string(),
            DECL_CLEANUP_REVERTS_NOTHING
        )]
    );
    // Not idempotent: no cap.
    assert_eq!(
        errors(&with_venue(
            &format!("{debit_held}, {append}"),
            &format!(r#"{{ op = "subtract", field = "held" }}, {rm_bookings}"#)
        )),
        [(
            "participants[0].abort_cleanup[0].cap".to_string(),
            DECL_CLEANUP_NOT_IDEMPOTENT
        )]
    );
    // A field used as a counter and as a list.
    assert_eq!(
        errors(&with_venue(
            &format!(r#"{debit_held}, {{ op = "append", field = "held" }}"#),
            &format!(
                r#"{sub_held}, {{ op = "remove_from_list", field = "held", filter = "dedup" }}"#
            )
        )),
        [(
            "participants[0].stage[1].field".to_string(),
            DECL_FIELD_KIND_CONFLICT
        )]
    );
    // A role no change reaches (append only).
    assert_eq!(
        errors(&with_venue(append, rm_bookings)),
        [("participants[0].stage".to_string(), DECL_UNREACHABLE_ROLE)]
    );
    // Two roles taking debits: a debit change's role would be ambiguous; the same role twice.
    let mut t = seats();
    t.participants[1].stage[0] = StageRule::Debit {
        field: "tickets".into(),
        reserve: Some("held".into()),
    };
    t.participants[1].abort_cleanup.push(CleanupRule::Subtract {
        field: "held".into(),
        cap: Some(Cap { min: 0 }),
    });
    t.participants[1].role = "venue".into();
    assert_eq!(
        errors(&t),
        [
            ("participants[1].role".to_string(), DECL_DUPLICATE_ROLE),
            ("participants[1].stage[0]".to_string(), DECL_AMBIGUOUS_ROLE)
        ]
    );
    // An unknown key for an op does not parse (e.g. `cap` on an append).
    let bad = SEATS.replace(
        r#"{ op = "append", field = "bookings" }"#,
        r#"{ op = "append", field = "bookings", cap = { min = 0 } }"#,
    );
    assert!(toml::from_str::<EnvelopeType>(&bad).is_err());
}
