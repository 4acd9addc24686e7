//! Runs (seed 002; issue 12 items 1–5 and 7, pure form). The expectations come from the seed's
//! text and from the transition table as ARCHITECTURE.md writes it, not from the kernel's
//! constants: the state names and terminal sets are parsed from quoted seed sentences, and every
//! one of the 14 × 14 moves is checked against the documented table.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use accord_kernel::run::*;
use accord_kernel::*;
use common::*;
use proptest::prelude::*;

/// Seed 002, "Run states".
const SEED_STATES: &str = "The runtime uses fourteen exact states: pending, queued, planning, \
running, waiting_for_user, awaiting_approval, partially_approved, paused, recovering, completed, \
failed, rejected, canceled, and expired.";
/// Seed 002, "Failure recovery".
const SEED_TERMINAL: &str = "failed, rejected, canceled, and expired are different terminal results. \
paused and recovering are nonterminal states with possible future transitions.";
/// Issue 12, item 1 (completed is terminal too).
const ISSUE_TERMINAL: &str =
    "completed, failed, rejected, canceled and expired are terminal and distinct";
/// Seed 002, "Evidence".
const SEED_EVIDENCE: &str = "Evidence types include source_data, screenshot, report, log, diff, \
export, and audit_snapshot.";

fn words(list: &str) -> Vec<String> {
    list.split([',', ' ', '.'])
        .map(str::trim)
        .filter(|w| !w.is_empty() && *w != "and")
        .map(String::from)
        .collect()
}

fn seed_states() -> Vec<String> {
    words(SEED_STATES.split_once(':').unwrap().1)
}

fn seed_terminal() -> BTreeSet<String> {
    let mut t: BTreeSet<String> = words(SEED_TERMINAL.split(" are ").next().unwrap())
        .into_iter()
        .collect();
    t.extend(words(ISSUE_TERMINAL.split(" are ").next().unwrap()));
    t
}

