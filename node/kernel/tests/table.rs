//! Every operation from every state by every role, checked against seed 000's tables written
//! out once more, independently of the kernel's tables, as one expectation table.
//!
//! Nothing here is taken from the kernel's own constants: the operations are listed by the test
//! ([`KEYS`]), terminality comes from the seed's States table ([`SEED_STATES`]), who Access lets
//! act comes from the test's own cast ([`cast`]), and the revoke rows are the seed's "Revoke
//! requests" table written out. Where the seed is silent, the row's note says so and the cell is
//! the kernel's documented choice.
//!
//! The fixture is a commitment forced into each of the 13 states, carrying every context an
//! operation needs (a current counter, open delegate/assign offers, a reject to dispute, an
//! open defer, an open revoke of the right kind, open conditions, a due validity statement, an
//! expired lease, a statement past its implicit acceptance window), so that an allowed
//! operation succeeds and a refused one is refused by state or by role.

mod common;

use accord_kernel::commitment::{
    ClaimState, CounterVersion, Deferral, ExecutorState, Handover, HandoverOffer, HandoverPhase,
    OpenCondition, OpenRevoke, Statement, StopState, Validity,
};
use accord_kernel::rules::{self, RuleKey};
use accord_kernel::*;
use common::*;

use Role as R;

/// (operation, from-states, roles, result) — seed 000 "Operations", "Revoke requests",
/// "Records written by the Work service", "Assignment"; "-" = no state change.
const OPEN: &[&str] = &[
    "requested",
    "countered",
    "conditionally_promised",
    "promised",
    "stated",
];
const ANY: &[&str] = &[
    "requested",
    "countered",
    "conditionally_promised",
    "promised",
    "stated",
    "accepted",
    "declined",
    "withdrawn",
    "cancelled",
    "released",
    "obsolete",
    "expired",
    "closed_administratively",
];
const CANDIDATE_OR_OBLIGOR: &[Role] = &[R::CandidateObligor, R::Obligor];

const SEED: &str = "seed";

/// (operation, from-states, roles, result, source).
type Row = (
    &'static str,
    &'static [&'static str],
    &'static [Role],
    &'static str,
    &'static str,
);

/// (request, asked by, asked of, on allow, on refuse).
type RevokeRow = (
    &'static str,
    &'static [Role],
    &'static [Role],
    &'static str,
    &'static str,
);

