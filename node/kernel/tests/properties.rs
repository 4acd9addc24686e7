//! Property tests over random runs of the shared generator (`common/generator.rs`: 2–4
//! commitments created the ways seed 000 allows, plausible steps by role holders, a minority
//! deliberately wrong, Work service ticks).
//!
//! Oracles that do not come from the kernel: a second request is `commitment_exists`; anything
//! from an organisation Access does not list is `not_authorized`; a record for a commitment never
//! requested is `unknown_commitment`; a state in the seed's terminal column never changes, and on
//! a commitment whose items are all terminal only the seed's after-terminal operations apply; the
//! obligor changes only by the new obligor's delegate acceptance (or goes by an unclaim) and the
//! obligee only by the new obligee's assign acceptance; an applied operation from the seed's
//! table was in its From states and moves the items it acts on to its Result; replaying the
//! applied records from scratch gives the same commitments and the same effects. Kernel-derived
//! checks too: a rejected record changes nothing, every record `due_work` proposes is accepted,
//! the view is consistent with the state.
//!
//! `the_generator_reaches_every_state_and_mostly_applies` measures the mix over a fixed RNG seed.
//!
//! Each seed oracle was seen failing against a mutation of the kernel (then reverted): release
//! allowed from every state (a terminal state left); notice allowed from every state (an
//! operation applied on a closed commitment); a delegate offer that sets the obligor, an assign
//! offer that sets the obligee; reject moving to requested (Result); state allowed from
//! conditionally_promised (From); named items ignored, acting on every item (an item moved that
//! the record does not name); `unknown_commitment` answered `invalid_state`; no expire from
//! `due_work` (the mix test: no run reaches expired); supplier, pool and qa parties refused by
//! Access (the mix test: 0.281 of the steps apply).

mod common;
#[path = "common/generator.rs"]
mod generator;
mod seed_tables;

use std::collections::BTreeMap;

use accord_kernel::*;
use common::*;
use generator::*;
use proptest::prelude::*;

/// What may still apply on a commitment whose items are all terminal: the seed's operations
/// whose From is a terminal state or no state (revoke_acceptance "accepted"; allow/refuse "an
/// open revoke request"; dispute "after a reject or an open revoke_acceptance"), and admission,
/// the federation's record (seed 000, "Federation admission"), which acts on no state.
const AFTER_TERMINAL: [&str; 5] = [
    "revoke_acceptance",
    "allow",
    "refuse",
    "dispute",
    "admission",
];

/// The From column of a row of the seed's "Operations" table.
#[derive(Clone, Copy)]
enum From {
    States(&'static [&'static str]),
    AnyOpen,
    /// No state constraint (an open revoke request, a reject).
    Any,
}

