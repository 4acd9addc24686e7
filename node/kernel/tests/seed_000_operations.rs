//! Seed 000's "Operations" table, read from the seed's text (issue 29 item 4), transcribed in
//! `seed_tables/000_operations.txt`. For every row, from every state its "From" names, the
//! operation is applied through records by each party its "Who" names (it must succeed and
//! give the row's "Result") and by every other party of the cast (it must be refused: "An
//! operation is valid only if the author holds the role … An invalid operation is rejected").
//!
//! Who the "Who" words name is [`WHO`]: each reading quotes the column it reads (held to the
//! file) and names parties of the fixture — the commitment is always requested by O (obligee)
//! of candidate C, acceptor A, accountable X, principal PR; D holds the administrative-close
//! authority in Access; N1 and N2 are the parties a delegate and an assign are offered to.
//! Nothing here reads the kernel's rule or role tables.

mod common;
mod seed_tables;

use std::collections::{BTreeMap, BTreeSet};

use accord_kernel::*;
use common::*;
use seed_tables as seed;

/// The states where the fixture's commitment has an obligor (C promised, conditionally or not).
const WITH_OBLIGOR: [&str; 3] = ["conditionally_promised", "promised", "stated"];

/// How a "Who" cell is read: the parties it names from a given state; `except` are parties the
/// cell names only under a condition the row states (they are left out of both checks).
struct Reading {
    who: &'static str,
    names: fn(&str) -> Vec<&'static str>,
    except: &'static [&'static str],
}

fn obligor(state: &str) -> Vec<&'static str> {
    if WITH_OBLIGOR.contains(&state) {
        vec!["C"]
    } else {
        vec![]
    }
}

/// The seed's "Who" cells and what they name. Rows whose cell is "See below" / "See
/// amendments" are read by other tables and are listed in [`NOT_HERE`].
const WHO: &[Reading] = &[
    Reading {
        who: "Obligee, or someone on its behalf",
        // O2 is of O's organisation.
        names: |_| vec!["O", "O2"],
        except: &[],
    },
    Reading {
        who: "Candidate obligor",
        names: |_| vec!["C"],
        except: &[],
    },
    Reading {
        who: "Candidate obligor (from requested) or obligee (from countered)",
        names: |s| match s {
            "requested" => vec!["C"],
            "countered" => vec!["O"],
            _ => vec![],
        },
        except: &[],
    },
    Reading {
        who: "Obligee",
        names: |_| vec!["O"],
        except: &[],
    },
    Reading {
        who: "Obligor",
        names: obligor,
        except: &[],
    },
    Reading {
        who: "Acceptor",
        names: |_| vec!["A"],
        except: &[],
    },
    Reading {
        who: "Obligor (offer) plus new obligor (acceptance)",
        names: obligor,
        except: &[],
    },
    Reading {
        who: "Obligee (offer) plus new obligee (acceptance)",
        names: |_| vec!["O"],
        except: &[],
    },
    Reading {
        who: "The party a reject or open revoke_acceptance is aimed at (the obligor)",
        names: obligor,
        except: &[],
    },
    Reading {
        who: "Obligee or obligor",
        names: |s| [vec!["O"], obligor(s)].concat(),
        except: &[],
    },
    Reading {
        who: "Obligee or obligor; the Work service party when the return date arrives",
        names: |s| [vec!["O"], obligor(s)].concat(),
        // The Work service party only when the return date arrives (this defer has none).
        except: &["S"],
    },
    Reading {
        who: "Obligee or principal",
        names: |_| vec!["O", "PR"],
        except: &[],
    },
    Reading {
        who: "The Work service party",
        names: |_| vec!["S"],
        except: &[],
    },
    Reading {
        who: "A party with that authority in Access",
        names: |_| vec!["D"],
        except: &[],
    },
];

/// Rows this test does not read, and why.
const NOT_HERE: &[(&str, &str)] = &[
    (
        "revoke_request, revoke_promise, revoke_statement, revoke_acceptance",
        "See below",
    ),
    ("allow, refuse", "The other side of a revoke request"),
    ("amend", "See amendments"),
];