/// (operation, from-states, roles, result, source) — seed 000 "Operations", "Revoke requests",
/// "Records written by the Work service", "Assignment", "Conditions and gates", "Multi-party
/// aggregation", "Stop requests", "Control handover"; "-" = no state change.
#[rustfmt::skip]
const EXPECT: &[Row] = &[
    ("promise", &["requested"], &[R::CandidateObligor], "promised", SEED),
    ("promise_conditional", &["requested"], &[R::CandidateObligor], "conditionally_promised", SEED),
    ("decline", &["requested"], &[R::CandidateObligor], "declined", SEED),
    ("counter", &["requested"], &[R::CandidateObligor], "countered", SEED),
    ("counter", &["countered"], &[R::Obligee], "requested", SEED),
    ("accept_counter", &["countered"], &[R::Obligee], "promised", SEED),
    ("state", &["promised"], &[R::Obligor], "stated", SEED),
    ("accept", &["stated"], &[R::Acceptor, R::WorkService], "accepted", SEED),
    ("reject", &["stated"], &[R::Acceptor], "promised", SEED),
    ("cancel", &["conditionally_promised", "promised", "stated"], &[R::Obligor], "cancelled", SEED),
    ("release", OPEN, &[R::Obligee], "released", SEED),
    ("delegate(offer)", &["promised", "conditionally_promised"], &[R::Obligor], "-", SEED),
    ("delegate(acceptance)", &["promised", "conditionally_promised"], &[R::DelegateTarget], "-", SEED),
    ("assign(offer)", OPEN, &[R::Obligee], "-", SEED),
    ("assign(acceptance)", OPEN, &[R::AssignTarget], "-", SEED),
    ("dispute", ANY, &[R::Obligor], "-", "seed: 'After a reject or an open revoke_acceptance'; any state is the kernel's reading (it changes none)"),
    ("defer", &["requested", "countered", "conditionally_promised", "promised"], &[R::Obligee, R::Obligor], "-", SEED),
    ("resume", OPEN, &[R::Obligee, R::Obligor, R::WorkService], "-", SEED),
    // "Revoke requests": asked by / asked of / on allow / on refuse.
    ("revoke_request", OPEN, &[R::Obligee], "-", "seed silent on from-states: any open state"),
    ("revoke_promise", &["conditionally_promised", "promised"], &[R::Obligor], "-", "seed: a promise exists"),
    ("revoke_statement", &["stated"], &[R::Obligor], "-", "seed: a statement exists"),
    ("revoke_acceptance", &["accepted"], &[R::Acceptor], "-", "seed: an acceptance exists"),
    ("allow(revoke_request)", OPEN, CANDIDATE_OR_OBLIGOR, "withdrawn", SEED),
    ("refuse(revoke_request)", OPEN, CANDIDATE_OR_OBLIGOR, "-", SEED),
    ("allow(revoke_promise)", &["conditionally_promised", "promised"], &[R::Obligee], "withdrawn", SEED),
    ("refuse(revoke_promise)", &["conditionally_promised", "promised"], &[R::Obligee], "-", SEED),
    ("allow(revoke_statement)", &["stated"], &[R::Acceptor], "promised", SEED),
    ("refuse(revoke_statement)", &["stated"], &[R::Acceptor], "-", SEED),
    ("allow(revoke_acceptance)", &["accepted"], &[R::Obligor], "-", SEED),
    ("refuse(revoke_acceptance)", &["accepted"], &[R::Obligor], "-", SEED),
    ("amend", OPEN, &[R::Obligee], "-", "seed: 'See amendments' (not in the seed); obligee is the kernel's choice"),
    ("notice", OPEN, &[R::Obligor], "-", SEED),
    ("declare_obsolete", OPEN, &[R::Obligee, R::Principal], "obsolete", SEED),
    ("expire", &["requested", "countered", "conditionally_promised"], &[R::WorkService], "expired", SEED),
    ("administrative_close", OPEN, &[R::AdministrativeAuthority], "closed_administratively", SEED),
    ("claim", &["requested"], &[R::QueueCandidate], "promised", SEED),
    ("unclaim", &["promised"], &[R::ClaimingObligor, R::WorkService], "requested", SEED),
    ("forward", OPEN, &[R::QueueOwner, R::ClaimingObligor], "-", "seed silent on from-states"),
    ("nominate", OPEN, &[R::QueueOwner, R::Obligee, R::Accountable], "-", "seed silent on from-states"),
    ("offer", &["requested"], &[R::QueueOwner, R::WorkService], "-", "seed silent on from-states"),
    ("reassign", &["requested", "countered", "conditionally_promised", "promised"], &[R::QueueOwner, R::Accountable], "-", "seed silent on from-states"),
    ("renew_lease", OPEN, &[R::Obligor], "-", "seed silent on from-states"),
    ("open_condition", OPEN, &[R::Obligee, R::Obligor], "-", "seed silent on who opens a Condition"),
    ("withdraw_condition", OPEN, &[R::ConditionOwner], "-", "seed: 'the Condition owner (by withdrawing)'"),
    ("satisfy_condition", OPEN, &[R::ConditionAddressee], "-", "seed: 'The addressed party (by satisfying)'"),
    ("withdraw_condition(precondition)", &["conditionally_promised"], &[R::ConditionOwner], "promised", "seed silent: a withdrawn precondition makes the promise unconditional"),
    ("satisfy_condition(precondition)", &["conditionally_promised"], &[R::ConditionAddressee], "promised", "seed silent: a satisfied precondition makes the promise unconditional"),
    ("report_consumption", OPEN, &[R::Executor], "-", "seed silent: an executor of the obligor's organisation"),
    ("acted_upon", OPEN, &[R::Executor], "-", "seed: 'An executor reported an Act'"),
    ("admission", ANY, &[R::LocalParty], "-", "seed names no role (Access decides); a local declaration of this node"),
    ("gate_decision", OPEN, &[R::ConditionAddressee], "-", "seed: participants answer; the Work service party only closes requests as obsolete (aggregation.rs)"),
    ("observation", OPEN, &[R::Executor, R::ExternalObserver], "-", "seed: 'executor or external Claims'; executor = the obligor's organisation; external = an Access Observer grant for it"),
    ("stop_request", OPEN, &[R::Accountable, R::Obligee, R::Principal], "-", "seed: 'accountable party (handover, stop request)'; obligee and principal are the kernel's choice"),
    ("stop_response", OPEN, &[R::Executor], "-", "seed silent on who: the executor"),
    ("resume_after_stop", OPEN, &[R::Accountable, R::Obligee, R::Principal], "-", "seed silent on who: those who may ask a stop"),
    ("control_lease", OPEN, &[R::Accountable, R::Obligee], "-", "seed silent on who"),
    ("hand_back_control", OPEN, &[R::ControlHolder], "-", "seed: the person holding control"),
    ("recheck", OPEN, &[R::Accountable, R::Obligee, R::Obligor], "-", "seed silent on who"),
];

/// Seed 000 "States": wire name and the Terminal column.
const SEED_STATES: &[(&str, bool)] = &[
    ("requested", false),
    ("countered", false),
    ("conditionally_promised", false),
    ("promised", false),
    ("stated", false),
    ("accepted", true),
    ("declined", true),
    ("withdrawn", true),
    ("cancelled", true),
    ("released", true),
    ("obsolete", true),
    ("expired", true),
    ("closed_administratively", true),
];

fn seed_terminal(s: State) -> bool {
    SEED_STATES
        .iter()
        .find(|(n, _)| *n == s.wire_name())
        .map(|(_, t)| *t)
        .expect("a seed state")
}