/// The Result column.
#[derive(Clone, Copy)]
enum Res {
    To(&'static str),
    /// "No state change", "Same state", "Continues", "A revoke request opens", "A new version".
    Stay,
    /// counter: "Candidate's counter: countered. Obligee's counter: requested".
    Counter,
    /// allow: the revoke table's "On allow" column for the open revoke request.
    Allow,
}

/// Seed 000 "Operations" and "Assignment", the rows with a From and a Result (transcribed).
const SEED_ROWS: &[(&str, From, Res)] = &[
    ("promise", From::States(&["requested"]), Res::To("promised")),
    (
        "promise_conditional",
        From::States(&["requested"]),
        Res::To("conditionally_promised"),
    ),
    ("decline", From::States(&["requested"]), Res::To("declined")),
    (
        "counter",
        From::States(&["requested", "countered"]),
        Res::Counter,
    ),
    (
        "accept_counter",
        From::States(&["countered"]),
        Res::To("promised"),
    ),
    ("state", From::States(&["promised"]), Res::To("stated")),
    ("accept", From::States(&["stated"]), Res::To("accepted")),
    ("reject", From::States(&["stated"]), Res::To("promised")),
    (
        "cancel",
        From::States(&["conditionally_promised", "promised", "stated"]),
        Res::To("cancelled"),
    ),
    ("release", From::AnyOpen, Res::To("released")),
    (
        "delegate",
        From::States(&["promised", "conditionally_promised"]),
        Res::Stay,
    ),
    ("assign", From::AnyOpen, Res::Stay),
    ("dispute", From::Any, Res::Stay),
    (
        "defer",
        From::States(&[
            "requested",
            "countered",
            "conditionally_promised",
            "promised",
        ]),
        Res::Stay,
    ),
    ("allow", From::Any, Res::Allow),
    ("refuse", From::Any, Res::Stay),
    ("amend", From::AnyOpen, Res::Stay),
    ("notice", From::AnyOpen, Res::Stay),
    ("declare_obsolete", From::AnyOpen, Res::To("obsolete")),
    (
        "expire",
        From::States(&["requested", "countered", "conditionally_promised"]),
        Res::To("expired"),
    ),
    (
        "administrative_close",
        From::AnyOpen,
        Res::To("closed_administratively"),
    ),
    ("claim", From::States(&["requested"]), Res::To("promised")),
    ("unclaim", From::States(&["promised"]), Res::To("requested")),
    ("forward", From::Any, Res::Stay),
    ("nominate", From::Any, Res::Stay),
    ("offer", From::Any, Res::Stay),
    ("reassign", From::Any, Res::Stay),
    ("renew_lease", From::Any, Res::Stay),
];

/// Seed 000 "Revoke requests", the "On allow" column (`None`: the terminal outcome stays).
fn allow_result(kind: RevokeKind) -> Option<&'static str> {
    match kind {
        RevokeKind::Request | RevokeKind::Promise => Some("withdrawn"),
        RevokeKind::Statement => Some("promised"),
        RevokeKind::Acceptance => None,
    }
}

/// The oracles of this file, told of every applied record and every step.
struct Oracles;

impl Observer for Oracles {
    fn applied(
        &mut self,
        before: &Dir,
        after: &Dir,
        r: &Record,
        _now: i64,
    ) -> Result<(), TestCaseError> {
        // The seed's oracles first, then the kernel's own terminal flag.
        check_applied(before, after, r)?;
        if let (Some(b), Some(a)) = (before.get(&r.commitment), after.get(&r.commitment)) {
            for (id, item) in &b.items {
                if item.state.is_terminal() {
                    prop_assert_eq!(a.items[id].state, item.state, "terminal {} changed", id);
                }
            }
        }
        Ok(())
    }

    fn step_done(&mut self, dir: &Dir, now: i64) -> Result<(), TestCaseError> {
        for c in dir.values() {
            check_view(c, now);
        }
        Ok(())
    }
}

fn check_view(c: &Commitment, now: i64) {
    let v = view(c, now, &access());
    let states: Vec<State> = c.items.values().map(|i| i.state).collect();
    let mixed = states.iter().any(|s| *s != states[0]);
    assert_eq!(v.summary == "mixed", mixed);
    assert_eq!(v.state.is_none(), mixed);
    assert_eq!(v.terminal, states.iter().all(|s| s.is_terminal()));
    assert_eq!(v.category == Category::Closed, v.terminal);
    assert_eq!(v.records, c.history.len());
}