/// The run table as ARCHITECTURE.md writes it: from -> allowed next states.
fn documented_table() -> BTreeMap<String, BTreeSet<String>> {
    let doc = include_str!("../../../ARCHITECTURE.md");
    let start = doc
        .find("## Runs: the transition table")
        .expect("ARCHITECTURE.md has the run table section");
    let mut table = BTreeMap::new();
    for line in doc[start..].lines().skip(1) {
        if line.starts_with("## ") {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        let from = cells[1].trim_matches('`').to_string();
        let to: BTreeSet<String> = cells[2]
            .split(',')
            .map(|s| s.trim().trim_matches('`').to_string())
            .filter(|s| RunState::from_wire_name(s).is_some())
            .collect();
        table.insert(from, to);
    }
    assert_eq!(table.len(), 14, "the documented table has a row per state");
    table
}

fn st(name: &str) -> RunState {
    RunState::from_wire_name(name).unwrap_or_else(|| panic!("{name} is not a run state"))
}

const EXEC: &str = "supplier";

/// A world of runs, driven with an explicit clock.
struct Runs {
    access: Access,
    runs: HashMap<String, Run>,
    /// The commitments runs execute (as the node derives them).
    commitments: HashMap<String, Commitment>,
    /// Who writes `start` and `body` records (the runs' executor).
    exec: Party,
    now: i64,
    next: u64,
    effects: Vec<RunEffect>,
    /// Every applied record with its time (for replay).
    log: Vec<(Record, i64)>,
}

impl Runs {
    fn new() -> Self {
        Runs {
            access: access(),
            runs: HashMap::new(),
            commitments: HashMap::new(),
            exec: Cast::e(),
            now: T0,
            next: 1000,
            effects: Vec::new(),
            log: Vec::new(),
        }
    }

    fn record(&mut self, author: &Party, commitment: &str, run: &str, body: RunBody) -> Record {
        self.next += 1;
        Record {
            id: rid(self.next),
            author: author.clone(),
            commitment: commitment.into(),
            basis: Vec::new(),
            items: Vec::new(),
            op: Operation::Run(Box::new(RunOperation {
                run: run.into(),
                body,
            })),
        }
    }

    fn apply(&mut self, r: Record) -> Result<RecordId, Rejection> {
        let RunOperation { run, .. } = match &r.op {
            Operation::Run(op) => op.as_ref().clone(),
            _ => unreachable!(),
        };
        let before = self.runs.get(&run).cloned();
        self.now += 10;
        match apply_run(&self.runs, &self.commitments, &r, &self.access, self.now) {
            Ok(a) => {
                self.effects = a.effects;
                self.runs.insert(run, a.next);
                self.log.push((r.clone(), self.now));
                Ok(r.id)
            }
            Err(e) => {
                assert_eq!(
                    self.runs.get(&run),
                    before.as_ref(),
                    "a rejection changed the run"
                );
                Err(e)
            }
        }
    }

    fn body(&mut self, run: &str, body: RunBody) -> Result<RecordId, Rejection> {
        let commitment = self
            .runs
            .get(run)
            .and_then(|r| r.commitment.clone())
            .unwrap_or_default();
        let exec = self.exec.clone();
        let r = self.record(&exec, &commitment, run, body);
        self.apply(r)
    }

    fn start(&mut self, run: &str, start: RunStart) -> Result<RecordId, Rejection> {
        let exec = self.exec.clone();
        let r = self.record(&exec, "", run, RunBody::Start(start));
        self.apply(r)
    }

    /// `who` starts run `run` executing the commitment of `c`.
    fn start_for(&mut self, who: &Party, c: &World, run: &str) -> Result<RecordId, Rejection> {
        self.commitments.insert(c.id.clone(), c.c().clone());
        let r = self.record(who, &c.id, run, RunBody::Start(RunStart::default()));
        self.apply(r)
    }

    fn move_to(
        &mut self,
        run: &str,
        to: RunState,
        context: TransitionContext,
    ) -> Result<RecordId, Rejection> {
        self.body(run, RunBody::Transition { to, context })
    }

    fn state(&self, run: &str) -> RunState {
        self.runs[run].state
    }

    fn action(&mut self, run: &str, a: Action) -> RecordId {
        self.body(run, RunBody::Action(a)).unwrap()
    }
}

fn meta() -> TransitionContext {
    TransitionContext {
        metadata: BTreeMap::from([("ticket".into(), "T-1".into())]),
        ..TransitionContext::default()
    }
}

/// The shortest path through the documented table from pending to `target`.
fn path(table: &BTreeMap<String, BTreeSet<String>>, target: &str) -> Vec<String> {
    let mut prev: BTreeMap<String, String> = BTreeMap::new();
    let mut q = VecDeque::from(["pending".to_string()]);
    let mut seen = BTreeSet::from(["pending".to_string()]);
    while let Some(s) = q.pop_front() {
        for n in &table[&s] {
            if seen.insert(n.clone()) {
                prev.insert(n.clone(), s.clone());
                q.push_back(n.clone());
            }
        }
    }
    let mut out = vec![target.to_string()];
    while let Some(p) = prev.get(out.last().unwrap()) {
        out.push(p.clone());
    }
    assert_eq!(out.last().unwrap(), "pending", "{target} is reachable");
    out.reverse();
    out.remove(0);
    out
}

fn run_in(table: &BTreeMap<String, BTreeSet<String>>, state: &str) -> Runs {
    let mut w = Runs::new();
    w.start("r", RunStart::default()).unwrap();
    for s in path(table, state) {
        w.move_to("r", st(&s), meta()).unwrap();
    }
    assert_eq!(w.state("r"), st(state));
    w
}

/// Run `r` in `state`, executing the promised commitment `c` (obligor carl, obligee olga,
/// acceptor ann, accountable xavier, principal pria): carl is its executor.
fn executing_in(table: &BTreeMap<String, BTreeSet<String>>, state: &str) -> (Runs, World) {
    let c = promised();
    let mut w = Runs::new();
    w.exec = Cast::c();
    w.start_for(&Cast::c(), &c, "r").unwrap();
    for s in path(table, state) {
        w.move_to("r", st(&s), meta()).unwrap();
    }
    assert_eq!(w.state("r"), st(state));
    (w, c)
}

#[test]
fn the_fourteen_states_are_the_seeds_and_no_synonyms() {
    let names: Vec<&str> = RunState::ALL.iter().map(|s| s.wire_name()).collect();
    assert_eq!(names, seed_states());
    for s in RunState::ALL {
        assert_eq!(RunState::from_wire_name(s.wire_name()), Some(s));
    }
    for synonym in [
        "done",
        "stopped",
        "needs review",
        "cancelled",
        "waiting",
        "approved",
    ] {
        assert_eq!(RunState::from_wire_name(synonym), None, "{synonym}");
    }
    let terminal = seed_terminal();
    for s in RunState::ALL {
        assert_eq!(s.is_terminal(), terminal.contains(s.wire_name()), "{s}");
    }
    assert!(!st("paused").is_terminal() && !st("recovering").is_terminal());
}

#[test]
fn the_code_table_is_the_documented_table() {
    let doc = documented_table();
    for row in &RUN_TRANSITIONS {
        let to: BTreeSet<String> = row.to.iter().map(|s| s.wire_name().to_string()).collect();
        assert_eq!(doc[row.from.wire_name()], to, "row {}", row.from);
    }
    let text = include_str!("../../../ARCHITECTURE.md");
    assert!(
        text.contains(&run::table::markdown()),
        "ARCHITECTURE.md has the rendered table"
    );
}

#[test]
fn every_allowed_and_every_forbidden_move() {
    let doc = documented_table();
    let mut allowed = 0;
    let mut refused = 0;
    for from in seed_states() {
        for to in seed_states() {
            let mut w = run_in(&doc, &from);
            let before = w.runs["r"].clone();
            let res = w.move_to("r", st(&to), meta());
            if doc[&from].contains(&to) {
                res.unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
                let r = &w.runs["r"];
                assert_eq!(r.state, st(&to));
                let last = r.transitions.last().unwrap();
                assert_eq!((last.body.prior, last.body.next), (st(&from), st(&to)));
                allowed += 1;
            } else {
                let e = res.expect_err(&format!("{from} -> {to} must be refused"));
                let code = if seed_terminal().contains(&from) {
                    RejectionCode::TerminalState
                } else {
                    RejectionCode::InvalidState
                };
                assert_eq!(e.code, code, "{from} -> {to}");
                assert_eq!(w.runs["r"], before);
                refused += 1;
            }
        }
    }
    assert_eq!(allowed + refused, 196);
    assert!(allowed > 0 && refused > 0);
}

#[test]
fn terminal_states_refuse_every_move_and_new_work() {
    let doc = documented_table();
    for t in seed_terminal() {
        let mut w = run_in(&doc, &t);
        for to in RunState::ALL {
            let e = w.move_to("r", to, meta()).unwrap_err();
            assert_eq!(e.code, RejectionCode::TerminalState, "{t} -> {to}");
        }
        let e = w.body(
            "r",
            RunBody::Action(Action {
                tool: "send".into(),
                ..Action::default()
            }),
        );
        assert_eq!(e.unwrap_err().code, RejectionCode::TerminalState);
        let e = w.body(
            "r",
            RunBody::Proposal(Proposal {
                summary: "x".into(),
                ..Proposal::default()
            }),
        );
        assert_eq!(e.unwrap_err().code, RejectionCode::TerminalState);
        // Review material may still arrive after the end.
        w.body(
            "r",
            RunBody::Evidence(Evidence {
                kind: EvidenceKind::Log,
                ..Evidence::default()
            }),
        )
        .unwrap();
        w.body(
            "r",
            RunBody::AuditEvent(AuditEvent {
                kind: "closed".into(),
                detail: String::new(),
            }),
        )
        .unwrap();
        assert_eq!(w.state("r"), st(&t));
    }
}

#[test]
fn approval_moves_need_a_proposal_evidence_or_metadata() {
    let doc = documented_table();
    let approval = ["awaiting_approval", "partially_approved"];
    let mut checked = 0;
    for from in seed_states() {
        for to in approval.iter().filter(|a| doc[&from].contains(**a)) {
            let mut w = run_in(&doc, &from);
            let e = w.move_to(
                "r",
                st(to),
                TransitionContext {
                    reason: "please".into(),
                    ..Default::default()
                },
            );
            assert_eq!(
                e.unwrap_err().code,
                RejectionCode::MissingApprovalContext,
                "{from} -> {to}"
            );
            assert_eq!(w.state("r"), st(&from));
            // A proposal that is not one of the run's records is no context.
            let e = w.move_to(
                "r",
                st(to),
                TransitionContext {
                    proposal: Some(rid(9)),
                    ..Default::default()
                },
            );
            assert_eq!(e.unwrap_err().code, RejectionCode::UnknownReference);
            checked += 1;
        }
    }
    assert!(checked >= 4, "every approval move is checked ({checked})");

    // Each of the three kinds of context suffices.
    for which in 0..3 {
        let mut w = run_in(&doc, "running");
        let proposal = w
            .body(
                "r",
                RunBody::Proposal(Proposal {
                    summary: "pay 100".into(),
                    ..Default::default()
                }),
            )
            .unwrap();
        let evidence = w
            .body(
                "r",
                RunBody::Evidence(Evidence {
                    kind: EvidenceKind::Report,
                    supports: Some(proposal),
                    ..Default::default()
                }),
            )
            .unwrap();
        let ctx = match which {
            0 => TransitionContext {
                proposal: Some(proposal),
                ..Default::default()
            },
            1 => TransitionContext {
                evidence: vec![evidence],
                ..Default::default()
            },
            _ => meta(),
        };
        w.move_to("r", st("awaiting_approval"), ctx.clone())
            .unwrap();
        assert_eq!(w.runs["r"].transitions.last().unwrap().body.context, ctx);
    }
}

#[test]
fn the_transition_log_keeps_prior_next_time_and_context() {
    let mut w = Runs::new();
    w.start("r", RunStart::default()).unwrap();
    w.move_to(
        "r",
        st("queued"),
        TransitionContext {
            reason: "scheduled".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let t1 = w.now;
    w.move_to("r", st("running"), TransitionContext::default())
        .unwrap();
    let log = &w.runs["r"].transitions;
    assert_eq!(log.len(), 2);
    assert_eq!(
        (log[0].body.prior, log[0].body.next, log[0].at),
        (st("pending"), st("queued"), t1)
    );
    assert_eq!(log[0].body.context.reason, "scheduled");
    assert_eq!(
        (log[1].body.prior, log[1].body.next),
        (st("queued"), st("running"))
    );
    assert!(log[1].at > log[0].at);
}

#[test]
fn records_stay_distinct_and_reference_their_run() {
    let mut w = run_in(&documented_table(), "running");
    let action = w.action(
        "r",
        Action {
            tool: "export".into(),
            idempotent: true,
            ..Default::default()
        },
    );
    for kind in words(SEED_EVIDENCE.split_once("include").unwrap().1) {
        let k = EvidenceKind::ALL
            .into_iter()
            .find(|k| k.wire_name() == Some(kind.as_str()));
        let k = k.unwrap_or_else(|| panic!("evidence kind {kind}"));
        w.body(
            "r",
            RunBody::Evidence(Evidence {
                kind: k,
                action: Some(action),
                artifact: Some(Artifact {
                    digest: [7; 32],
                    size: 1234,
                }),
                ..Default::default()
            }),
        )
        .unwrap();
    }
    assert_eq!(EvidenceKind::ALL.len(), 7);
    let e = w.body("r", RunBody::Evidence(Evidence::default()));
    assert_eq!(e.unwrap_err().code, RejectionCode::MissingField);
    let e = w.body(
        "r",
        RunBody::Evidence(Evidence {
            kind: EvidenceKind::Unknown(99),
            ..Default::default()
        }),
    );
    assert_eq!(e.unwrap_err().code, RejectionCode::Malformed);
    let e = w.body(
        "r",
        RunBody::Output(Output {
            action: Some(rid(4242)),
            ..Default::default()
        }),
    );
    assert_eq!(e.unwrap_err().code, RejectionCode::UnknownReference);
    w.body(
        "r",
        RunBody::Output(Output {
            action: Some(action),
            summary: "file".into(),
            ..Default::default()
        }),
    )
    .unwrap();
    w.body(
        "r",
        RunBody::AuditEvent(AuditEvent {
            kind: "tool_called".into(),
            detail: String::new(),
        }),
    )
    .unwrap();
    let r = &w.runs["r"];
    assert_eq!(
        (
            r.actions.len(),
            r.evidence.len(),
            r.outputs.len(),
            r.audit_events.len()
        ),
        (1, 7, 1, 1)
    );
    assert!(r.evidence.iter().all(|e| e.body.action == Some(action)));
}

/// Issue 27, item 1: "transitions, actions, proposals, evidence and outputs come from the run's
/// executor […]; writing a record never grants reading. […] Refusals say nothing about what
/// exists (the same answer as an unknown run)". The organisation is not a role: carl, of the
/// executor's organisation, is refused like anyone else.
#[test]
fn who_may_write_a_runs_records() {
    let mut w = run_in(&documented_table(), "running");
    let before = w.runs["r"].clone();
    let unknown = w
        .body(
            "nope",
            RunBody::AuditEvent(AuditEvent {
                kind: "x".into(),
                detail: String::new(),
            }),
        )
        .unwrap_err();
    assert_eq!(unknown.code, RejectionCode::UnknownRun);
    let pause = || RunBody::Transition {
        to: st("paused"),
        context: meta(),
    };
    let audit = || {
        RunBody::AuditEvent(AuditEvent {
            kind: "x".into(),
            detail: String::new(),
        })
    };
    for who in [Cast::o(), Cast::c()] {
        for body in [pause(), audit()] {
            let r = w.record(&who, "", "r", body);
            let e = w.apply(r).unwrap_err();
            assert_eq!(e.code, RejectionCode::UnknownRun, "{who:?}");
            assert_eq!(
                e.detail.replace("\"r\"", "?"),
                unknown.detail.replace("\"nope\"", "?")
            );
        }
    }
    // A run that executes no commitment has nobody in an approver's role.
    let p = w
        .body(
            "r",
            RunBody::Proposal(Proposal {
                summary: "ship".into(),
                ..Default::default()
            }),
        )
        .unwrap();
    let d = w.record(
        &Cast::o(),
        "",
        "r",
        RunBody::Decision(Decision {
            proposal: Some(p),
            verdict: Verdict::Approve,
            reason: String::new(),
        }),
    );
    assert_eq!(w.apply(d).unwrap_err().code, RejectionCode::UnknownRun);
    let r = w.record(&Cast::u(), "", "r", audit());
    assert_eq!(w.apply(r).unwrap_err().code, RejectionCode::NotAuthorized);
    assert_eq!(
        w.runs["r"].history.len(),
        before.history.len() + 1,
        "only the proposal"
    );
    // The same record twice, a second start.
    let r = w.record(&Cast::e(), "", "r", audit());
    w.apply(r.clone()).unwrap();
    assert_eq!(w.apply(r).unwrap_err().code, RejectionCode::DuplicateRecord);
    assert_eq!(
        w.start("r", RunStart::default()).unwrap_err().code,
        RejectionCode::RunExists
    );
    let r = w.record(&Cast::e(), "c-9", "r", pause());
    assert_eq!(w.apply(r).unwrap_err().code, RejectionCode::WrongCommitment);
}

/// Issue 27, item 1: "Creating a run for a commitment needs a role on it that allows execution
/// (its obligor, or whom the obligor delegates execution to)"; decisions come from the roles
/// seed 000 gives a say over the work; "A run's effects on its commitment are written only when
/// its executor may make those claims".
#[test]
fn a_commitments_run_is_its_obligors_and_its_approvers_decide() {
    let doc = documented_table();
    let c = promised();
    let mut w = Runs::new();
    // Not the obligor: eve (of the obligor's organisation) and olga (the obligee) are refused
    // as for a commitment that does not exist.
    let ghost = w.record(
        &Cast::c(),
        "ghost",
        "g",
        RunBody::Start(RunStart::default()),
    );
    let ghost = w.apply(ghost).unwrap_err();
    assert_eq!(ghost.code, RejectionCode::UnknownCommitment);
    for who in [Cast::e(), Cast::o()] {
        let e = w.start_for(&who, &c, "r").unwrap_err();
        assert_eq!(e.code, RejectionCode::UnknownCommitment, "{who:?}");
        assert_eq!(
            e.detail.replace(&c.id, "?"),
            ghost.detail.replace("ghost", "?")
        );
    }
    assert!(w.runs.is_empty());
    // The obligor executes it; its moves are its claims on the execution axis.
    w.exec = Cast::c();
    w.start_for(&Cast::c(), &c, "r").unwrap();
    for s in path(&doc, "running") {
        w.move_to("r", st(&s), meta()).unwrap();
    }
    assert!(matches!(
        w.effects.as_slice(),
        [RunEffect::ExecutionClaim { .. }]
    ));
    let p = w
        .body(
            "r",
            RunBody::Proposal(Proposal {
                summary: "ship".into(),
                ..Default::default()
            }),
        )
        .unwrap();
    let decide = |w: &mut Runs, who: &Party| {
        let d = w.record(
            who,
            &c.id,
            "r",
            RunBody::Decision(Decision {
                proposal: Some(p),
                verdict: Verdict::Approve,
                reason: String::new(),
            }),
        );
        w.apply(d).map(|_| ()).map_err(|e| e.code)
    };
    // Obligee, acceptor, accountable party and principal decide; the executor and a party with
    // no role do not.
    for who in [Cast::o(), Cast::a(), Cast::x(), Cast::pr()] {
        assert_eq!(decide(&mut w, &who), Ok(()), "{who:?}");
    }
    for who in [Cast::c(), Cast::e()] {
        assert_eq!(
            decide(&mut w, &who),
            Err(RejectionCode::UnknownRun),
            "{who:?}"
        );
    }
    // The obligee may decide but not drive.
    let r = w.record(
        &Cast::o(),
        &c.id,
        "r",
        RunBody::Transition {
            to: st("paused"),
            context: meta(),
        },
    );
    assert_eq!(w.apply(r).unwrap_err().code, RejectionCode::UnknownRun);
    // A wrong commitment is refused without naming the one the run executes.
    let r = w.record(
        &Cast::c(),
        "c-9",
        "r",
        RunBody::Transition {
            to: st("paused"),
            context: meta(),
        },
    );
    let e = w.apply(r).unwrap_err();
    assert_eq!(e.code, RejectionCode::WrongCommitment);
    assert!(!e.detail.contains(&c.id), "{}", e.detail);

    // carl delegates the obligation to nina: his run stays his, its claims stop.
    let mut c = c;
    let offer = c.ok(
        &Cast::c(),
        Operation::DelegateOffer {
            to: Some(Cast::n1()),
            handover_note: "yours".into(),
        },
    );
    c.ok(
        &Cast::n1(),
        Operation::DelegateAcceptance {
            offer_id: Some(offer),
        },
    );
    w.commitments.insert(c.id.clone(), c.c().clone());
    w.move_to("r", st("paused"), meta()).unwrap();
    assert_eq!(w.effects, vec![], "carl is no longer the obligor");
    let r = w.record(
        &Cast::n1(),
        &c.id,
        "r",
        RunBody::AuditEvent(AuditEvent {
            kind: "x".into(),
            detail: String::new(),
        }),
    );
    assert_eq!(w.apply(r).unwrap_err().code, RejectionCode::UnknownRun);
    // nina continues it in her own run; eve may not name it as a parent.
    let r = w.record(
        &Cast::n1(),
        &c.id,
        "r2",
        RunBody::Start(RunStart {
            parent: Some("r".into()),
            ..Default::default()
        }),
    );
    w.apply(r).unwrap();
    let r = w.record(
        &Cast::e(),
        "",
        "r3",
        RunBody::Start(RunStart {
            parent: Some("r".into()),
            ..Default::default()
        }),
    );
    assert_eq!(w.apply(r).unwrap_err().code, RejectionCode::UnknownRun);
    w.exec = Cast::n1();
    w.move_to("r2", st("running"), meta()).unwrap();
    assert!(matches!(
        w.effects.as_slice(),
        [RunEffect::ExecutionClaim { .. }]
    ));
}

#[test]
fn run_records_and_commitment_records_go_to_their_own_machines() {
    let mut w = Runs::new();
    let r = w.record(&Cast::e(), "c-1", "r", RunBody::Start(RunStart::default()));
    let e = apply(None, &r, &access(), T0).unwrap_err();
    assert_eq!(e.code, RejectionCode::WrongMachine);
    assert_eq!(r.op.wire_name(), "run_start");
    let promise = Record {
        id: rid(77),
        author: Cast::c(),
        commitment: "c-1".into(),
        basis: vec![],
        items: vec![],
        op: Operation::Promise,
    };
    let none: HashMap<String, Commitment> = HashMap::new();
    let e = apply_run(&HashMap::new(), &none, &promise, &access(), T0).unwrap_err();
    assert_eq!(e.code, RejectionCode::WrongMachine);
}

#[test]
fn a_receipt_leaves_missing_fields_missing() {
    let mut w = Runs::new();
    w.start("r", RunStart::default()).unwrap();
    w.move_to("r", st("queued"), TransitionContext::default())
        .unwrap();
    let rc = receipt(&w.runs["r"], 0);
    assert_eq!(rc.trigger, None);
    assert_eq!(rc.initiator, None);
    assert_eq!(rc.parent, None);
    assert_eq!(rc.commitment, None);
    assert_eq!(rc.started_at, None, "never ran");
    assert_eq!(rc.ended_at, None, "not ended");
    assert_eq!(rc.persistence_mode, None);
    assert!(rc.evidence.is_empty() && rc.decisions.is_empty() && !rc.output_present);
    let json = serde_json::to_value(&rc).unwrap();
    for absent in [
        "trigger",
        "initiator",
        "parent",
        "commitment",
        "started_at",
        "ended_at",
        "persistence_mode",
    ] {
        assert!(
            json.get(absent).is_none(),
            "{absent} must be absent, not manufactured"
        );
    }
    assert_eq!(json["state"], "queued");
    assert_eq!(rc.transitions.len(), 1);

    // Completed without evidence: the receipt says completed and shows no evidence.
    w.move_to("r", st("running"), TransitionContext::default())
        .unwrap();
    let started = w.now;
    w.move_to("r", st("completed"), TransitionContext::default())
        .unwrap();
    let rc = receipt(&w.runs["r"], 0);
    assert_eq!((rc.state, rc.terminal), (st("completed"), true));
    assert_eq!(rc.started_at, Some(started));
    assert_eq!(rc.ended_at, Some(w.now));
    assert!(rc.evidence.is_empty());
    assert_eq!(
        rc.references().len(),
        1 + 3,
        "the start and three transitions, nothing copied"
    );
}

#[test]
fn a_receipt_carries_what_was_recorded() {
    let mut w = Runs::new();
    w.start(
        "r",
        RunStart {
            trigger: "schedule:nightly".into(),
            initiator: Some(Cast::o()),
            persistence: "ledger".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let rc = receipt(&w.runs["r"], 2);
    assert_eq!(rc.trigger.as_deref(), Some("schedule:nightly"));
    assert_eq!(rc.initiator, Some(Cast::o()));
    assert_eq!(rc.persistence_mode.as_deref(), Some("ledger"));
    assert_eq!(rc.child_runs, 2);
}

#[test]
fn an_approval_gated_side_effect_links_its_decision_or_says_it_has_none() {
    let doc = documented_table();
    // Approved.
    let (mut w, c) = executing_in(&doc, "running");
    let p = w
        .body(
            "r",
            RunBody::Proposal(Proposal {
                summary: "pay invoice".into(),
                ..Default::default()
            }),
        )
        .unwrap();
    w.move_to(
        "r",
        st("awaiting_approval"),
        TransitionContext {
            proposal: Some(p),
            ..Default::default()
        },
    )
    .unwrap();
    let d = w.record(
        &Cast::o(),
        &c.id,
        "r",
        RunBody::Decision(Decision {
            proposal: Some(p),
            verdict: Verdict::Approve,
            reason: String::new(),
        }),
    );
    let d = w.apply(d).unwrap();
    w.move_to(
        "r",
        st("running"),
        TransitionContext {
            proposal: Some(p),
            ..Default::default()
        },
    )
    .unwrap();
    let a = w.action(
        "r",
        Action {
            tool: "pay".into(),
            side_effect: true,
            approval_gated: true,
            proposal: Some(p),
            ..Default::default()
        },
    );
    w.move_to("r", st("completed"), TransitionContext::default())
        .unwrap();
    let rc = receipt(&w.runs["r"], 0);
    assert_eq!(
        rc.gated_actions,
        vec![GatedAction {
            action: a,
            approvals: vec![d]
        }]
    );
    assert_eq!(rc.unapproved_gated_actions().count(), 0);
    assert_eq!(rc.decisions, vec![d]);

    // No decision: completed, and the receipt says the gated action has none.
    let (mut w, c) = executing_in(&doc, "running");
    let p = w
        .body(
            "r",
            RunBody::Proposal(Proposal {
                summary: "pay invoice".into(),
                ..Default::default()
            }),
        )
        .unwrap();
    let reject = w.record(
        &Cast::o(),
        &c.id,
        "r",
        RunBody::Decision(Decision {
            proposal: Some(p),
            verdict: Verdict::Reject,
            reason: "no".into(),
        }),
    );
    w.apply(reject).unwrap();
    let a = w.action(
        "r",
        Action {
            tool: "pay".into(),
            side_effect: true,
            approval_gated: true,
            proposal: Some(p),
            ..Default::default()
        },
    );
    w.move_to("r", st("completed"), TransitionContext::default())
        .unwrap();
    let rc = receipt(&w.runs["r"], 0);
    assert_eq!(rc.state, st("completed"));
    assert_eq!(rc.unapproved_gated_actions().collect::<Vec<_>>(), vec![&a]);
}

#[test]
fn recovery_is_a_new_run_linked_to_its_parent() {
    let doc = documented_table();
    let mut w = run_in(&doc, "running");
    let send = w.action(
        "r",
        Action {
            tool: "send_email".into(),
            side_effect: true,
            idempotent: false,
            ..Default::default()
        },
    );
    let read = w.action(
        "r",
        Action {
            tool: "read".into(),
            idempotent: true,
            ..Default::default()
        },
    );
    w.body(
        "r",
        RunBody::Output(Output {
            action: Some(send),
            summary: "sent".into(),
            ..Default::default()
        }),
    )
    .unwrap();
    w.move_to(
        "r",
        st("failed"),
        TransitionContext {
            reason: "timeout".into(),
            ..Default::default()
        },
    )
    .unwrap();
    // The failed run cannot be reopened by writing a state.
    assert_eq!(
        w.move_to("r", st("running"), meta()).unwrap_err().code,
        RejectionCode::TerminalState
    );

    // What the first run already did.
    let prior = prior_work(&w.runs["r"], 0);
    assert_eq!(prior.actions, vec![send, read]);
    assert_eq!(prior.actions_with_output, vec![send]);
    assert_eq!(prior.side_effects, vec![send]);
    assert_eq!(prior.not_idempotent, vec![send]);
    assert!(prior.needs_confirmation);

    // A replay without confirmation is refused; with it, the new run names its parent.
    let child = RunStart {
        parent: Some("r".into()),
        ..Default::default()
    };
    assert_eq!(
        w.start("r2", child.clone()).unwrap_err().code,
        RejectionCode::ReplayNotConfirmed
    );
    assert!(!w.runs.contains_key("r2"));
    w.start(
        "r2",
        RunStart {
            replay_confirmed: true,
            ..child
        },
    )
    .unwrap();
    assert_eq!(w.runs["r2"].parent(), Some("r"));
    assert_eq!(w.state("r2"), st("pending"));
    assert_eq!(w.state("r"), st("failed"), "the parent is unchanged");
    let rc = receipt(&w.runs["r2"], 0);
    assert_eq!(rc.parent.as_deref(), Some("r"));
    assert_eq!(child_count(w.runs.values(), "r"), 1);
    assert_eq!(
        receipt(&w.runs["r"], child_count(w.runs.values(), "r")).child_runs,
        1
    );
    let orphan = RunStart {
        parent: Some("ghost".into()),
        ..Default::default()
    };
    assert_eq!(
        w.start("r3", orphan).unwrap_err().code,
        RejectionCode::UnknownRun
    );

    // A parent whose actions are all idempotent replays without confirmation.
    let mut w = run_in(&doc, "running");
    w.action(
        "r",
        Action {
            tool: "read".into(),
            idempotent: true,
            ..Default::default()
        },
    );
    w.move_to("r", st("failed"), TransitionContext::default())
        .unwrap();
    assert!(!prior_work(&w.runs["r"], 0).needs_confirmation);
    w.start(
        "r2",
        RunStart {
            parent: Some("r".into()),
            ..Default::default()
        },
    )
    .unwrap();
}

#[test]
fn a_run_drives_the_execution_axis_of_the_commitment_it_executes() {
    let mut c = promised();
    let mut w = Runs::new();
    w.exec = Cast::c();
    w.start_for(&Cast::c(), &c, "r").unwrap();
    assert_eq!(w.runs["r"].commitment.as_deref(), Some(c.id.as_str()));
    assert_eq!(w.runs["r"].organisation(), EXEC);
    let doc = documented_table();
    for s in path(&doc, "completed") {
        let before = execution_report(w.state("r"));
        w.move_to("r", st(&s), meta()).unwrap();
        let after = execution_report(st(&s));
        let claims: Vec<&RunEffect> = w
            .effects
            .iter()
            .filter(|e| matches!(e, RunEffect::ExecutionClaim { .. }))
            .collect();
        if before == after && !st(&s).is_terminal() {
            assert!(claims.is_empty(), "{s}: no new claim");
            continue;
        }
        let [
            RunEffect::ExecutionClaim {
                commitment,
                execution,
                ..
            },
        ] = claims.as_slice()
        else {
            panic!("{s}: one execution claim, got {:?}", w.effects);
        };
        assert_eq!(commitment, &c.id);
        // The node writes the claim as an observation; the commitment's axis follows.
        c.ok(
            &Cast::c(),
            observe(execution.expect("a claim"), Some(60_000)),
        );
        assert_eq!(c.view().execution, run::execution(st(&s)), "{s}");
    }
    assert_eq!(c.view().execution, Execution::Completed);

    // An action acting upon a commitment record asks for acted_upon.
    let c = promised();
    let mut w = Runs::new();
    w.exec = Cast::c();
    w.start_for(&Cast::c(), &c, "r").unwrap();
    w.move_to("r", st("running"), meta()).unwrap();
    let a = w.action(
        "r",
        Action {
            tool: "ship".into(),
            acts_on: Some(rid(5)),
            ..Default::default()
        },
    );
    assert_eq!(
        w.effects,
        vec![RunEffect::ActedUpon {
            commitment: c.id.clone(),
            run: "r".into(),
            action: a,
            record: rid(5),
            act: "ship".into()
        }]
    );
}

#[test]
fn replay_gives_the_same_run() {
    let mut w = run_in(&documented_table(), "running");
    w.action(
        "r",
        Action {
            tool: "x".into(),
            ..Default::default()
        },
    );
    // Rebuild from scratch: the same records at the same times give the same value.
    let r = &w.runs["r"];
    assert_eq!(r.history.len(), 1 + r.transitions.len() + r.actions.len());
    let mut again = Runs::new();
    again.start("r", RunStart::default()).unwrap();
    for s in path(&documented_table(), "running") {
        again.move_to("r", st(&s), meta()).unwrap();
    }
    again.action(
        "r",
        Action {
            tool: "x".into(),
            ..Default::default()
        },
    );
    assert_eq!(again.runs["r"], w.runs["r"]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random requested moves, with or without context: each accepted move is in the documented
    /// table, terminal states never change, approval states are entered only with context, a
    /// refusal changes nothing (checked in `Runs::apply`), and a replay of the accepted records
    /// gives the same run.
    #[test]
    fn random_moves_follow_the_documented_table(
        moves in proptest::collection::vec((0usize..14, any::<bool>()), 0..40),
    ) {
        let doc = documented_table();
        let mut w = Runs::new();
        w.start("r", RunStart::default()).unwrap();
        for (i, with_context) in moves {
            let to = RunState::ALL[i];
            let from = w.state("r");
            let ctx = if with_context { meta() } else { TransitionContext::default() };
            match w.move_to("r", to, ctx) {
                Ok(_) => {
                    prop_assert!(doc[from.wire_name()].contains(to.wire_name()), "{} -> {}", from, to);
                    prop_assert!(!from.is_terminal());
                    prop_assert!(with_context || !to.is_approval());
                }
                Err(e) => {
                    prop_assert_eq!(w.state("r"), from);
                    let expected = if from.is_terminal() {
                        RejectionCode::TerminalState
                    } else if !doc[from.wire_name()].contains(to.wire_name()) {
                        RejectionCode::InvalidState
                    } else {
                        RejectionCode::MissingApprovalContext
                    };
                    prop_assert_eq!(e.code, expected);
                }
            }
        }
        let mut again: HashMap<String, Run> = HashMap::new();
        let none: HashMap<String, Commitment> = HashMap::new();
        for (r, t) in &w.log {
            let a = apply_run(&again, &none, r, &access(), *t).unwrap();
            again.insert("r".into(), a.next);
        }
        prop_assert_eq!(&again["r"], &w.runs["r"]);
    }
}

/// Issue 27: a run holds at most 1,024 records, its `run_start` included (README, "Runs": the
/// documented bound, so every node decides alike); the next is refused `run_full` and the run is
/// unchanged, and the work goes on in a child run naming it as `parent` (seed 002's recovery
/// link).
#[test]
fn a_run_holds_a_bounded_number_of_records_and_continues_in_a_child() {
    const DOCUMENTED: usize = 1024;
    let event = |n: usize| {
        RunBody::AuditEvent(AuditEvent {
            kind: "step".into(),
            detail: format!("event {n}"),
        })
    };
    let mut w = Runs::new();
    w.start("r", RunStart::default()).unwrap();
    for n in 1..DOCUMENTED {
        w.body("r", event(n))
            .unwrap_or_else(|e| panic!("record {} of {DOCUMENTED}: {e}", n + 1));
    }
    assert_eq!(w.runs["r"].audit_events.len(), DOCUMENTED - 1);
    let full = w.body("r", event(DOCUMENTED)).unwrap_err();
    assert_eq!(full.code, RejectionCode::RunFull, "{full}");
    // A transition is refused alike: the bound counts every kind of record.
    let moved = w.move_to("r", RunState::Queued, TransitionContext::default());
    assert_eq!(moved.unwrap_err().code, RejectionCode::RunFull);
    assert_eq!(w.state("r"), RunState::Pending);
    w.start(
        "r2",
        RunStart {
            parent: Some("r".into()),
            ..RunStart::default()
        },
    )
    .unwrap();
    w.body("r2", event(0)).unwrap();
    assert_eq!(w.runs["r2"].audit_events.len(), 1);
}

/// The observation the node writes for a run's claim (`RunEffect::ExecutionClaim`), as
/// `services/run_claims` builds it.
fn claim_observation(e: &RunEffect) -> Operation {
    let RunEffect::ExecutionClaim {
        execution,
        heartbeat_interval_ms,
        left_cleanly,
        ..
    } = e
    else {
        panic!("not a claim: {e:?}")
    };
    Operation::Observation(Box::new(Observation {
        execution: execution.unwrap_or(ExecutionReport::Unspecified),
        heartbeat_interval_ms: Some(*heartbeat_interval_ms),
        left_cleanly: *left_cleanly,
        ..Observation::default()
    }))
}

/// Issue 29: seed 000, "active — Execution running; liveness live or not applicable" and
/// "Execution, control and liveness come from executor or external Claims". A run claims its
/// commitment from its start; every record its executor writes is a heartbeat (one claim per
/// half interval), so liveness is live while the run progresses and stale once it falls
/// silent for its declared interval; a terminal run leaves cleanly.
#[test]
fn a_runs_records_are_its_executors_heartbeats() {
    let mut c = promised();
    let mut w = Runs::new();
    w.exec = Cast::c();
    w.commitments.insert(c.id.clone(), c.c().clone());
    let start = w.record(
        &Cast::c(),
        &c.id.clone(),
        "r",
        RunBody::Start(RunStart {
            heartbeat_interval_ms: Some(60_000),
            ..Default::default()
        }),
    );
    w.apply(start).unwrap();
    let [claim] = w.effects.as_slice() else {
        panic!("one claim at the start, got {:?}", w.effects)
    };
    assert!(matches!(
        claim,
        RunEffect::ExecutionClaim {
            execution: Some(ExecutionReport::NotStarted),
            heartbeat_interval_ms: 60_000,
            left_cleanly: false,
            ..
        }
    ));
    c.now = w.now;
    c.ok(&Cast::c(), claim_observation(claim));
    assert_eq!(c.view().liveness, Liveness::Live);
    let doc = documented_table();
    for s in path(&doc, "running") {
        w.move_to("r", st(&s), meta()).unwrap();
        for e in w.effects.clone() {
            c.now = w.now;
            c.ok(&Cast::c(), claim_observation(&e));
        }
    }
    assert_eq!(c.view().execution, Execution::Running);
    assert_eq!(c.view().category, Category::Active);

    // Within half the interval, an action is no new claim; past it, the next one is a
    // heartbeat (no execution claimed), and liveness stays live.
    w.action(
        "r",
        Action {
            tool: "step".into(),
            ..Default::default()
        },
    );
    assert!(w.effects.is_empty(), "{:?}", w.effects);
    w.now += 30_000;
    w.action(
        "r",
        Action {
            tool: "step".into(),
            ..Default::default()
        },
    );
    let [beat] = w.effects.as_slice() else {
        panic!("one heartbeat, got {:?}", w.effects)
    };
    assert!(matches!(
        beat,
        RunEffect::ExecutionClaim {
            execution: None,
            ..
        }
    ));
    c.now = w.now;
    c.ok(&Cast::c(), claim_observation(beat));
    c.now = w.now + 59_000;
    assert_eq!(c.view().liveness, Liveness::Live);
    assert_eq!(
        c.view().execution,
        Execution::Running,
        "a heartbeat keeps the claim"
    );
    // Silent past the interval: stale.
    c.now = w.now + 60_001;
    assert_eq!(c.view().liveness, Liveness::Stale);

    // An approver's decision is not the executor's sign of life.
    w.now += 50_000;
    let p = w
        .body(
            "r",
            RunBody::Proposal(Proposal {
                summary: "ship".into(),
                ..Default::default()
            }),
        )
        .unwrap();
    assert!(
        !w.effects.is_empty(),
        "the proposal is the executor's heartbeat"
    );
    w.now += 50_000;
    let d = w.record(
        &Cast::o(),
        &c.id.clone(),
        "r",
        RunBody::Decision(Decision {
            proposal: Some(p),
            verdict: Verdict::Approve,
            ..Default::default()
        }),
    );
    w.apply(d).unwrap();
    assert!(w.effects.is_empty(), "a decision claimed {:?}", w.effects);

    // The run ends: its executor leaves cleanly.
    w.move_to("r", st("completed"), meta()).unwrap();
    assert!(
        w.effects.iter().any(|e| matches!(
            e,
            RunEffect::ExecutionClaim {
                execution: Some(ExecutionReport::Completed),
                left_cleanly: true,
                ..
            }
        )),
        "{:?}",
        w.effects
    );
}

/// A run that declares no heartbeat interval claims with the default: one hour (README, "Runs").
#[test]
fn a_run_without_a_declared_interval_claims_one_hour() {
    let c = promised();
    let mut w = Runs::new();
    w.exec = Cast::c();
    w.start_for(&Cast::c(), &c, "r").unwrap();
    assert!(matches!(
        w.effects.as_slice(),
        [RunEffect::ExecutionClaim {
            heartbeat_interval_ms: 3_600_000,
            ..
        }]
    ));
}