/// Every operation the table checks, listed by the test (not taken from the kernel).
const KEYS: &[RuleKey] = &[
    RuleKey::Promise,
    RuleKey::PromiseConditional,
    RuleKey::Decline,
    RuleKey::Counter,
    RuleKey::AcceptCounter,
    RuleKey::State,
    RuleKey::Accept,
    RuleKey::Reject,
    RuleKey::Cancel,
    RuleKey::Release,
    RuleKey::DelegateOffer,
    RuleKey::DelegateAcceptance,
    RuleKey::AssignOffer,
    RuleKey::AssignAcceptance,
    RuleKey::Dispute,
    RuleKey::Defer,
    RuleKey::Resume,
    RuleKey::Revoke(RevokeKind::Request),
    RuleKey::Revoke(RevokeKind::Promise),
    RuleKey::Revoke(RevokeKind::Statement),
    RuleKey::Revoke(RevokeKind::Acceptance),
    RuleKey::Allow(RevokeKind::Request),
    RuleKey::Allow(RevokeKind::Promise),
    RuleKey::Allow(RevokeKind::Statement),
    RuleKey::Allow(RevokeKind::Acceptance),
    RuleKey::Refuse(RevokeKind::Request),
    RuleKey::Refuse(RevokeKind::Promise),
    RuleKey::Refuse(RevokeKind::Statement),
    RuleKey::Refuse(RevokeKind::Acceptance),
    RuleKey::Amend,
    RuleKey::Notice,
    RuleKey::DeclareObsolete,
    RuleKey::Expire,
    RuleKey::AdministrativeClose,
    RuleKey::Claim,
    RuleKey::Unclaim,
    RuleKey::Forward,
    RuleKey::Nominate,
    RuleKey::Offer,
    RuleKey::Reassign,
    RuleKey::RenewLease,
    RuleKey::OpenCondition,
    RuleKey::WithdrawCondition,
    RuleKey::SatisfyCondition,
    RuleKey::WithdrawPrecondition,
    RuleKey::SatisfyPrecondition,
    RuleKey::ReportConsumption,
    RuleKey::ActedUpon,
    RuleKey::Admission,
    RuleKey::GateDecision,
    RuleKey::Observation,
    RuleKey::StopRequest,
    RuleKey::StopResponse,
    RuleKey::ResumeAfterStop,
    RuleKey::ControlLease,
    RuleKey::HandBackControl,
    RuleKey::Recheck,
];

/// The seed's closed list of operations (and the assignment operations), by wire name.
const SEED_OPERATIONS: &[&str] = &[
    "promise",
    "promise_conditional",
    "decline",
    "counter",
    "accept_counter",
    "state",
    "accept",
    "reject",
    "cancel",
    "release",
    "delegate",
    "assign",
    "dispute",
    "defer",
    "resume",
    "revoke_request",
    "revoke_promise",
    "revoke_statement",
    "revoke_acceptance",
    "allow",
    "refuse",
    "amend",
    "notice",
    "declare_obsolete",
    "expire",
    "administrative_close",
    "claim",
    "unclaim",
    "forward",
    "nominate",
    "offer",
    "reassign",
    "renew_lease",
    "open_condition",
    "withdraw_condition",
    "gate_decision",
    "stop_request",
    "stop_response",
    "resume_after_stop",
    "control_lease",
    "hand_back_control",
];

/// Who holds which role in the forced fixture, and whether Access lets them act (the test's own
/// model of `common::access()`: every organisation of the cast is listed except "rogue").
fn cast(state: State) -> Vec<(Party, Vec<Role>, bool)> {
    let pre = matches!(state, State::Requested | State::Countered);
    vec![
        (Cast::o(), vec![R::Obligee], true),
        (Cast::o2(), vec![], true),
        (
            Cast::c(),
            if pre {
                vec![R::CandidateObligor]
            } else {
                vec![
                    R::Obligor,
                    R::CandidateObligor,
                    R::ClaimingObligor,
                    R::Executor,
                ]
            },
            true,
        ),
        (
            Cast::e(),
            if pre { vec![] } else { vec![R::Executor] },
            true,
        ),
        (
            Cast::k(),
            if pre {
                vec![R::CandidateObligor, R::QueueCandidate]
            } else {
                vec![R::QueueCandidate]
            },
            true,
        ),
        (Cast::q(), vec![R::QueueOwner], true),
        (Cast::a(), vec![R::Acceptor], true),
        (Cast::x(), vec![R::Accountable], true),
        (Cast::pr(), vec![R::Principal], true),
        (Cast::d(), vec![R::AdministrativeAuthority], true),
        (Cast::s(), vec![R::WorkService, R::LocalParty], true),
        (Cast::n1(), vec![R::DelegateTarget], true),
        (Cast::n2(), vec![R::AssignTarget], true),
        (Cast::y(), vec![R::ConditionOwner], true),
        (Cast::w(), vec![R::ConditionAddressee], true),
        (Cast::z(), vec![R::ControlHolder], true),
        (
            Cast::m(),
            if pre {
                vec![]
            } else {
                vec![R::ExternalObserver]
            },
            true,
        ),
        (Cast::u(), vec![], false),
    ]
}

const NOW: i64 = T0 + 10_000;
const REQ: u64 = 1;
const COUNTER: u64 = 101;
const DELEGATE: u64 = 102;
const ASSIGN: u64 = 103;
const REJECT: u64 = 104;
const DEFER: u64 = 105;
const REVOKE: u64 = 106;
const COND: u64 = 107;
const PRECOND: u64 = 108;
const STATEMENT: u64 = 109;
const CLAIM: u64 = 110;
const STOP: u64 = 111;
const LEASE: u64 = 112;
const OBS: u64 = 113;
const OP: u64 = 500;

fn base() -> Commitment {
    let r = Record {
        id: rid(REQ),
        author: Cast::o(),
        commitment: "c-1".into(),
        basis: vec![],
        items: vec![],
        op: req(Request {
            candidate: Some(Cast::c()),
            queue: Some(Queue {
                name: "q".into(),
                owner: Some(Cast::q()),
                candidates: vec![Cast::k()],
                lease_ms: Some(1_000),
                return_to_pool_on_lease_end: true,
                start_deadline: None,
                distribution: Distribution::Unspecified,
            }),
            valid_until: Some(T0 + 100),
            implicit_acceptance_window_ms: Some(50),
            ..basic_request()
        }),
    };
    apply(None, &r, &access(), T0).unwrap().0
}

