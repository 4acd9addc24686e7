//! Seed 000's "Reason codes" table, read from the seed's text (issue 29 item 4), transcribed in
//! `seed_tables/000_reason_codes.txt`: every listed value is accepted on the operation that
//! carries it (decline, cancel, notice), and a value outside the list, or none, is refused.
//!
//! A value reaches the kernel as a wire number (the node converts the protobuf enum with
//! `from_wire`); the seed's values are names. The test names each seed value through the
//! kernel's name parser (`from_wire_name`: a seed name it does not know is a failure), and
//! makes "a value not in the list" by the numbers the kernel does not name (checked to be
//! outside the seed's list by name, not by the kernel's own list).

mod common;
mod seed_tables;

use std::collections::BTreeMap;

use accord_kernel::*;
use common::*;
use seed_tables as seed;

/// The seed's table: field → values, in order.
fn table() -> BTreeMap<String, Vec<String>> {
    assert_eq!(
        seed::header(seed::REASON_CODES_000, "reason_codes"),
        ["Field", "Values"]
    );
    seed::rows(seed::REASON_CODES_000, "reason_codes")
        .into_iter()
        .map(|r| (r[0].clone(), r[1].split(", ").map(String::from).collect()))
        .collect()
}

/// The three fields, each with the operation that carries it and the state it is tried from
/// (the operations table: decline from requested by the candidate obligor; cancel and notice by
/// the obligor from promised).
struct Field {
    field: &'static str,
    from: &'static str,
    /// The record carrying the value with wire number `n`, and that value's seed name (`None`:
    /// the kernel names no value for `n`).
    by_wire: fn(i32) -> (Operation, Option<&'static str>),
    /// The record carrying the seed value `name` (`None`: the kernel does not know the name).
    by_name: fn(&str) -> Option<Operation>,
    /// What a missing value and a value outside the list are refused with.
    missing: RejectionCode,
    unknown: RejectionCode,
    /// The state after an accepted record.
    result: &'static str,
}

const FIELDS: &[Field] = &[
    Field {
        field: "decline reason",
        from: "requested",
        by_wire: |n| {
            let reason = DeclineReason::from_wire(n);
            let text = String::new();
            (Operation::Decline { reason, text }, reason.wire_name())
        },
        by_name: |s| {
            let reason = DeclineReason::from_wire_name(s)?;
            let text = String::new();
            Some(Operation::Decline { reason, text })
        },
        missing: RejectionCode::MissingReason,
        unknown: RejectionCode::UnknownReasonCode,
        result: "declined",
    },
    Field {
        field: "cancel reason",
        from: "promised",
        by_wire: |n| {
            let reason = CancelReason::from_wire(n);
            let text = String::new();
            (Operation::Cancel { reason, text }, reason.wire_name())
        },
        by_name: |s| {
            let reason = CancelReason::from_wire_name(s)?;
            let text = String::new();
            Some(Operation::Cancel { reason, text })
        },
        missing: RejectionCode::MissingReason,
        unknown: RejectionCode::UnknownReasonCode,
        result: "cancelled",
    },
    Field {
        field: "notice type",
        from: "promised",
        by_wire: |n| {
            let notice_type = NoticeType::from_wire(n);
            let text = String::new();
            let name = notice_type.wire_name();
            (Operation::Notice { notice_type, text }, name)
        },
        by_name: |s| {
            let notice_type = NoticeType::from_wire_name(s)?;
            let text = String::new();
            Some(Operation::Notice { notice_type, text })
        },
        missing: RejectionCode::MissingNoticeType,
        unknown: RejectionCode::UnknownNoticeType,
        // The operations table's notice row: "No state change".
        result: "promised",
    },
];

/// The candidate obligor / obligor of the fixture: C.
fn author() -> Party {
    Cast::c()
}

#[test]
fn every_field_is_read() {
    let t = table();
    let read: Vec<&str> = FIELDS.iter().map(|f| f.field).collect();
    assert_eq!(t.keys().map(String::as_str).collect::<Vec<_>>(), {
        let mut r = read.clone();
        r.sort();
        r
    });
    // The operations table's notice row lists the same notice types.
    let notice = seed::operations()
        .into_iter()
        .find(|r| r.operation == "notice")
        .unwrap();
    assert_eq!(
        notice.content,
        format!("notice_type: {}", t["notice type"].join(", "))
    );
}

#[test]
fn every_listed_value_is_accepted() {
    let t = table();
    for f in FIELDS {
        for value in &t[f.field] {
            let op = (f.by_name)(value)
                .unwrap_or_else(|| panic!("{}: the kernel has no value {value:?}", f.field));
            let mut w = reach_state(f.from);
            w.try_op(&author(), op, &[], &[])
                .unwrap_or_else(|e| panic!("{} {value}: refused: {e}", f.field));
            assert_eq!(w.state().map(|s| s.wire_name()), Some(f.result));
        }
    }
}

#[test]
fn a_value_not_in_the_list_is_refused() {
    let t = table();
    for f in FIELDS {
        let listed = &t[f.field];
        // A name the seed does not list is no value the kernel knows.
        for name in ["too_busy", "unknown", "", "at risk"] {
            assert!((f.by_name)(name).is_none(), "{}: {name:?}", f.field);
        }
        // Every wire number: a listed value applies, a missing one (0) and every number the
        // kernel names no listed value for are refused.
        let mut seen = Vec::new();
        for n in -2..=64 {
            let (op, name) = (f.by_wire)(n);
            let mut w = reach_state(f.from);
            let r = w.try_op(&author(), op, &[], &[]);
            match name {
                Some(name) => {
                    assert!(listed.iter().any(|v| v == name), "{}: {name}", f.field);
                    assert!(r.is_ok(), "{} {name}: {r:?}", f.field);
                    seen.push(name.to_string());
                }
                None => {
                    let want = if n == 0 { f.missing } else { f.unknown };
                    let e = r.expect_err("a value not in the list");
                    assert_eq!(e.code, want, "{} wire {n}: {e}", f.field);
                    assert_eq!(w.state().map(|s| s.wire_name()), Some(f.from));
                }
            }
        }
        seen.sort();
        let mut all = listed.clone();
        all.sort();
        assert_eq!(seen, all, "{}: each listed value has one number", f.field);
    }
}
