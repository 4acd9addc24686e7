//! Commit envelopes (seed 003; issue 13 items 1, 2, 4, 5 in pure form). The arrows, phase names
//! and the declaration come from the seed's text, transcribed in `seed_tables/003_lifecycle.txt`
//! (`seed_003_lifecycle.rs` checks every arrow and every refusal against it).

mod common;
mod seed_tables;

use std::collections::BTreeMap;

use accord_kernel::envelope::*;
use accord_kernel::*;
use common::*;
use proptest::prelude::*;
use seed_tables as seed;

/// The seed's declaration (seed 003, transcribed in `seed_tables/003_lifecycle.txt`), with the
/// participants' rules this test authors as the seed prescribes them ("Use cap: { min: 0 } on
/// balance subtractions and filter to de-duplicate list reversals").
fn decl() -> EnvelopeType {
    let mut d = seed::envelope_type();
    d.participants = vec![ParticipantDecl {
        role: "source".into(),
        stage: vec![
            StageRule::Debit {
                field: "budget".into(),
                reserve: None,
            },
            StageRule::Append {
                field: "pending".into(),
                on_commit: OnCommit::Remove,
            },
        ],
        abort_cleanup: vec![
            CleanupRule::Subtract {
                field: "reserved".into(),
                cap: Some(Cap { min: 0 }),
            },
            CleanupRule::RemoveFromList {
                field: "pending".into(),
                filter: Some("dedup".into()),
            },
        ],
    }];
    // The destination's credit (issue 29 item 3: every change runs its role's declared rules).
    d.participants.push(ParticipantDecl {
        role: "destination".into(),
        stage: vec![
            StageRule::Credit {
                field: "budget".into(),
            },
            StageRule::Append {
                field: "pending".into(),
                on_commit: OnCommit::Remove,
            },
        ],
        abort_cleanup: vec![CleanupRule::RemoveFromList {
            field: "pending".into(),
            filter: Some("dedup".into()),
        }],
    });
    d
}

const SRC: &str = "buyer";
const DST: &str = "supplier";

fn party_of(org: &str) -> Party {
    match org {
        SRC => Cast::o(),
        DST => Cast::c(),
        _ => Cast::q(),
    }
}

/// A coordinator (`hub`) and the participants' books, driven with an explicit clock.
struct Env {
    access: Access,
    types: BTreeMap<String, EnvelopeType>,
    env: Option<Envelope>,
    books: BTreeMap<String, Book>,
    now: i64,
    next: u64,
    effects: Vec<EnvelopeEffect>,
    /// The coordinator's ledger: every record it applied, with the time (for replay).
    ledger: Vec<(Record, i64)>,
}

fn book(account: &str, balance: u64) -> Book {
    let mut b = Book::default();
    b.open(account, balance, &["budget"]);
    b
}

impl Env {
    fn new(src_balance: u64) -> Self {
        let d = decl();
        Env {
            access: access(),
            types: BTreeMap::from([(d.name.clone(), d)]),
            env: None,
            books: BTreeMap::from([
                (SRC.into(), book("c-src", src_balance)),
                (DST.into(), book("c-dst", 5)),
            ]),
            now: T0,
            next: 5000,
            effects: Vec::new(),
            ledger: Vec::new(),
        }
    }

    /// The envelope rebuilt from the coordinator's ledger alone (a restart).
    fn replay(&self) -> Envelope {
        let mut env: Option<Envelope> = None;
        for (r, t) in &self.ledger {
            let a = match &r.op {
                Operation::Tick(_) => apply_tick(env.as_ref().unwrap(), r, &self.access, *t),
                _ => apply_envelope(env.as_ref(), &self.types, r, &self.access, *t),
            };
            env = Some(a.expect("a recorded record applies again").next);
        }
        env.unwrap()
    }