/// The commitment in `state` with the context `key` needs.
fn fixture(state: State, key: RuleKey) -> Commitment {
    let mut c = base();
    let pre = matches!(state, State::Requested | State::Countered);
    let item = c.items.get_mut(WHOLE).unwrap();
    item.state = state;
    item.validity = Some(Validity {
        record: rid(REQ),
        until: T0 + 100,
    });
    item.statement = Some(Statement {
        record: rid(STATEMENT),
        by: Cast::c(),
        at: T0,
        refs: vec!["r".into()],
    });
    if !pre {
        c.obligor = Some(Cast::c());
        c.claim = Some(ClaimState {
            by: Cast::c(),
            record: rid(CLAIM),
            lease_until: Some(T0 + 1),
            promise: None,
        });
        c.claims.push(rid(CLAIM));
    }
    c.counter = Some(CounterVersion {
        record: rid(COUNTER),
        by: Cast::c(),
        terms: terms("countered"),
    });
    c.delegate_offer = Some(HandoverOffer {
        record: rid(DELEGATE),
        by: Cast::c(),
        to: Cast::n1(),
        note: "n".into(),
    });
    c.assign_offer = Some(HandoverOffer {
        record: rid(ASSIGN),
        by: Cast::o(),
        to: Cast::n2(),
        note: String::new(),
    });
    c.rejects.push(rid(REJECT));
    c.conditions.push(OpenCondition {
        record: rid(COND),
        owner: Cast::y(),
        condition: Condition {
            description: "c".into(),
            addressed_to: Some(Cast::w()),
            ..Condition::default()
        },
        precondition_items: vec![],
        answers: vec![],
        opened_at: 0,
    });
    c.conditions.push(OpenCondition {
        record: rid(PRECOND),
        owner: Cast::y(),
        condition: Condition {
            description: "p".into(),
            addressed_to: Some(Cast::w()),
            ..Condition::default()
        },
        precondition_items: vec![WHOLE.into()],
        answers: vec![],
        opened_at: 0,
    });
    if key == RuleKey::Resume {
        c.deferral = Some(Deferral {
            record: rid(DEFER),
            by: Cast::o(),
            reason: "r".into(),
            return_at: Some(T0 + 1),
            return_event: None,
            at: T0,
            items: vec![],
        });
    }
    let stop = |mode, response| StopState {
        record: rid(STOP),
        by: Cast::x(),
        mode,
        reason: String::new(),
        at: T0,
        seq: 1,
        response,
        confirmed: None,
        resumed: None,
    };
    match key {
        RuleKey::StopResponse => c.stop = Some(stop(StopMode::Immediate, None)),
        RuleKey::ResumeAfterStop => {
            c.stop = Some(stop(
                StopMode::Immediate,
                Some((StopAnswer::Accept, rid(OBS))),
            ))
        }
        RuleKey::ControlLease => {
            c.stop = Some(StopState {
                confirmed: Some((rid(OBS), 2)),
                ..stop(StopMode::Pause, None)
            });
            c.executors.push(ExecutorState {
                executor: Cast::e(),
                last_record: rid(OBS),
                last_seen: NOW,
                heartbeat_interval_ms: None,
                execution: Some((ExecutionReport::Paused, rid(OBS), 2)),
                control: None,
                left_cleanly: false,
                unmapped_state: None,
                checkpoint: None,
                seq: 2,
                external: false,
            });
        }
        // The Work service party offers only what a queue's distribution policy picks (seed
        // 000, "Assignment": offer — "Queue owner or distribution policy"): a policy whose pick
        // is the offeree, with no offer open.
        RuleKey::Offer if pre => {
            let q = c.queue.as_mut().expect("queued");
            q.queue.distribution = Distribution::FirstCandidate;
            q.queue.candidates = vec![p("x", "offeree")];
            c.offered_to = None;
        }
        RuleKey::HandBackControl | RuleKey::Recheck => {
            c.stop = Some(stop(StopMode::Pause, None));
            c.handover = Some(Handover {
                lease: rid(LEASE),
                holder: Cast::z(),
                until: None,
                phase: if key == RuleKey::Recheck {
                    HandoverPhase::HandedBack
                } else {
                    HandoverPhase::Leased
                },
                handed_back: None,
            });
        }
        _ => {}
    }
    if let RuleKey::Allow(kind) | RuleKey::Refuse(kind) = key {
        c.revoke = Some(OpenRevoke {
            record: rid(REVOKE),
            kind,
            by: Cast::o(),
            reason: "r".into(),
            items: vec![WHOLE.into()],
            at: T0,
        });
    }
    c
}