/// The oracles on one applied record `r` that do not come from the kernel.
fn check_applied(
    before: &BTreeMap<String, Commitment>,
    after: &BTreeMap<String, Commitment>,
    r: &Record,
) -> Result<(), TestCaseError> {
    let kind = r.op.wire_name();
    // A seed-terminal state never changes, whichever commitment the record is for.
    for (id, b) in before {
        for (item, bi) in &b.items {
            if seed_terminal(bi.state) {
                prop_assert_eq!(
                    after[id].items[item].state,
                    bi.state,
                    "{} by {}: terminal {}/{} left",
                    kind,
                    r.author,
                    id,
                    item
                );
            }
        }
    }
    let Some(b) = before.get(&r.commitment) else {
        return Ok(());
    };
    let a = &after[&r.commitment];
    // Once every item is terminal, only the after-terminal operations apply.
    if b.items.values().all(|i| seed_terminal(i.state)) {
        prop_assert!(
            AFTER_TERMINAL.contains(&kind),
            "{} by {} applied on closed {} ({:?})",
            kind,
            r.author,
            b.id,
            b.state()
        );
    }
    // The obligor changes only by the new obligor's delegate acceptance, or goes by an unclaim;
    // the obligee changes only by the new obligee's assign acceptance.
    if let Some(old) = &b.obligor {
        match &a.obligor {
            Some(new) if new != old => prop_assert!(
                matches!(r.op, Operation::DelegateAcceptance { .. }) && r.author == *new,
                "obligor {} -> {} by {} from {}",
                old,
                new,
                kind,
                r.author
            ),
            None => prop_assert_eq!(kind, "unclaim", "obligor {} went", old),
            _ => {}
        }
    }
    if a.obligee != b.obligee {
        prop_assert!(
            matches!(r.op, Operation::AssignAcceptance { .. }) && r.author == a.obligee,
            "obligee {} -> {} by {} from {}",
            b.obligee,
            a.obligee,
            kind,
            r.author
        );
    }
    // The seed's From and Result columns. (A promise resting on the current claim by the
    // claimant, or by the Work service party in older ledgers, is the record the claim
    // produced: it moves nothing.)
    let produced = matches!(r.op, Operation::Promise)
        && b.claim.as_ref().is_some_and(|cl| {
            r.basis.contains(&cl.record) && (r.author == Cast::s() || r.author == cl.by)
        });
    let Some((_, from, res)) = SEED_ROWS.iter().find(|(n, _, _)| *n == kind) else {
        return Ok(());
    };
    if produced {
        return Ok(());
    }
    let open: Vec<&String> = b
        .items
        .iter()
        .filter(|(_, i)| !seed_terminal(i.state))
        .map(|(k, _)| k)
        .collect();
    let acted: Vec<&String> = if !r.items.is_empty() {
        b.items.keys().filter(|k| r.items.contains(k)).collect()
    } else if open.is_empty() {
        b.items.keys().collect()
    } else {
        open
    };
    for (id, bi) in &b.items {
        let was = bi.state.wire_name();
        let now = a.items[id].state.wire_name();
        if !acted.contains(&id) {
            if !matches!(res, Res::Allow) {
                prop_assert_eq!(now, was, "{} moved item {:?} it does not act on", kind, id);
            }
            continue;
        }
        match from {
            From::States(s) => {
                prop_assert!(s.contains(&was), "{} applied from {} ({:?})", kind, was, id)
            }
            From::AnyOpen => prop_assert!(!seed_terminal(bi.state), "{} from {}", kind, was),
            From::Any => {}
        }
        let want = match res {
            Res::To(s) => Some(*s),
            Res::Stay => None,
            Res::Counter if was == "requested" => Some("countered"),
            Res::Counter => Some("requested"),
            Res::Allow => b.revoke.as_ref().and_then(|rv| allow_result(rv.kind)),
        };
        match (want, res) {
            // Allow acts on the revoke request's items: any item it moves goes to the result.
            (Some(w), Res::Allow) if now != was => prop_assert_eq!(now, w),
            (_, Res::Allow) => {}
            (Some(w), _) => prop_assert_eq!(now, w, "{} on {:?} from {}", kind, id, was),
            (None, _) => prop_assert_eq!(now, was, "{} changed {:?}", kind, id),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_the_invariants((forms, steps, crit) in case()) {
        run(&forms, steps, crit, &mut Oracles)?;
    }
}

/// The mix over a fixed RNG seed (deterministic): most authored steps apply, a minority are
/// deliberately wrong, and every state of the seed's table is reached by some run.
#[test]
fn the_generator_reaches_every_state_and_mostly_applies() {
    let mut mix = Mix::default();
    for (forms, steps, crit) in fixed_cases(26, 256) {
        mix.add(run(&forms, steps, crit, &mut Oracles).unwrap());
    }
    eprintln!("{mix:#?}");
    let applied = mix.applied as f64 / mix.authored as f64;
    let wrong = mix.wrong as f64 / mix.authored as f64;
    eprintln!(
        "applied {:.3} of {} authored steps; wrong {:.3}; {} service records",
        applied, mix.authored, wrong, mix.service
    );
    assert!(applied >= 0.5, "only {applied:.3} of the steps applied");
    assert!((0.05..0.3).contains(&wrong), "wrong steps {wrong:.3}");
    assert_eq!(SEED_STATES.len(), 13, "the seed's table has 13 states");
    for (name, _) in SEED_STATES.iter() {
        assert!(
            mix.states.contains_key(name.as_str()),
            "no run reached {name}: {:?}",
            mix.states
        );
    }
    assert!(mix.reopenings > 0, "no reopening started");
}

/// The seed's state names are the kernel's wire names (the tables above are keyed by them).
#[test]
fn the_seed_states_are_the_kernel_wire_names() {
    for (name, _) in SEED_STATES.iter() {
        assert!(State::from_wire_name(name).is_some(), "{name}");
    }
}

/// The case proptest once saved (`properties.proptest-regressions` kept only its seed, which the
/// strategy has since changed under, so it no longer replays it): the steps it shrank to, by
/// the obligee on no basis on one commitment created the original way, run as they were.
#[test]
fn the_saved_regression_case_replays() {
    let step = |op, dt, tick: bool| Step {
        kind: if tick { 0 } else { TICK },
        target: 0,
        pick: 3,
        author: 0,
        role_author: false,
        items: 0,
        basis: 0,
        op,
        dt,
    };
    let steps = vec![
        step(0, 0, false),
        step(17, 85, false),
        step(12, 86, false),
        step(0, 46, false),
        step(0, 71, false),
        step(0, 21, false),
        step(0, 91, true),
    ];
    run(
        &[Form::Candidate],
        steps,
        AcceptanceCriterion::default(),
        &mut Oracles,
    )
    .unwrap();
}

/// Found by the obligor oracle above: C counters item b, then K (a queue candidate) promises
/// item a and becomes the obligor; the obligee accepts C's counter, and the obligor becomes C
/// without a delegate record (seed 000: the obligor changes only by delegate, "The old party
/// stays in place until acceptance"). The kernel now refuses the stale counter
/// (`stale_counter_digest`) and K stays the obligor.
#[test]
fn an_accepted_stale_counter_leaves_the_obligor() {
    let (author, request) = creation(Form::Candidate, AcceptanceCriterion::default());
    let mut w = World::new();
    w.ok(&author, req(request));
    let v2 = Terms {
        title: "v2".into(),
        ..w.c().terms.clone()
    };
    let counter = w.ok_with(
        &Cast::c(),
        Operation::Counter { terms: Some(v2) },
        &[],
        &["b"],
    );
    w.ok_with(&Cast::k(), Operation::Promise, &[], &["a"]);
    assert_eq!(w.c().obligor, Some(Cast::k()));
    let accept = Operation::AcceptCounter {
        counter_digest: Some(counter),
    };
    let refused = w
        .try_op(&Cast::o(), accept, &[counter], &["b"])
        .expect_err("the counter's author is no longer the one to become obligor");
    assert_eq!(refused.code, RejectionCode::StaleCounterDigest, "{refused}");
    assert_eq!(
        w.c().obligor,
        Some(Cast::k()),
        "the obligor changed without a delegate"
    );
}