    fn rec(
        &mut self,
        author: &Party,
        event: &str,
        step: EnvelopeStep,
        basis: &[RecordId],
    ) -> Record {
        self.next += 1;
        Record {
            id: rid(self.next),
            author: author.clone(),
            commitment: String::new(),
            basis: basis.to_vec(),
            items: Vec::new(),
            op: Operation::Envelope(Box::new(EnvelopeOperation {
                envelope: "e-1".into(),
                event: event.into(),
                step,
            })),
        }
    }

    fn apply(&mut self, r: &Record) -> Result<(), Rejection> {
        let before = self.env.clone();
        match apply_envelope(self.env.as_ref(), &self.types, r, &self.access, self.now) {
            Ok(a) => {
                self.env = Some(a.next);
                self.effects = a.effects;
                self.ledger.push((r.clone(), self.now));
                Ok(())
            }
            Err(e) => {
                assert_eq!(self.env, before, "a rejection changed the envelope");
                Err(e)
            }
        }
    }

    fn tick(&mut self, instant_time: i64) -> Result<Record, Rejection> {
        self.next += 1;
        let r = Record {
            id: rid(self.next),
            author: Cast::q(),
            commitment: String::new(),
            basis: Vec::new(),
            items: Vec::new(),
            op: Operation::Tick(Tick {
                tick_id: format!("t{}", self.next),
                instant_time,
            }),
        };
        let a = apply_tick(self.env.as_ref().unwrap(), &r, &self.access, self.now)?;
        self.env = Some(a.next);
        self.effects = a.effects;
        self.ledger.push((r.clone(), self.now));
        Ok(r)
    }

    fn start(&mut self, amount: u64) -> Record {
        let r = self.rec(
            &Cast::q(),
            "",
            EnvelopeStep::Start(EnvelopeStart {
                envelope_type: "budget_transfer".into(),
                participants: vec![
                    ParticipantChanges {
                        participant: SRC.into(),
                        changes: vec![Change::Debit {
                            account: "c-src".into(),
                            amount,
                        }],
                    },
                    ParticipantChanges {
                        participant: DST.into(),
                        changes: vec![Change::Credit {
                            account: "c-dst".into(),
                            amount,
                        }],
                    },
                ],
            }),
            &[],
        );
        self.apply(&r).unwrap();
        r
    }

    /// The record the coordinator writes for its last effect.
    fn emitted(&mut self) -> Record {
        let effects = self.effects.clone();
        let [
            EnvelopeEffect::Emit {
                event, step, basis, ..
            },
        ] = effects.as_slice()
        else {
            panic!("one effect, got {effects:?}");
        };
        self.rec(&Cast::q(), event, step.clone(), &[*basis])
    }

    fn phase(&self) -> Phase {
        self.env.as_ref().unwrap().phase
    }

    fn prepare_id(&self) -> RecordId {
        self.env.as_ref().unwrap().prepare.unwrap()
    }

    fn vote(&mut self, who: &str, vote: Vote) -> Record {
        let prepare = self.prepare_id();
        self.rec(
            &party_of(who),
            "",
            EnvelopeStep::Vote {
                participant: who.into(),
                vote,
                reason: String::new(),
            },
            &[prepare],
        )
    }

    /// start → prepare recorded: PREPARING.
    fn preparing(&mut self, amount: u64) {
        self.start(amount);
        let p = self.emitted();
        self.apply(&p).unwrap();
        assert_eq!(self.phase(), Phase::Preparing);
    }
}

#[test]
fn the_phases_are_the_seeds() {
    let mut seed: Vec<String> = seed::diagram_phases();
    let mut ours: Vec<String> = Phase::ALL.iter().map(|p| p.wire_name().into()).collect();
    ours.sort();
    seed.sort();
    assert_eq!(ours, seed);
    let terminal = seed::diagram_terminal();
    for p in Phase::ALL {
        assert_eq!(p.is_terminal(), terminal.iter().any(|t| t == p.wire_name()));
        assert_eq!(Phase::from_wire_name(p.wire_name()), Some(p));
    }
    let doc = include_str!("../../../ARCHITECTURE.md");
    assert!(
        doc.contains(&table::markdown()),
        "ARCHITECTURE.md writes out the code's table:\n{}",
        table::markdown()
    );
}