fn op_for(key: RuleKey, author: &Party) -> (Operation, Vec<RecordId>) {
    use Operation as O;
    let r = || "because".to_string();
    let cond = Condition {
        description: "funds".into(),
        addressed_to: Some(Cast::w()),
        ..Condition::default()
    };
    let revoke = |kind: RevokeKind| match kind {
        RevokeKind::Request => O::RevokeRequest { reason: r() },
        RevokeKind::Promise => O::RevokePromise { reason: r() },
        RevokeKind::Statement => O::RevokeStatement { reason: r() },
        RevokeKind::Acceptance => O::RevokeAcceptance { reason: r() },
    };
    let to = |n: &str| Some(p("x", n));
    match key {
        RuleKey::Promise => (O::Promise, vec![]),
        RuleKey::PromiseConditional => (
            O::PromiseConditional {
                condition: cond,
                deadline: Some(NOW + 1_000),
            },
            vec![],
        ),
        RuleKey::Decline => (
            O::Decline {
                reason: DeclineReason::NoCapacity,
                text: r(),
            },
            vec![],
        ),
        RuleKey::Counter => (
            O::Counter {
                terms: Some(terms("countered again")),
            },
            vec![],
        ),
        RuleKey::AcceptCounter => (
            O::AcceptCounter {
                counter_digest: Some(rid(COUNTER)),
            },
            vec![],
        ),
        RuleKey::State => (state_op(&["delivery-1"]), vec![]),
        RuleKey::Accept => {
            let implicit = *author == Cast::s();
            let op = O::Accept {
                evidence_ref: "ev".into(),
                implicit,
                step_up: false,
            };
            (
                op,
                if implicit {
                    vec![rid(REQ), rid(STATEMENT)]
                } else {
                    vec![]
                },
            )
        }
        RuleKey::Reject => (O::Reject { reason: r() }, vec![]),
        RuleKey::Cancel => (
            O::Cancel {
                reason: CancelReason::Failed,
                text: r(),
            },
            vec![],
        ),
        RuleKey::Release => (
            O::Release {
                reason: String::new(),
            },
            vec![],
        ),
        RuleKey::DelegateOffer => (
            O::DelegateOffer {
                to: to("new"),
                handover_note: "notes".into(),
            },
            vec![],
        ),
        RuleKey::DelegateAcceptance => (
            O::DelegateAcceptance {
                offer_id: Some(rid(DELEGATE)),
            },
            vec![rid(DELEGATE)],
        ),
        RuleKey::AssignOffer => (O::AssignOffer { to: to("new") }, vec![]),
        RuleKey::AssignAcceptance => (
            O::AssignAcceptance {
                offer_id: Some(rid(ASSIGN)),
            },
            vec![rid(ASSIGN)],
        ),
        RuleKey::Dispute => (
            O::Dispute {
                disputed_record: Some(rid(REJECT)),
                reason: r(),
            },
            vec![],
        ),
        RuleKey::Defer => (
            O::Defer {
                reason: r(),
                return_at: None,
                return_event: String::new(),
            },
            vec![],
        ),
        RuleKey::Resume => (
            O::Resume {
                event: String::new(),
            },
            vec![rid(DEFER)],
        ),
        RuleKey::Revoke(kind) => (revoke(kind), vec![]),
        RuleKey::Allow(_) => (
            O::Allow {
                reason: String::new(),
                reopening_commitment_id: String::new(),
            },
            vec![rid(REVOKE)],
        ),
        RuleKey::Refuse(_) => (O::Refuse { reason: r() }, vec![rid(REVOKE)]),
        RuleKey::Amend => (
            O::Amend {
                supersedes: Some(rid(REQ)),
                terms: Some(terms("amended")),
                participants: vec![],
            },
            vec![],
        ),
        RuleKey::Notice => (
            O::Notice {
                notice_type: NoticeType::AtRisk,
                text: r(),
            },
            vec![],
        ),
        RuleKey::DeclareObsolete => (
            O::DeclareObsolete {
                parent_ref: "aim-1".into(),
            },
            vec![],
        ),
        RuleKey::Expire => (O::Expire, vec![rid(REQ)]),
        RuleKey::AdministrativeClose => (O::AdministrativeClose { reason: r() }, vec![]),
        RuleKey::Claim => (O::Claim, vec![]),
        RuleKey::Unclaim => (
            O::Unclaim {
                reason: String::new(),
            },
            vec![rid(REQ)],
        ),
        RuleKey::Forward => (
            O::Forward {
                to: Some(Queue {
                    name: "q2".into(),
                    ..Queue::default()
                }),
            },
            vec![],
        ),
        RuleKey::Nominate => (
            O::Nominate {
                candidate: to("nominee"),
            },
            vec![],
        ),
        RuleKey::Offer => (O::Offer { to: to("offeree") }, vec![rid(REQ)]),
        RuleKey::Reassign => (
            O::Reassign {
                to: to("reassignee"),
            },
            vec![],
        ),
        RuleKey::RenewLease => (O::RenewLease { lease_ms: None }, vec![]),
        RuleKey::OpenCondition => (O::OpenCondition { condition: cond }, vec![]),
        RuleKey::WithdrawCondition => (O::WithdrawCondition, vec![rid(COND)]),
        RuleKey::SatisfyCondition => (O::SatisfyCondition, vec![rid(COND)]),
        RuleKey::WithdrawPrecondition => (O::WithdrawCondition, vec![rid(PRECOND)]),
        RuleKey::SatisfyPrecondition => (O::SatisfyCondition, vec![rid(PRECOND)]),
        RuleKey::ReportConsumption => (O::ReportConsumption { amount: 5 }, vec![]),
        RuleKey::ActedUpon => (
            O::ActedUpon {
                record_id: Some(rid(REQ)),
                act: "ran".into(),
            },
            vec![],
        ),
        RuleKey::Admission => (
            O::Admission {
                record_id: Some(rid(REQ)),
                peer: "globex".into(),
                outcome: AdmissionOutcome::Admitted,
                code: String::new(),
                closes: None,
                at: 0,
            },
            vec![],
        ),
        RuleKey::GateDecision => (answer(GateAnswer::Accept, rid(REQ)), vec![rid(COND)]),
        RuleKey::Observation => (observe(ExecutionReport::Running, Some(1_000)), vec![]),
        RuleKey::StopRequest => (
            O::StopRequest {
                mode: StopMode::Immediate,
                reason: r(),
            },
            vec![],
        ),
        RuleKey::StopResponse => (
            O::StopResponse {
                answer: StopAnswer::Accept,
                reason: String::new(),
            },
            vec![rid(STOP)],
        ),
        RuleKey::ResumeAfterStop => (
            O::ResumeAfterStop {
                reason: String::new(),
            },
            vec![rid(STOP)],
        ),
        RuleKey::ControlLease => (
            O::ControlLease {
                holder: Some(Cast::x()),
                until: None,
            },
            vec![rid(STOP)],
        ),
        RuleKey::HandBackControl => (
            O::HandBackControl {
                handoff_note: "done".into(),
            },
            vec![rid(LEASE)],
        ),
        RuleKey::Recheck => (
            O::Recheck {
                outcome: RecheckOutcome::Continue,
                note: String::new(),
            },
            vec![],
        ),
    }
}