/// A commitment in `state`, reached through records, with the records an operation may name.
struct Fx {
    w: World,
    ids: BTreeMap<&'static str, RecordId>,
}

fn reach(state: &str) -> Fx {
    let (mut w, req) = world_with(Request {
        valid_until: Some(T0 + 100_000),
        ..basic_request()
    });
    let mut ids = BTreeMap::from([("request", req), ("validity", req)]);
    match state {
        "requested" => {}
        "countered" => {
            let c = w.ok(
                &Cast::c(),
                Operation::Counter {
                    terms: Some(terms("build it, later")),
                },
            );
            ids.insert("counter", c);
        }
        "conditionally_promised" => {
            let pc = w.ok(
                &Cast::c(),
                Operation::PromiseConditional {
                    condition: Condition {
                        description: "deposit".into(),
                        addressed_to: Some(Cast::w()),
                        ..Condition::default()
                    },
                    deadline: Some(T0 + 50_000),
                },
            );
            ids.insert("validity", pc);
        }
        "promised" => {
            w.ok(&Cast::c(), Operation::Promise);
        }
        "stated" => {
            w.ok(&Cast::c(), Operation::Promise);
            w.ok(&Cast::c(), state_op(&["r"]));
        }
        other => panic!("no path to {other}"),
    }
    assert_eq!(
        w.state().map(|s| s.wire_name().to_string()).as_deref(),
        Some(state)
    );
    Fx { w, ids }
}

/// The record an operation row is tried with (its required content), and what must hold
/// before it (a reject to dispute, a defer to resume, an offer to accept).
fn prepare(op: &str, fx: &mut Fx) -> (Operation, Vec<RecordId>) {
    let w = &mut fx.w;
    match op {
        "request" => (
            req(Request {
                obligee: Some(Cast::o()),
                ..basic_request()
            }),
            vec![],
        ),
        "promise" => (Operation::Promise, vec![]),
        "promise_conditional" => (
            Operation::PromiseConditional {
                condition: Condition {
                    description: "deposit".into(),
                    addressed_to: Some(Cast::w()),
                    ..Condition::default()
                },
                deadline: Some(w.now + 50_000),
            },
            vec![],
        ),
        "decline" => (
            Operation::Decline {
                reason: DeclineReason::NoCapacity,
                text: String::new(),
            },
            vec![],
        ),
        "counter" => (
            Operation::Counter {
                terms: Some(terms("build it, differently")),
            },
            vec![],
        ),
        "accept_counter" => (
            Operation::AcceptCounter {
                counter_digest: Some(fx.ids["counter"]),
            },
            vec![],
        ),
        "state" => (state_op(&["r"]), vec![]),
        "accept" => (accept_op(), vec![]),
        "reject" => (
            Operation::Reject {
                reason: "not done".into(),
            },
            vec![],
        ),
        "cancel" => (
            Operation::Cancel {
                reason: CancelReason::Failed,
                text: String::new(),
            },
            vec![],
        ),
        "release" => (
            Operation::Release {
                reason: String::new(),
            },
            vec![],
        ),
        "delegate" => (
            Operation::DelegateOffer {
                to: Some(Cast::n1()),
                handover_note: "over to you".into(),
            },
            vec![],
        ),
        "assign" => (
            Operation::AssignOffer {
                to: Some(Cast::n2()),
            },
            vec![],
        ),
        "dispute" => {
            let rj = w.ok(
                &Cast::a(),
                Operation::Reject {
                    reason: "not done".into(),
                },
            );
            (
                Operation::Dispute {
                    disputed_record: Some(rj),
                    reason: "it is done".into(),
                },
                vec![],
            )
        }
        "defer" => (
            Operation::Defer {
                reason: "later".into(),
                return_at: None,
                return_event: String::new(),
            },
            vec![],
        ),
        "resume" => {
            let d = w.ok(
                &Cast::o(),
                Operation::Defer {
                    reason: "later".into(),
                    return_at: None,
                    return_event: String::new(),
                },
            );
            (
                Operation::Resume {
                    event: String::new(),
                },
                vec![d],
            )
        }
        "notice" => (
            Operation::Notice {
                notice_type: NoticeType::AtRisk,
                text: String::new(),
            },
            vec![],
        ),
        "declare_obsolete" => (
            Operation::DeclareObsolete {
                parent_ref: "aim-1".into(),
            },
            vec![],
        ),
        "expire" => {
            w.now = T0 + 100_000;
            (Operation::Expire, vec![fx.ids["validity"]])
        }
        "administrative_close" => (
            Operation::AdministrativeClose {
                reason: "closed by the board".into(),
            },
            vec![],
        ),
        other => panic!("no record for {other}"),
    }
}