#[test]
fn every_arrow_of_the_seeds_diagram() {
    let mut seen: Vec<(Phase, Phase, &str)> = Vec::new();
    fn step(
        seen: &mut Vec<(Phase, Phase, &'static str)>,
        w: &mut Env,
        r: &Record,
        label: &'static str,
    ) {
        let from = w.env.as_ref().map(|e| e.phase);
        w.apply(r).unwrap();
        if let Some(from) = from
            && from != w.phase()
        {
            seen.push((from, w.phase(), label));
        }
    }
    // All ACK: PENDING → PREPARING → COMMITTING → COMMITTED.
    let mut w = Env::new(100);
    let start = w.start(40);
    assert_eq!(w.phase(), Phase::Pending);
    let prepare = w.emitted();
    assert_eq!(prepare.basis, vec![start.id]);
    assert!(matches!(&prepare.op, Operation::Envelope(e) if e.event == "TRANSFER_PREPARED"));
    step(&mut seen, &mut w, &prepare, "prepare_event emitted");
    let a = w.vote(SRC, Vote::Ack);
    step(&mut seen, &mut w, &a, "one ACK");
    assert_eq!(w.phase(), Phase::Preparing);
    let b = w.vote(DST, Vote::Ack);
    step(&mut seen, &mut w, &b, "all ACK");
    let prepared = w.emitted();
    assert_eq!(
        prepared.basis,
        vec![b.id],
        "prepared names the ACK that completed the votes"
    );
    step(&mut seen, &mut w, &prepared, "prepared");
    let commit = w.emitted();
    assert_eq!(commit.basis, vec![prepared.id]);
    step(&mut seen, &mut w, &commit, "commit event emitted");
    assert_eq!(w.phase(), Phase::Committed);

    // A NACK: PREPARING → ABORTING → ABORTED.
    let mut w = Env::new(100);
    w.preparing(40);
    let n = w.vote(DST, Vote::Nack);
    step(&mut seen, &mut w, &n, "any NACK");
    let abort = w.emitted();
    assert_eq!(abort.basis, vec![n.id]);
    assert!(
        matches!(&abort.op, Operation::Envelope(e) if e.step == EnvelopeStep::Abort { cause: AbortCause::Nack })
    );
    step(&mut seen, &mut w, &abort, "abort event emitted");
    assert_eq!(w.phase(), Phase::Aborted);

    // The timeout, seen on a tick.
    let mut w = Env::new(100);
    w.preparing(40);
    let since = w.env.as_ref().unwrap().preparing_since.unwrap();
    let tick = w.tick(since + 30_000).unwrap();
    seen.push((
        Phase::Preparing,
        w.phase(),
        "timeout fires during PREPARING",
    ));
    let abort = w.emitted();
    assert_eq!(abort.basis, vec![tick.id]);
    step(&mut seen, &mut w, &abort, "abort event emitted");

    for seed::Arrow { label, from, to } in seed::arrows() {
        let Some(from) = from else { continue };
        assert!(
            seen.iter().any(|(f, t, l)| f.wire_name() == from
                && t.wire_name() == to
                && *l == label.as_str()),
            "arrow {from} -> {to} ({label}) exercised: {seen:?}"
        );
    }
}

#[test]
fn the_timeout_is_checked_only_on_ticks() {
    let mut w = Env::new(100);
    w.preparing(40);
    let since = w.env.as_ref().unwrap().preparing_since.unwrap();
    // Ledger time far past the timeout: a vote does not abort.
    w.now += 3_600_000;
    let a = w.vote(SRC, Vote::Ack);
    w.apply(&a).unwrap();
    assert_eq!(w.phase(), Phase::Preparing);
    // A tick before the timeout: nothing.
    w.tick(since + 29_999).unwrap();
    assert_eq!(w.phase(), Phase::Preparing);
    assert!(w.effects.is_empty());
    // At the timeout: abort.
    w.tick(since + 30_000).unwrap();
    assert_eq!(w.phase(), Phase::Aborting);
    assert_eq!(
        w.env.as_ref().unwrap().abort_cause,
        Some(AbortCause::Timeout)
    );
    // A late ACK after the timeout changes nothing.
    let b = w.vote(DST, Vote::Ack);
    w.apply(&b).unwrap();
    assert_eq!(w.phase(), Phase::Aborting);
    assert!(w.effects.is_empty());
}

#[test]
fn duplicates_change_nothing() {
    let mut w = Env::new(100);
    w.preparing(40);
    let prepare_again = w.rec(
        &Cast::q(),
        "TRANSFER_PREPARED",
        EnvelopeStep::Prepare,
        &[w.env.as_ref().unwrap().start.record],
    );
    w.apply(&prepare_again).unwrap();
    assert_eq!(w.phase(), Phase::Preparing);
    let a = w.vote(SRC, Vote::Ack);
    w.apply(&a).unwrap();
    assert_eq!(
        w.apply(&a).unwrap_err().code,
        RejectionCode::DuplicateRecord
    );
    let a2 = w.vote(SRC, Vote::Ack);
    w.apply(&a2).unwrap();
    assert_eq!(w.phase(), Phase::Preparing);
    assert!(w.effects.is_empty(), "the same answer again emits nothing");
    let n = w.vote(DST, Vote::Nack);
    w.apply(&n).unwrap();
    let abort = w.emitted();
    w.apply(&abort).unwrap();
    let done = w.env.clone().unwrap();
    // The abort event delivered again (a new record after a crash): same phase, no effects.
    let abort2 = w.rec(
        &Cast::q(),
        "TRANSFER_ABORTED",
        EnvelopeStep::Abort {
            cause: AbortCause::Nack,
        },
        &[n.id],
    );
    w.apply(&abort2).unwrap();
    assert_eq!(w.phase(), Phase::Aborted);
    assert!(w.effects.is_empty());
    assert_eq!(
        w.env.as_ref().unwrap().abort,
        done.abort,
        "the first abort record stays the abort"
    );
}

#[test]
fn forbidden_events_are_refused() {
    use RejectionCode as C;
    // In PENDING: a vote, prepared, commit, abort.
    let mut w = Env::new(100);
    let start = w.start(40);
    let v = w.rec(
        &party_of(SRC),
        "",
        EnvelopeStep::Vote {
            participant: SRC.into(),
            vote: Vote::Ack,
            reason: String::new(),
        },
        &[start.id],
    );
    assert_eq!(w.apply(&v).unwrap_err().code, C::InvalidState);
    let c = w.rec(
        &Cast::q(),
        "TRANSFER_COMMITTED",
        EnvelopeStep::Commit,
        &[start.id],
    );
    assert_eq!(w.apply(&c).unwrap_err().code, C::InvalidState);
    let p = w.emitted();
    w.apply(&p).unwrap();
    // In PREPARING: commit before prepared, abort without a cause, prepared before all ACK.
    let c = w.rec(
        &Cast::q(),
        "TRANSFER_COMMITTED",
        EnvelopeStep::Commit,
        &[p.id],
    );
    assert_eq!(w.apply(&c).unwrap_err().code, C::InvalidState);
    let ab = w.rec(
        &Cast::q(),
        "TRANSFER_ABORTED",
        EnvelopeStep::Abort {
            cause: AbortCause::Nack,
        },
        &[p.id],
    );
    assert_eq!(w.apply(&ab).unwrap_err().code, C::InvalidState);
    let pr = w.rec(
        &Cast::q(),
        "TRANSFER_PREPARE_CONFIRMED",
        EnvelopeStep::Prepared,
        &[p.id],
    );
    assert_eq!(w.apply(&pr).unwrap_err().code, C::InvalidState);
    // Who and what.
    let wrong_name = w.rec(
        &Cast::q(),
        "SOMETHING_ELSE",
        EnvelopeStep::Prepare,
        &[start.id],
    );
    assert_eq!(w.apply(&wrong_name).unwrap_err().code, C::UndeclaredEvent);
    let by_participant = w.rec(
        &Cast::o(),
        "TRANSFER_PREPARED",
        EnvelopeStep::Prepare,
        &[start.id],
    );
    assert_eq!(w.apply(&by_participant).unwrap_err().code, C::WrongRole);
    let outsider = w.rec(
        &Cast::a(),
        "",
        EnvelopeStep::Vote {
            participant: "qa".into(),
            vote: Vote::Ack,
            reason: String::new(),
        },
        &[p.id],
    );
    assert_eq!(w.apply(&outsider).unwrap_err().code, C::NotParticipant);
    let for_other = w.rec(
        &Cast::o(),
        "",
        EnvelopeStep::Vote {
            participant: DST.into(),
            vote: Vote::Ack,
            reason: String::new(),
        },
        &[p.id],
    );
    assert_eq!(w.apply(&for_other).unwrap_err().code, C::WrongRole);
    let no_basis = w.rec(
        &party_of(SRC),
        "",
        EnvelopeStep::Vote {
            participant: SRC.into(),
            vote: Vote::Ack,
            reason: String::new(),
        },
        &[],
    );
    assert_eq!(w.apply(&no_basis).unwrap_err().code, C::MissingBasis);
    let a = w.vote(SRC, Vote::Ack);
    w.apply(&a).unwrap();
    let changed = w.vote(SRC, Vote::Nack);
    assert_eq!(w.apply(&changed).unwrap_err().code, C::VoteChanged);
    // Once committing, no abort; once committed, nothing but duplicates.
    let b = w.vote(DST, Vote::Ack);
    w.apply(&b).unwrap();
    let ab = w.rec(
        &Cast::q(),
        "TRANSFER_ABORTED",
        EnvelopeStep::Abort {
            cause: AbortCause::Timeout,
        },
        &[b.id],
    );
    assert_eq!(w.apply(&ab).unwrap_err().code, C::InvalidState);
    let pr = w.emitted();
    w.apply(&pr).unwrap();
    let c = w.emitted();
    w.apply(&c).unwrap();
    assert_eq!(w.phase(), Phase::Committed);
    let ab = w.rec(
        &Cast::q(),
        "TRANSFER_ABORTED",
        EnvelopeStep::Abort {
            cause: AbortCause::Timeout,
        },
        &[b.id],
    );
    assert_eq!(w.apply(&ab).unwrap_err().code, C::TerminalState);
    w.tick(w.now + 1_000_000).unwrap();
    assert_eq!(
        w.phase(),
        Phase::Committed,
        "a tick never moves a decided envelope"
    );
    // Starts: an existing id, an undeclared type, no participants, a participant twice.
    assert_eq!(w.apply(&start).unwrap_err().code, C::EnvelopeExists);
    let mut fresh = Env::new(100);
    for (ty, parts, code) in [
        (
            "nope",
            vec![ParticipantChanges {
                participant: SRC.into(),
                changes: vec![],
            }],
            C::UnknownEnvelopeType,
        ),
        ("budget_transfer", vec![], C::MissingField),
        (
            "budget_transfer",
            vec![
                ParticipantChanges {
                    participant: SRC.into(),
                    changes: vec![]
                };
                2
            ],
            C::DuplicateParticipant,
        ),
    ] {
        let r = fresh.rec(
            &Cast::q(),
            "",
            EnvelopeStep::Start(EnvelopeStart {
                envelope_type: ty.into(),
                participants: parts,
            }),
            &[],
        );
        assert_eq!(fresh.apply(&r).unwrap_err().code, code);
    }
    // An envelope record given to the commitment machine.
    assert_eq!(
        apply(None, &start, &access(), T0).unwrap_err().code,
        C::WrongMachine
    );
}

#[test]
fn the_declaration_is_validated() {
    let d = decl();
    assert!(d.validate(Some(5)).is_empty(), "{:?}", d.validate(Some(5)));
    assert_eq!(d.abort_after_ms(), 30_000);
    // The seed's warning: the tick interval not shorter than the timeout.
    let w = d.validate(Some(30));
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].severity, w[0].code),
        (Severity::Warning, DECL_TICK_NOT_SHORTER)
    );
    assert!(d.is_valid(Some(30)), "a warning does not refuse the type");

    let errors = |d: &EnvelopeType| -> Vec<(String, &'static str)> {
        d.validate(None)
            .into_iter()
            .filter(|i| i.severity == Severity::Error)
            .map(|i| (i.field, i.code))
            .collect()
    };
    let mut d1 = decl();
    d1.events.remove("TRANSFER_ABORTED");
    assert_eq!(
        errors(&d1),
        vec![("lifecycle.abort_event".into(), DECL_UNDECLARED_EVENT)]
    );
    let mut d2 = decl();
    d2.lifecycle.commit_event.clear();
    assert_eq!(
        errors(&d2),
        vec![("lifecycle.commit_event".into(), DECL_MISSING_FIELD)]
    );
    let mut d3 = decl();
    d3.events.get_mut("CLOCK_TICK").unwrap().kind = "domain".into();
    assert_eq!(
        errors(&d3),
        vec![("events.CLOCK_TICK.kind".into(), DECL_UNDECLARED_EVENT)]
    );
    let mut d4 = decl();
    d4.events.get_mut("TRANSFER_PREPARED").unwrap().state = "scheduler".into();
    assert_eq!(
        errors(&d4),
        vec![(
            "events.TRANSFER_PREPARED.state".into(),
            DECL_UNDECLARED_EVENT
        )]
    );
    let mut d5 = decl();
    d5.timeout.abort_after_seconds = 0;
    assert_eq!(
        errors(&d5),
        vec![("timeout.abort_after_seconds".into(), DECL_INVALID_TIMEOUT)]
    );
    let mut d6 = decl();
    d6.participants[0].abort_cleanup = vec![
        CleanupRule::Subtract {
            field: "reserved".into(),
            cap: None,
        },
        CleanupRule::RemoveFromList {
            field: "pending".into(),
            filter: None,
        },
    ];
    assert_eq!(
        errors(&d6),
        vec![
            (
                "participants[0].abort_cleanup[0].cap".into(),
                DECL_CLEANUP_NOT_IDEMPOTENT
            ),
            (
                "participants[0].abort_cleanup[1].filter".into(),
                DECL_CLEANUP_NOT_IDEMPOTENT
            ),
        ]
    );
    let mut d7 = decl();
    d7.lifecycle.prepared_event = d7.lifecycle.prepare_event.clone();
    assert_eq!(
        errors(&d7),
        vec![("lifecycle.prepared_event".into(), DECL_DUPLICATE_EVENT)]
    );
    assert!(
        toml::from_str::<EnvelopeType>("name = \"x\"\nlifecycle = {}\n").is_err(),
        "undeclared lifecycle fields do not parse"
    );
}