fn expected(
    key: &str,
    state: State,
    roles: &[Role],
    authorized: bool,
) -> Result<Option<State>, RejectionCode> {
    if !authorized {
        return Err(RejectionCode::NotAuthorized);
    }
    let rows: Vec<_> = EXPECT.iter().filter(|row| row.0 == key).collect();
    assert!(!rows.is_empty(), "no expectation for {key}");
    let Some((_, _, allowed, result, _)) =
        rows.iter().find(|row| row.1.contains(&state.wire_name()))
    else {
        // Seed 000: "A terminal state never changes".
        return Err(if seed_terminal(state) {
            RejectionCode::TerminalState
        } else {
            RejectionCode::InvalidState
        });
    };
    if !roles.iter().any(|r| allowed.contains(r)) {
        return Err(RejectionCode::WrongRole);
    }
    Ok(if *result == "-" {
        None
    } else {
        Some(State::from_wire_name(result).unwrap())
    })
}

/// The postconditions of a successful operation beyond the state (seed 000 "Operations",
/// "Assignment", "Revoke requests", and the sections after them).
fn postconditions(
    key: RuleKey,
    author: &Party,
    before: &Commitment,
    next: &Commitment,
    fx: &[Effect],
    ctx: &str,
) {
    let op = rid(OP);
    match key {
        RuleKey::Promise | RuleKey::PromiseConditional => {
            assert_eq!(next.obligor.as_ref(), Some(author), "{ctx}: obligor")
        }
        RuleKey::Counter if before.items[WHOLE].state == State::Requested => {
            assert_eq!(
                next.counter.as_ref().map(|c| c.record),
                Some(op),
                "{ctx}: counter version"
            )
        }
        RuleKey::Counter => assert_eq!(next.terms_version, op, "{ctx}: new offer version"),
        RuleKey::AcceptCounter => {
            assert_eq!(
                next.obligor,
                Some(Cast::c()),
                "{ctx}: the counter's author promises"
            );
            assert_eq!(next.terms_version, rid(COUNTER), "{ctx}");
        }
        RuleKey::State => assert_eq!(
            next.items[WHOLE].statement.as_ref().map(|s| s.record),
            Some(op),
            "{ctx}: statement"
        ),
        RuleKey::Accept => assert_eq!(
            next.items[WHOLE].accepted_implicitly,
            *author == Cast::s(),
            "{ctx}"
        ),
        RuleKey::Reject => assert!(
            next.rejects.contains(&op) && next.items[WHOLE].work.is_some_and(|w| w.begun),
            "{ctx}: reject kept, the work sent back begun"
        ),
        RuleKey::DelegateOffer => assert_eq!(
            next.delegate_offer.as_ref().map(|o| o.record),
            Some(op),
            "{ctx}"
        ),
        RuleKey::DelegateAcceptance => {
            assert_eq!(next.obligor.as_ref(), Some(author), "{ctx}: new obligor");
            assert!(next.delegate_offer.is_none(), "{ctx}");
        }
        RuleKey::AssignOffer => assert_eq!(
            next.assign_offer.as_ref().map(|o| o.record),
            Some(op),
            "{ctx}"
        ),
        RuleKey::AssignAcceptance => assert_eq!(next.obligee, *author, "{ctx}: new obligee"),
        RuleKey::Dispute => assert_eq!(
            next.disputes.last().map(|d| d.record),
            Some(op),
            "{ctx}: mark"
        ),
        RuleKey::Defer => assert_eq!(
            next.deferral.as_ref().map(|d| d.record),
            Some(op),
            "{ctx}: deferral"
        ),
        RuleKey::Resume => assert!(next.deferral.is_none(), "{ctx}: deferral closed"),
        RuleKey::Revoke(kind) => {
            assert_eq!(
                next.revoke.as_ref().map(|r| (r.record, r.kind)),
                Some((op, kind)),
                "{ctx}: open revoke"
            );
            assert!(
                matches!(
                    fx,
                    [Effect::Notify {
                        about: Notification::RevokeRequested { .. },
                        ..
                    }]
                ),
                "{ctx}"
            );
        }
        RuleKey::Allow(kind) => {
            assert!(next.revoke.is_none(), "{ctx}: revoke closed");
            let reopens = matches!(fx, [Effect::StartReopening { .. }]);
            assert_eq!(reopens, kind == RevokeKind::Acceptance, "{ctx}: reopening");
        }
        RuleKey::Refuse(kind) => {
            assert!(next.revoke.is_none(), "{ctx}: revoke closed");
            let marked = next
                .disputes
                .last()
                .is_some_and(|d| d.record == op && d.from_refusal);
            assert_eq!(
                marked,
                kind == RevokeKind::Acceptance,
                "{ctx}: dispute mark"
            );
        }
        RuleKey::Amend => assert_eq!(
            (next.terms_version, next.version),
            (op, before.version + 1),
            "{ctx}"
        ),
        RuleKey::Notice => {
            assert_eq!(next.notices.last().map(|n| n.record), Some(op), "{ctx}");
            assert!(matches!(fx, [Effect::Notify { .. }]), "{ctx}: notified");
        }
        RuleKey::AdministrativeClose => {
            assert!(matches!(fx, [Effect::Notify { .. }]), "{ctx}: notified")
        }
        RuleKey::Claim => {
            assert_eq!(next.obligor.as_ref(), Some(author), "{ctx}");
            assert!(
                matches!(fx, [Effect::PromiseProduced { claim, .. }] if *claim == op),
                "{ctx}"
            );
        }
        RuleKey::Unclaim => assert!(next.obligor.is_none() && next.claim.is_none(), "{ctx}"),
        RuleKey::Forward => assert_eq!(next.forward_count, before.forward_count + 1, "{ctx}"),
        RuleKey::Nominate => assert!(next.nominees.contains(&p("x", "nominee")), "{ctx}"),
        RuleKey::Offer => assert_eq!(next.offered_to, Some(p("x", "offeree")), "{ctx}"),
        RuleKey::Reassign if before.obligor.is_some() => {
            assert_eq!(
                next.delegate_offer.as_ref().map(|o| o.record),
                Some(op),
                "{ctx}"
            )
        }
        RuleKey::Reassign => assert_eq!(next.offered_to, Some(p("x", "reassignee")), "{ctx}"),
        RuleKey::RenewLease => assert_eq!(
            next.claim.as_ref().and_then(|c| c.lease_until),
            Some(NOW + 1_000),
            "{ctx}"
        ),
        RuleKey::OpenCondition => {
            assert_eq!(next.conditions.last().map(|c| c.record), Some(op), "{ctx}")
        }
        RuleKey::WithdrawCondition => assert!(
            next.conditions.iter().all(|c| c.record != rid(COND)),
            "{ctx}"
        ),
        RuleKey::SatisfyCondition | RuleKey::GateDecision => {
            let cond = next
                .conditions
                .iter()
                .find(|c| c.record == rid(COND))
                .expect("kept");
            assert_eq!(
                cond.answers.last().map(|a| a.record),
                Some(op),
                "{ctx}: answer"
            );
        }
        RuleKey::WithdrawPrecondition | RuleKey::SatisfyPrecondition => {
            assert!(
                next.conditions.iter().all(|c| c.record != rid(PRECOND)),
                "{ctx}"
            )
        }
        RuleKey::ReportConsumption => assert_eq!(next.consumed, before.consumed + 5, "{ctx}"),
        RuleKey::ActedUpon => assert!(next.evidence.contains(&op), "{ctx}"),
        RuleKey::Admission => {
            assert_eq!(next.admissions.last().map(|a| a.record), Some(op), "{ctx}")
        }
        RuleKey::Observation => assert!(
            next.executors
                .iter()
                .any(|e| e.executor == *author && e.last_record == op),
            "{ctx}"
        ),
        RuleKey::StopRequest => assert_eq!(next.stop.as_ref().map(|s| s.record), Some(op), "{ctx}"),
        RuleKey::StopResponse => assert_eq!(
            next.stop.as_ref().and_then(|s| s.response),
            Some((StopAnswer::Accept, op)),
            "{ctx}"
        ),
        RuleKey::ResumeAfterStop => assert_eq!(
            next.stop.as_ref().and_then(|s| s.resumed),
            Some(op),
            "{ctx}"
        ),
        RuleKey::ControlLease => assert_eq!(
            next.handover.as_ref().map(|h| (h.lease, h.holder.clone())),
            Some((op, Cast::x())),
            "{ctx}"
        ),
        RuleKey::HandBackControl => assert_eq!(
            next.handover.as_ref().map(|h| h.phase),
            Some(HandoverPhase::HandedBack),
            "{ctx}"
        ),
        RuleKey::Recheck => assert!(
            next.handover.is_none() && next.last_recheck == Some((op, RecheckOutcome::Continue)),
            "{ctx}"
        ),
        RuleKey::Decline
        | RuleKey::Cancel
        | RuleKey::Release
        | RuleKey::DeclareObsolete
        | RuleKey::Expire => {}
    }
}