/// The from-states a "From" cell names.
fn from_states(cell: &str) -> Vec<String> {
    let open: Vec<String> = seed::states()
        .into_iter()
        .filter(|(_, terminal)| !terminal)
        .map(|(s, _)| s)
        .collect();
    match cell {
        "—" => vec![String::new()],
        "Any open state" => open,
        // "After a reject": the reject (its own row) moved stated back to promised.
        "After a reject or an open revoke_acceptance" => vec!["promised".into()],
        // An open defer: from any state the defer row allows.
        "An open defer" => {
            let defer = seed::operations()
                .into_iter()
                .find(|r| r.operation == "defer")
                .unwrap();
            from_states(&defer.from)
        }
        list => list.split(", ").map(String::from).collect(),
    }
}

/// The state a "Result" cell gives from `from` (`None`: the state does not change).
fn result_state(cell: &str, from: &str) -> Option<String> {
    let states: BTreeSet<String> = seed::states().into_iter().map(|(s, _)| s).collect();
    if states.contains(cell) {
        return Some(cell.to_string());
    }
    if cell.starts_with("Candidate's counter: countered. Obligee's counter: requested") {
        return Some(
            if from == "requested" {
                "countered"
            } else {
                "requested"
            }
            .into(),
        );
    }
    if cell.starts_with("Same state")
        || cell.starts_with("No state change")
        || cell.starts_with("The deferral closes")
    {
        return None;
    }
    panic!("no reading of the result {cell:?}")
}

/// One attempt: the row's operation from `state` by `who`; the second half of delegate and
/// assign (the acceptance by the new party) follows an accepted offer.
fn attempt(op: &str, state: &str, who: &Party) -> (Fx, Result<RecordId, Rejection>) {
    let mut fx = if op == "request" {
        let mut w = World::new();
        w.id = "c-seed".into();
        Fx {
            w,
            ids: BTreeMap::new(),
        }
    } else if op == "dispute" {
        reach("stated")
    } else {
        reach(state)
    };
    let (record, basis) = prepare(op, &mut fx);
    let r = fx.w.try_op(who, record, &basis, &[]);
    (fx, r)
}