#[test]
fn abort_cleanup_is_idempotent_and_capped() {
    assert_eq!(subtract_capped(5, 9), 0);
    assert_eq!(subtract_capped(9, 5), 4);
    let l: Vec<String> = ["a", "e", "b", "a", "e"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let once = reverse_list(&l, &["e".into()]);
    assert_eq!(once, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(reverse_list(&once, &["e".into()]), once);

    let mut b = book("c-src", 100);
    let debit = [Change::Debit {
        account: "c-src".into(),
        amount: 60,
    }];
    assert_eq!(b.prepare("e-1", &decl(), &debit), Vote::Ack);
    assert_eq!(b.accounts["c-src"].counter("reserved"), 60);
    assert_eq!(
        b.prepare("e-2", &decl(), &debit),
        Vote::Nack,
        "only 40 left to reserve"
    );
    b.abort("e-1").unwrap();
    let once = b.clone();
    b.abort("e-1").unwrap();
    assert_eq!(b, once, "cleanup twice = cleanup once");
    let src = &b.accounts["c-src"];
    assert_eq!((src.counter("budget"), src.counter("reserved")), (100, 0));
    assert!(src.list("pending").is_empty());
    assert_eq!(b.aborted, vec!["e-1".to_string()]);
    // A commit after the abort is refused; a late prepare stages nothing.
    assert_eq!(
        b.commit("e-1").unwrap_err().code,
        RejectionCode::TerminalState
    );
    assert_eq!(
        b.prepare("e-1", &decl(), &debit),
        Vote::Ack,
        "the answer given stays the answer"
    );
    let mut late = book("c-src", 100);
    late.abort("e-9").unwrap();
    assert_eq!(late.prepare("e-9", &decl(), &debit), Vote::Nack);
    assert_eq!(late.accounts["c-src"].counter("reserved"), 0);
    // No commit before the participant's own ACK.
    let mut c = book("c-src", 100);
    assert_eq!(
        c.commit("e-1").unwrap_err().code,
        RejectionCode::NotPrepared
    );
    assert_eq!(
        c.prepare(
            "e-1",
            &decl(),
            &[Change::Debit {
                account: "c-src".into(),
                amount: 500
            }]
        ),
        Vote::Nack
    );
    assert_eq!(
        c.commit("e-1").unwrap_err().code,
        RejectionCode::NotPrepared
    );
    assert_eq!(c.accounts["c-src"].counter("budget"), 100);
}

// ---------------------------------------------------------------------------------------------
// The randomized test: random orders of delivery, duplicates, ticks and coordinator crashes.

#[derive(Clone, Debug)]
enum Msg {
    ToParticipant(String, Record),
    ToCoordinator(Record),
}

#[derive(Clone, Debug)]
enum Act {
    Deliver(usize),
    Duplicate(usize),
    Tick(u8),
    /// The coordinator writes the lifecycle records it owes.
    Emit,
    /// The coordinator crashes before writing what it owes, and restarts from its ledger.
    Crash,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        4 => any::<usize>().prop_map(Act::Deliver),
        2 => any::<usize>().prop_map(Act::Duplicate),
        1 => (0u8..20).prop_map(Act::Tick),
        2 => Just(Act::Emit),
        1 => Just(Act::Crash),
    ]
}

struct Sim {
    w: Env,
    inflight: Vec<Msg>,
    delivered: Vec<Msg>,
    /// Lifecycle records the coordinator owes (its effects, not yet written).
    owed: Vec<EnvelopeEffect>,
}

impl Sim {
    /// The coordinator applies a record; what it must emit next is owed.
    fn coordinator(&mut self, r: &Record) {
        match self.w.apply(r) {
            Ok(()) => self.owed.append(&mut self.w.effects),
            Err(e) => assert_eq!(
                e.code,
                RejectionCode::DuplicateRecord,
                "coordinator refused {r:?}: {e}"
            ),
        }
    }

    /// Writes every owed lifecycle record and sends it to the participants.
    fn follow(&mut self) {
        while !self.owed.is_empty() {
            let EnvelopeEffect::Emit {
                event,
                step,
                basis,
                to,
                ..
            } = self.owed.remove(0);
            let r = self.w.rec(&Cast::q(), &event, step, &[basis]);
            for p in to {
                self.inflight.push(Msg::ToParticipant(p, r.clone()));
            }
            self.coordinator(&r);
        }
    }

    /// A crash loses what was owed and not written; the restarted coordinator rebuilds the
    /// envelope from its ledger and emits what is due.
    fn crash(&mut self) {
        self.owed.clear();
        let rebuilt = self.w.replay();
        assert_eq!(
            Some(&rebuilt),
            self.w.env.as_ref(),
            "replay gives the same envelope"
        );
        self.owed.extend(rebuilt.due());
        self.w.env = Some(rebuilt);
    }

    fn participant(&mut self, who: &str, r: &Record) {
        let Operation::Envelope(op) = &r.op else {
            unreachable!()
        };
        let env = self.w.env.clone().unwrap();
        let book = self.w.books.get_mut(who).unwrap();
        match &op.step {
            EnvelopeStep::Prepare => {
                let vote = book.prepare(&env.id, &decl(), env.changes_of(who));
                let v = self.w.rec(
                    &party_of(who),
                    "",
                    EnvelopeStep::Vote {
                        participant: who.into(),
                        vote,
                        reason: String::new(),
                    },
                    &[r.id],
                );
                self.inflight.push(Msg::ToCoordinator(v));
            }
            EnvelopeStep::Commit => book
                .commit(&env.id)
                .expect("a commit reaches only participants that ACKed"),
            EnvelopeStep::Abort { .. } => book
                .abort(&env.id)
                .expect("an abort never follows a commit"),
            other => panic!("participants receive no {other:?}"),
        }
    }

    fn deliver(&mut self, m: Msg) {
        self.w.now += 7;
        match &m {
            Msg::ToParticipant(p, r) => self.participant(p, r),
            Msg::ToCoordinator(r) => self.coordinator(r),
        }
        self.delivered.push(m);
    }

    fn tick(&mut self, secs: u8) {
        self.w.now += i64::from(secs) * 1000;
        if !self.w.phase().is_terminal() {
            self.w.tick(self.w.now).unwrap();
            self.owed.append(&mut self.w.effects);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_envelope_ends_committed_or_aborted_everywhere_and_conserves_budget(
        balance in 0u64..120,
        amount in 1u64..100,
        acts in proptest::collection::vec(act(), 0..60),
    ) {
        let mut sim = Sim { w: Env::new(balance), inflight: Vec::new(), delivered: Vec::new(), owed: Vec::new() };
        let before: u64 = sim.w.books.values().map(|b| b.total("budget")).sum();
        sim.w.start(amount);
        sim.owed.append(&mut sim.w.effects);
        for a in acts {
            match a {
                Act::Deliver(i) if !sim.inflight.is_empty() => {
                    let m = sim.inflight.remove(i % sim.inflight.len());
                    sim.deliver(m);
                }
                Act::Duplicate(i) if !sim.delivered.is_empty() => {
                    let m = sim.delivered[i % sim.delivered.len()].clone();
                    sim.deliver(m);
                }
                Act::Tick(s) => sim.tick(s),
                Act::Emit => sim.follow(),
                Act::Crash => sim.crash(),
                _ => {}
            }
        }
        // Drain: everything in flight arrives, and time passes past the timeout.
        for _ in 0..4 {
            sim.follow();
            while !sim.inflight.is_empty() {
                let m = sim.inflight.remove(0);
                sim.deliver(m);
                sim.follow();
            }
            sim.tick(31);
        }
        sim.crash();
        let phase = sim.w.phase();
        prop_assert!(phase.is_terminal(), "ended {phase}");
        for (who, b) in &sim.w.books {
            prop_assert_eq!(b.outcomes.get("e-1"), Some(&phase), "{} disagrees", who);
            for acc in b.accounts.values() {
                prop_assert_eq!(acc.counter("reserved"), 0);
                prop_assert!(acc.list("pending").is_empty());
            }
        }
        let after: u64 = sim.w.books.values().map(|b| b.total("budget")).sum();
        prop_assert_eq!(before, after, "budget created or lost");
        let src = sim.w.books[SRC].accounts["c-src"].counter("budget");
        if phase == Phase::Committed {
            prop_assert!(balance >= amount);
            prop_assert_eq!(src, balance - amount);
        } else {
            prop_assert_eq!(src, balance);
        }
    }
}