#[test]
fn expectation_table_covers_every_rule_and_every_seed_operation() {
    let names: Vec<String> = KEYS.iter().map(|k| k.name()).collect();
    for row in EXPECT {
        assert!(names.iter().any(|n| n == row.0), "{} is not in KEYS", row.0);
    }
    for n in &names {
        assert!(
            EXPECT.iter().any(|row| row.0 == n),
            "{n} has no expectation"
        );
    }
    // The kernel has no rule the table does not check.
    for k in rules::keys() {
        assert!(KEYS.contains(&k), "kernel rule {} is not checked", k.name());
    }
    for op in SEED_OPERATIONS {
        assert!(
            EXPECT
                .iter()
                .any(|row| row.0.split('(').next() == Some(op) || row.0.contains(&format!("({op}"))),
            "seed operation {op} is not covered"
        );
    }
    // Every cell is either the seed's or says where the seed is silent.
    for row in EXPECT {
        assert!(!row.4.is_empty(), "{} has no source", row.0);
    }
}

#[test]
fn every_operation_from_every_state_by_every_role() {
    let access = access();
    let mut checked = 0;
    let mut allowed = 0;
    for key in KEYS.iter().copied() {
        for state in State::ALL {
            for (party, roles, authorized) in cast(state) {
                let c = fixture(state, key);
                let (op, basis) = op_for(key, &party);
                let record = Record {
                    id: rid(OP),
                    author: party.clone(),
                    commitment: c.id.clone(),
                    basis,
                    items: vec![],
                    op,
                };
                let want = expected(&key.name(), state, &roles, authorized);
                let before = c.clone();
                let got = apply(Some(&c), &record, &access, NOW);
                let ctx = format!("{} from {state} by {party} {roles:?}", key.name());
                assert_eq!(c, before, "{ctx}: input changed");
                match (want, got) {
                    (Ok(result), Ok((next, fx))) => {
                        let after = next.items[WHOLE].state;
                        assert_eq!(after, result.unwrap_or(state), "{ctx}");
                        assert_eq!(next.history.len(), c.history.len() + 1, "{ctx}");
                        assert_eq!(next.history.last(), Some(&rid(OP)), "{ctx}");
                        postconditions(key, &party, &c, &next, &fx, &ctx);
                        if seed_terminal(state) {
                            assert_eq!(after, state, "{ctx}: terminal state changed");
                        }
                        allowed += 1;
                    }
                    (Err(code), Err(rej)) => assert_eq!(rej.code, code, "{ctx}: {rej}"),
                    (Ok(_), Err(rej)) => panic!("{ctx}: expected success, got {rej}"),
                    (Err(code), Ok(_)) => panic!("{ctx}: expected {code}, got success"),
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, KEYS.len() * 13 * 18);
    assert!(allowed > 100, "only {allowed} allowed combinations");
}

#[test]
fn request_by_role_and_on_existing_commitments() {
    let access = access();
    let make = |author: Party| Record {
        id: rid(1),
        author,
        commitment: "c-new".into(),
        basis: vec![],
        items: vec![],
        op: req(Request {
            obligee: Some(Cast::o()),
            ..basic_request()
        }),
    };
    for (party, roles, authorized) in cast(State::Requested) {
        let got = apply(None, &make(party.clone()), &access, T0);
        if !authorized {
            assert_eq!(got.unwrap_err().code, RejectionCode::NotAuthorized);
        } else if roles.contains(&R::Obligee) || party == Cast::o2() {
            let (c, fx) = got.unwrap();
            assert_eq!(c.state(), Some(State::Requested));
            assert_eq!(c.obligee, Cast::o());
            assert!(fx.is_empty());
        } else {
            assert_eq!(
                got.unwrap_err().code,
                RejectionCode::WrongRole,
                "request by {party}"
            );
        }
    }
    for state in State::ALL {
        let c = fixture(state, RuleKey::Promise);
        let mut r = make(Cast::o());
        r.commitment = c.id.clone();
        assert_eq!(
            apply(Some(&c), &r, &access, T0).unwrap_err().code,
            RejectionCode::CommitmentExists
        );
    }
    let mut other = make(Cast::o());
    other.op = Operation::Promise;
    assert_eq!(
        apply(None, &other, &access, T0).unwrap_err().code,
        RejectionCode::UnknownCommitment
    );
}

/// Seed 000 "Revoke requests", written out: (request, asked by, asked of, on allow, on refuse).
#[rustfmt::skip]
const SEED_REVOKES: &[RevokeRow] = &[
    ("revoke_request", &[R::Obligee], CANDIDATE_OR_OBLIGOR, "withdrawn", "continues"),
    ("revoke_promise", &[R::Obligor], &[R::Obligee], "withdrawn", "continues"),
    ("revoke_statement", &[R::Obligor], &[R::Acceptor], "promised", "stays stated"),
    ("revoke_acceptance", &[R::Acceptor], &[R::Obligor], "accepted (a reopening starts)", "a dispute mark"),
];

#[test]
fn the_expectation_table_agrees_with_the_seed_revoke_table() {
    for (request, by, of, on_allow, _) in SEED_REVOKES {
        let ask = EXPECT.iter().find(|r| r.0 == *request).expect("row");
        assert_eq!(ask.2, *by, "{request}: asked by");
        for verb in ["allow", "refuse"] {
            let name = format!("{verb}({request})");
            let row = EXPECT.iter().find(|r| r.0 == name).expect("row");
            assert_eq!(row.2, *of, "{name}: asked of");
            assert_eq!(row.1, ask.1, "{name}: acts where the request was asked");
            if verb == "allow" && !on_allow.starts_with("accepted") {
                assert_eq!(row.3, *on_allow, "{name}");
            }
        }
    }
}