/// (operation, from, party name, outcome) for every attempt.
type Attempt = (String, String, &'static str, Result<(), RejectionCode>);

fn every_attempt() -> Vec<Attempt> {
    let rows = seed::operations();
    let mut out = Vec::new();
    for row in &rows {
        if NOT_HERE.iter().any(|(op, _)| *op == row.operation) {
            continue;
        }
        let reading = WHO
            .iter()
            .find(|r| r.who == row.who)
            .unwrap_or_else(|| panic!("no reading of {:?} ({})", row.who, row.operation));
        for from in from_states(&row.from) {
            let named = (reading.names)(&from);
            for (name, party) in named_cast() {
                if reading.except.contains(&name) {
                    continue;
                }
                let (mut fx, r) = attempt(&row.operation, &from, &party);
                let outcome = r.as_ref().map(|_| ()).map_err(|e| e.code);
                if let (Ok(offer), true) = (&r, named.contains(&name)) {
                    // The result column, and the second record of delegate / assign.
                    check_result(row, &from, &mut fx, *offer);
                }
                out.push((row.operation.clone(), from.clone(), name, outcome));
            }
        }
    }
    out
}

fn check_result(row: &seed::OperationRow, from: &str, fx: &mut Fx, offer: RecordId) {
    let ctx = format!("{} from {from:?}", row.operation);
    let before = if from.is_empty() { "requested" } else { from };
    let want = result_state(&row.result, before).unwrap_or_else(|| before.to_string());
    let got = fx.w.state().map(|s| s.wire_name().to_string());
    assert_eq!(got.as_deref(), Some(want.as_str()), "{ctx}: the result");
    let acceptance = |offer_id| match row.operation.as_str() {
        "delegate" => Operation::DelegateAcceptance { offer_id },
        _ => Operation::AssignAcceptance { offer_id },
    };
    if matches!(row.operation.as_str(), "delegate" | "assign") {
        let (new, field) = if row.operation == "delegate" {
            (Cast::n1(), "obligor")
        } else {
            (Cast::n2(), "obligee")
        };
        // "The old party stays in place until acceptance"; only the new party accepts.
        for (_, other) in named_cast().into_iter().filter(|(_, p)| *p != new) {
            let r = fx.w.try_op(&other, acceptance(Some(offer)), &[], &[]);
            assert!(r.is_err(), "{ctx}: the acceptance by {other} is refused");
        }
        fx.w.ok(&new, acceptance(Some(offer)));
        let now = if field == "obligor" {
            fx.w.c().obligor.clone()
        } else {
            Some(fx.w.c().obligee.clone())
        };
        assert_eq!(now, Some(new), "{ctx}: the new {field}");
        assert_eq!(
            fx.w.state().map(|s| s.wire_name().to_string()).as_deref(),
            Some(before),
            "{ctx}: same state"
        );
    }
}

#[test]
fn every_row_is_read() {
    let rows = seed::operations();
    assert_eq!(rows.len(), 23, "the seed's operations table");
    for row in &rows {
        let read = WHO.iter().any(|r| r.who == row.who);
        let skipped = NOT_HERE
            .iter()
            .any(|(op, who)| *op == row.operation && row.who.starts_with(who));
        assert!(
            read != skipped,
            "{}: read by exactly one of WHO / NOT_HERE",
            row.operation
        );
    }
    for r in WHO {
        assert!(
            rows.iter().any(|row| row.who == r.who),
            "{:?} is a Who cell of the seed",
            r.who
        );
    }
    // The operations are the kernel's wire names (delegate and assign: their two records).
    let wire: BTreeSet<String> = rows
        .iter()
        .flat_map(|r| {
            r.operation
                .split(", ")
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    for name in &wire {
        let mut fx = reach(if name == "dispute" {
            "stated"
        } else {
            "promised"
        });
        fx.ids.insert("counter", rid(77));
        if matches!(name.as_str(), "delegate" | "assign")
            || NOT_HERE.iter().any(|(o, _)| o.contains(name.as_str()))
        {
            continue;
        }
        let (op, _) = prepare(name, &mut fx);
        assert_eq!(op.wire_name(), name, "the record for {name}");
    }
}

#[test]
fn the_party_each_row_names_may_and_no_other_may() {
    let rows = seed::operations();
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    let mut disagree = Vec::new();
    let attempts = every_attempt();
    let allowed = attempts.iter().filter(|a| a.3.is_ok()).count();
    // 20 rows read, 1 to 5 from-states each, 17 parties (16 for resume).
    assert!(
        attempts.len() > 700 && allowed > 40,
        "{} attempts, {allowed} allowed",
        attempts.len()
    );
    for (op, from, name, outcome) in attempts {
        let row = rows.iter().find(|r| r.operation == op).unwrap();
        let reading = WHO.iter().find(|r| r.who == row.who).unwrap();
        let named = (reading.names)(&from).contains(&name);
        if let Err(c) = outcome {
            *codes.entry(c.to_string()).or_default() += 1;
        }
        let agrees = named == outcome.is_ok();
        if !agrees {
            disagree.push(format!(
                "{op} from {from:?} by {name}: seed says {}, kernel {outcome:?}",
                if named { "allowed" } else { "refused" }
            ));
        }
    }
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
    // A party the row does not name is refused for its role, or by Access.
    let allowed_codes: BTreeSet<&str> = ["wrong_role", "not_authorized"].into();
    for c in codes.keys() {
        assert!(
            allowed_codes.contains(c.as_str()),
            "refusal codes: {codes:?}"
        );
    }
}
