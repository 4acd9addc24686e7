//! The workload: commitments between organisations through their lifecycle (seed 000): the
//! obligee's party requests from a party of another organisation (a third of them name a party
//! of the third organisation as principal, so all three hold the commitment), the candidate
//! promises, states delivery, and the obligee accepts. Each record is submitted at its author's
//! node through the record door, signed by the author's own key, with the last record its
//! author's node applied as basis (what a careful client does). Now and then a record is
//! submitted out of turn: the kernel rejects it, it is recorded and stays local.

use crate::fixture::ORGS;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1::GetCommitmentResponse;

/// Where a commitment is in its lifecycle (the next record to write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The obligee requests.
    Request,
    /// The candidate promises.
    Promise,
    /// The obligor states delivery.
    State,
    /// The obligee accepts.
    Accept,
    /// Accepted.
    Done,
}

/// One commitment of the workload.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Its id.
    pub id: String,
    /// The obligee's organisation (index into [`ORGS`]).
    pub obligee: usize,
    /// The candidate obligor's organisation.
    pub obligor: usize,
    /// A principal's organisation, if any.
    pub principal: Option<usize>,
    /// The next record.
    pub stage: Stage,
}

fn party(i: usize) -> PartyRef {
    PartyRef {
        organisation: ORGS[i].0.into(),
        name: ORGS[i].1.into(),
    }
}

impl Plan {
    /// The organisation whose party writes the next record.
    pub fn author(&self) -> usize {
        match self.stage {
            Stage::Request | Stage::Accept | Stage::Done => self.obligee,
            Stage::Promise | Stage::State => self.obligor,
        }
    }

    /// Whether the author's node shows the state the next record expects.
    pub fn in_turn(&self, view: Option<&GetCommitmentResponse>) -> bool {
        match (self.stage, view) {
            (Stage::Request, None) => true,
            (Stage::Promise, Some(v)) => v.state == "requested",
            (Stage::State, Some(v)) => v.state == "promised",
            (Stage::Accept, Some(v)) => v.state == "stated",
            _ => false,
        }
    }

    /// The next record, declared at `now` on the basis of the author's `view`.
    pub fn record(
        &self,
        view: Option<&GetCommitmentResponse>,
        now: i64,
        nonce: [u8; 8],
    ) -> Option<Record> {
        let op = match self.stage {
            Stage::Request => Operation::Request(rec::Request {
                candidate: Some(party(self.obligor)),
                principal: self.principal.map(party),
                terms: Some(rec::Terms {
                    title: format!("{} terms", self.id),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            Stage::Promise => Operation::Promise(rec::Promise {}),
            Stage::State => Operation::State(rec::State {
                fulfillment_refs: vec![format!("{}-delivery", self.id)],
            }),
            Stage::Accept => Operation::Accept(rec::Accept {
                evidence_ref: format!("{}-delivery", self.id),
                ..Default::default()
            }),
            Stage::Done => return None,
        };
        let basis = view
            .and_then(|v| {
                v.history.iter().rev().find(|h| {
                    h.operation != "admission" && h.outcome.as_ref().is_some_and(|o| o.applied)
                })
            })
            .map(|h| h.record_id.clone())
            .into_iter()
            .collect();
        Some(Record {
            author: Some(party(self.author())),
            declared_at_unix_ms: now,
            commitment_id: self.id.clone(),
            basis,
            nonce: nonce.to_vec().into(),
            operation: Some(op),
            ..Default::default()
        })
    }

    /// Catches up with what the author's node shows: a record applied later than its answer
    /// (issue 26: a record may be pending until its commitment's order is settled) moves the
    /// plan on once the view shows its state.
    pub fn sync(&mut self, view: Option<&GetCommitmentResponse>) {
        let Some(v) = view else { return };
        let reached = match v.state.as_str() {
            "promised" => Stage::State,
            "stated" => Stage::Accept,
            "accepted" => Stage::Done,
            _ => return,
        };
        let rank = |s: Stage| s as u8;
        if rank(reached) > rank(self.stage) {
            self.stage = reached;
        }
    }

    /// Moves to the next stage after the record was applied.
    pub fn advance(&mut self) {
        self.stage = match self.stage {
            Stage::Request => Stage::Promise,
            Stage::Promise => Stage::State,
            Stage::State => Stage::Accept,
            Stage::Accept | Stage::Done => Stage::Done,
        };
    }

    /// Every organisation holding the commitment.
    pub fn orgs(&self) -> Vec<usize> {
        let mut v = vec![self.obligee, self.obligor];
        v.extend(self.principal);
        v.sort_unstable();
        v.dedup();
        v
    }
}

// ---------------------------------------------------------------------------------------------
// Races (issue 26, item 6): commitments whose records race each other across organisations.
// ---------------------------------------------------------------------------------------------

/// A workload class of issue 26 item 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// (a) A deadline lands within one tick of a party's record.
    Deadline,
    /// (b) Per-node clock offsets up to the tolerance; the party's record lands well before the
    /// deadline on its own clock, but another node's clock may already be past it.
    Skew,
    /// (c) An organisation joins the commitment mid-way.
    Join,
    /// (d) Concurrent conflicting records from different organisations.
    Conflict,
}

impl Class {
    /// Every class.
    pub const ALL: [Class; 4] = [Class::Deadline, Class::Skew, Class::Join, Class::Conflict];

    /// Its bit in [`crate::Options::classes`].
    pub fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// The class by name (`deadline`, `skew`, `join`, `conflict`).
    pub fn parse(s: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == s)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Class::Deadline => "deadline",
            Class::Skew => "skew",
            Class::Join => "join",
            Class::Conflict => "conflict",
        }
    }
}

/// What one race does (the rows of issue 26's table and of its item 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceKind {
    /// `valid_until` = D; the candidate promises at D±1 while the nodes tick.
    ExpireVsPromise,
    /// The implicit acceptance window ends as the acceptor rejects.
    ImplicitAcceptVsReject,
    /// The claim's lease ends (return to pool) as the obligor states.
    LeaseEndVsState,
    /// A dated deferral returns as the obligor defers again.
    ReturnVsDefer,
    /// A gate's participant answers at the gate's deadline.
    GateDeadlineVsAnswer,
    /// The obligor delegates to the third organisation, whose party accepts.
    JoinDelegate,
    /// The obligee assigns its side to the third organisation, whose party accepts.
    JoinAssign,
    /// The queue owner offers the commitment to the third organisation, whose party promises.
    JoinOffer,
    /// The queue owner forwards to a queue of the third organisation, whose party claims.
    JoinForward,
    /// The obligee nominates the third organisation's party, who promises.
    JoinNominate,
    /// A queue names both other organisations; the third one's party claims.
    JoinQueueClaim,
    /// A Condition is addressed to the third organisation, whose party satisfies it.
    JoinCondition,
    /// A gate names the third organisation's party as participant, who answers.
    JoinGate,
    /// The third organisation is principal and accountable; it declares the commitment obsolete
    /// as the obligor states.
    JoinPrincipal,
    /// The obligee releases as the candidate declines.
    ReleaseVsDecline,
    /// The obligor cancels as the acceptor accepts.
    CancelVsAccept,
    /// Two organisations claim a queued request at once.
    TwoClaims,
    /// The obligor runs the work at its own node (run start, running: its node owes and writes
    /// the execution claims, issue 29) as the obligee releases at the home.
    RunVsRelease,
}

impl RaceKind {
    /// Every kind.
    pub const ALL: [RaceKind; 18] = [
        RaceKind::ExpireVsPromise,
        RaceKind::ImplicitAcceptVsReject,
        RaceKind::LeaseEndVsState,
        RaceKind::ReturnVsDefer,
        RaceKind::GateDeadlineVsAnswer,
        RaceKind::JoinDelegate,
        RaceKind::JoinAssign,
        RaceKind::JoinOffer,
        RaceKind::JoinForward,
        RaceKind::JoinNominate,
        RaceKind::JoinQueueClaim,
        RaceKind::JoinCondition,
        RaceKind::JoinGate,
        RaceKind::JoinPrincipal,
        RaceKind::ReleaseVsDecline,
        RaceKind::CancelVsAccept,
        RaceKind::TwoClaims,
        RaceKind::RunVsRelease,
    ];

    /// The classes a race of this kind can stand for (a timed kind is `Deadline` or `Skew`).
    pub fn classes(self) -> &'static [Class] {
        use RaceKind as K;
        match self {
            K::ExpireVsPromise
            | K::ImplicitAcceptVsReject
            | K::LeaseEndVsState
            | K::ReturnVsDefer
            | K::GateDeadlineVsAnswer => &[Class::Deadline, Class::Skew],
            K::ReleaseVsDecline | K::CancelVsAccept | K::TwoClaims | K::RunVsRelease => {
                &[Class::Conflict]
            }
            _ => &[Class::Join],
        }
    }
}

/// The implicit acceptance window and the lease of the timed races (ms).
pub const WINDOW_MS: i64 = 2_000;

/// What a node must show before a move is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The commitment, in any state.
    Knows,
    /// The commitment in this state.
    State(&'static str),
    /// The commitment with an open gate or Condition.
    Gate,
}

/// One record of a move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActOp {
    /// `request` (its shape per [`RaceKind`]).
    Request,
    /// `promise`.
    Promise,
    /// `decline`.
    Decline,
    /// `state`.
    State,
    /// `accept`.
    Accept,
    /// `reject`.
    Reject,
    /// `cancel`.
    Cancel,
    /// `release`.
    Release,
    /// `claim`.
    Claim,
    /// `delegate` offer to the third organisation's party.
    DelegateOffer,
    /// `delegate` acceptance of the named offer.
    DelegateAccept,
    /// `assign` offer to the third organisation's party.
    AssignOffer,
    /// `assign` acceptance of the named offer.
    AssignAccept,
    /// `offer` to the third organisation's party.
    Offer,
    /// `forward` to a queue of the third organisation's party.
    Forward,
    /// `nominate` the third organisation's party.
    Nominate,
    /// `open_condition` addressed to the third organisation's party.
    OpenCondition,
    /// Opens an approval gate for the given organisation's party, with the race's deadline if
    /// the flag is set.
    OpenGate(usize, bool),
    /// `satisfy_condition` of the open Condition.
    Satisfy,
    /// `gate_decision` accept of the open gate, on the current terms version.
    GateAccept,
    /// Defers; the first one (flag set) returns at the race's deadline.
    Defer(bool),
    /// `declare_obsolete`.
    DeclareObsolete,
    /// `run_start` of the race's run (a short heartbeat interval).
    RunStart,
    /// `run_transition` of the race's run to running.
    RunRunning,
}

/// One record of a move, by one organisation's party.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Act {
    /// The author's organisation.
    pub org: usize,
    /// The record.
    pub op: ActOp,
}

/// When a timed move is made: once `org`'s clock reads the race's deadline plus `delta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// Now.
    Now,
    /// When the organisation's clock reads the race's deadline (set by an earlier move).
    Deadline(usize),
}

/// One move of a race: records submitted at their authors' nodes within a few milliseconds,
/// with no delivery in between.
#[derive(Debug, Clone)]
pub struct Move {
    /// What must hold at which node first.
    pub need: Vec<(usize, Need)>,
    /// When.
    pub at: At,
    /// The records, in the order submitted.
    pub acts: Vec<Act>,
    /// The deadline is set from this move's first record: its author's clock plus this (ms).
    pub sets_deadline: Option<i64>,
    /// Every node's Work service ticks right after (a deadline race).
    pub tick: bool,
}

/// One race: a commitment of three organisations (`a` obligee, `b` candidate obligor, `c` the
/// third) and its moves.
#[derive(Debug, Clone)]
pub struct Race {
    /// The commitment id.
    pub id: String,
    /// What it races.
    pub kind: RaceKind,
    /// The class it stands for.
    pub class: Class,
    /// Obligee's organisation.
    pub a: usize,
    /// Candidate obligor's organisation.
    pub b: usize,
    /// The third organisation.
    pub c: usize,
    /// The next move.
    pub next: usize,
    /// Attempts at the next move while its needs did not hold.
    pub waited: usize,
    /// The deadline (the author's clock), once set.
    pub deadline: i64,
    /// Where the timed move lands relative to the deadline on its author's clock: -1..=1 ms
    /// (`Deadline`), or 500..=1500 ms before it (`Skew`).
    pub delta: i64,
    /// Records the later moves name: the offer, the gate, the defer.
    pub named: Option<Vec<u8>>,
    /// Every record the race submitted that its author's node acknowledged: (org, id).
    pub acked: Vec<(usize, [u8; 32])>,
}

fn queue(owner: usize, candidates: &[usize], lease_ms: i64) -> rec::Queue {
    rec::Queue {
        name: "sim-queue".into(),
        owner: Some(party(owner)),
        candidates: candidates.iter().map(|&c| party(c)).collect(),
        lease_ms,
        return_to_pool_on_lease_end: lease_ms > 0,
        start_deadline_unix_ms: 0,
        distribution: 0,
    }
}

impl Race {
    /// The moves, in order.
    pub fn moves(&self) -> Vec<Move> {
        use ActOp as O;
        use Need::{Gate, Knows, State as S};
        use RaceKind as K;
        let (a, b, c) = (self.a, self.b, self.c);
        let mv = |need: Vec<(usize, Need)>, acts: Vec<Act>| Move {
            need,
            at: At::Now,
            acts,
            sets_deadline: None,
            tick: false,
        };
        let act = |org, op| Act { org, op };
        let request = Move {
            sets_deadline: (self.kind == K::ExpireVsPromise).then_some(3_000),
            ..mv(vec![], vec![act(a, O::Request)])
        };
        let promise = mv(vec![(b, S("requested"))], vec![act(b, O::Promise)]);
        let timed = |org, acts: Vec<Act>, need: Vec<(usize, Need)>| Move {
            at: At::Deadline(org),
            tick: true,
            ..mv(need, acts)
        };
        let mut out = vec![request];
        match self.kind {
            K::ExpireVsPromise => out.push(timed(
                b,
                vec![act(b, O::Promise)],
                vec![(b, S("requested"))],
            )),
            K::ImplicitAcceptVsReject => {
                out.push(promise);
                out.push(Move {
                    sets_deadline: Some(WINDOW_MS),
                    ..mv(vec![(b, S("promised"))], vec![act(b, O::State)])
                });
                out.push(timed(a, vec![act(a, O::Reject)], vec![(a, S("stated"))]));
            }
            K::LeaseEndVsState => {
                out.push(Move {
                    sets_deadline: Some(WINDOW_MS),
                    ..mv(vec![(b, S("requested"))], vec![act(b, O::Claim)])
                });
                out.push(timed(b, vec![act(b, O::State)], vec![(b, S("promised"))]));
            }
            K::ReturnVsDefer => {
                out.push(promise);
                out.push(Move {
                    sets_deadline: Some(WINDOW_MS),
                    ..mv(vec![(a, S("promised"))], vec![act(a, O::Defer(true))])
                });
                out.push(timed(b, vec![act(b, O::Defer(false))], vec![(b, Knows)]));
            }
            K::GateDeadlineVsAnswer => {
                out.push(promise);
                out.push(Move {
                    sets_deadline: Some(WINDOW_MS),
                    ..mv(vec![(a, S("promised"))], vec![act(a, O::OpenGate(b, true))])
                });
                out.push(timed(b, vec![act(b, O::GateAccept)], vec![(b, Gate)]));
            }
            K::JoinDelegate => {
                out.push(promise);
                out.push(mv(vec![(b, S("promised"))], vec![act(b, O::DelegateOffer)]));
                out.push(mv(vec![(c, Knows)], vec![act(c, O::DelegateAccept)]));
            }
            K::JoinAssign => {
                out.push(promise);
                out.push(mv(vec![(a, S("promised"))], vec![act(a, O::AssignOffer)]));
                out.push(mv(vec![(c, Knows)], vec![act(c, O::AssignAccept)]));
            }
            K::JoinOffer => {
                out.push(mv(vec![], vec![act(a, O::Offer)]));
                out.push(mv(vec![(c, Knows)], vec![act(c, O::Promise)]));
            }
            K::JoinForward => {
                out.push(mv(vec![], vec![act(a, O::Forward)]));
                out.push(mv(vec![(c, Knows)], vec![act(c, O::Claim)]));
            }
            K::JoinNominate => {
                out.push(mv(vec![], vec![act(a, O::Nominate)]));
                out.push(mv(vec![(c, Knows)], vec![act(c, O::Promise)]));
            }
            K::JoinQueueClaim => {
                out.push(mv(vec![(c, S("requested"))], vec![act(c, O::Claim)]));
            }
            K::JoinCondition => {
                out.push(promise);
                out.push(mv(vec![(a, S("promised"))], vec![act(a, O::OpenCondition)]));
                out.push(mv(vec![(c, Gate)], vec![act(c, O::Satisfy)]));
            }
            K::JoinGate => {
                out.push(promise);
                out.push(mv(
                    vec![(a, S("promised"))],
                    vec![act(a, O::OpenGate(c, false))],
                ));
                out.push(mv(vec![(c, Gate)], vec![act(c, O::GateAccept)]));
            }
            K::JoinPrincipal => {
                out.push(promise);
                out.push(mv(
                    vec![(b, S("promised")), (c, S("promised"))],
                    vec![act(c, O::DeclareObsolete), act(b, O::State)],
                ));
            }
            K::ReleaseVsDecline => out.push(mv(
                vec![(b, S("requested"))],
                vec![act(a, O::Release), act(b, O::Decline)],
            )),
            K::CancelVsAccept => {
                out.push(promise);
                out.push(mv(vec![(b, S("promised"))], vec![act(b, O::State)]));
                out.push(mv(
                    vec![(a, S("stated")), (b, S("stated"))],
                    vec![act(b, O::Cancel), act(a, O::Accept)],
                ));
            }
            K::TwoClaims => out.push(mv(
                vec![(b, S("requested")), (c, S("requested"))],
                vec![act(b, O::Claim), act(c, O::Claim)],
            )),
            K::RunVsRelease => {
                out.push(promise);
                out.push(mv(
                    vec![(a, S("promised")), (b, S("promised"))],
                    vec![
                        act(b, O::RunStart),
                        act(b, O::RunRunning),
                        act(a, O::Release),
                    ],
                ));
            }
        }
        out
    }

    /// Whether `view` (at the node of the organisation asked) meets `need`.
    pub fn meets(need: Need, view: Option<&GetCommitmentResponse>) -> bool {
        match (need, view) {
            (_, None) => false,
            (Need::Knows, Some(_)) => true,
            (Need::State(s), Some(v)) => v.state == s,
            (Need::Gate, Some(v)) => v.gates.iter().any(|g| g.status == "waiting"),
        }
    }

    fn request(&self) -> rec::Request {
        use RaceKind as K;
        let (a, b, c) = (self.a, self.b, self.c);
        let mut r = rec::Request {
            terms: Some(rec::Terms {
                title: format!("{} terms ({:?})", self.id, self.kind),
                ..Default::default()
            }),
            ..Default::default()
        };
        match self.kind {
            K::TwoClaims | K::JoinQueueClaim => r.queue = Some(queue(a, &[b, c], 0)),
            K::LeaseEndVsState => r.queue = Some(queue(a, &[b], WINDOW_MS)),
            K::JoinOffer | K::JoinForward | K::JoinNominate => r.queue = Some(queue(a, &[b], 0)),
            _ => r.candidate = Some(party(b)),
        }
        match self.kind {
            K::ExpireVsPromise => r.valid_until_unix_ms = self.deadline,
            K::ImplicitAcceptVsReject => {
                r.implicit_acceptance = Some(rec::ImplicitAcceptanceTerms {
                    window_ms: WINDOW_MS,
                })
            }
            K::JoinPrincipal => {
                r.principal = Some(party(c));
                r.accountable = Some(party(c));
            }
            _ => {}
        }
        r
    }

    /// The record of `act`, declared at `now` (its author's clock) on the basis of the author's
    /// `view` (the last record it applied, plus the record the operation names).
    pub fn record(
        &self,
        act: Act,
        view: Option<&GetCommitmentResponse>,
        now: i64,
        nonce: [u8; 8],
    ) -> Record {
        use ActOp as O;
        let named = self.named.clone().unwrap_or_default();
        let gate = view
            .and_then(|v| v.gates.iter().rev().find(|g| g.status == "waiting"))
            .map(|g| g.record_id.to_vec())
            .unwrap_or_else(|| named.clone());
        let mut extra: Vec<Vec<u8>> = Vec::new();
        let op = match act.op {
            O::Request => Operation::Request(self.request()),
            O::Promise => Operation::Promise(rec::Promise {}),
            O::Decline => Operation::Decline(rec::Decline {
                reason: rec::DeclineReason::NoCapacity as i32,
                text: String::new(),
            }),
            O::State => Operation::State(rec::State {
                fulfillment_refs: vec![format!("{}-delivery", self.id)],
            }),
            O::Accept => Operation::Accept(rec::Accept {
                evidence_ref: format!("{}-delivery", self.id),
                ..Default::default()
            }),
            O::Reject => Operation::Reject(rec::Reject {
                reason: "not what was asked".into(),
            }),
            O::Cancel => Operation::Cancel(rec::Cancel {
                reason: rec::CancelReason::CannotComplete as i32,
                text: String::new(),
            }),
            O::Release => Operation::Release(rec::Release {
                reason: "no longer needed".into(),
            }),
            O::Claim => Operation::Claim(rec::Claim {}),
            O::DelegateOffer => Operation::Delegate(rec::Delegate {
                step: Some(rec::delegate::Step::Offer(rec::DelegateOffer {
                    to: Some(party(self.c)),
                    handover_note: "over to you".into(),
                })),
            }),
            O::DelegateAccept => {
                extra.push(named.clone());
                Operation::Delegate(rec::Delegate {
                    step: Some(rec::delegate::Step::Acceptance(rec::HandoverAcceptance {
                        offer_id: named.clone().into(),
                    })),
                })
            }
            O::AssignOffer => Operation::Assign(rec::Assign {
                step: Some(rec::assign::Step::Offer(rec::AssignOffer {
                    to: Some(party(self.c)),
                })),
            }),
            O::AssignAccept => {
                extra.push(named.clone());
                Operation::Assign(rec::Assign {
                    step: Some(rec::assign::Step::Acceptance(rec::HandoverAcceptance {
                        offer_id: named.clone().into(),
                    })),
                })
            }
            O::Offer => Operation::Offer(rec::Offer {
                to: Some(party(self.c)),
            }),
            O::Forward => Operation::Forward(rec::Forward {
                to: Some(queue(self.a, &[self.c], 0)),
            }),
            O::Nominate => Operation::Nominate(rec::Nominate {
                candidate: Some(party(self.c)),
            }),
            O::OpenCondition => Operation::OpenCondition(rec::OpenCondition {
                condition: Some(rec::Condition {
                    description: "sign-off".into(),
                    addressed_to: Some(party(self.c)),
                    ..Default::default()
                }),
            }),
            O::OpenGate(who, dated) => Operation::OpenCondition(rec::OpenCondition {
                condition: Some(rec::Condition {
                    description: "approval".into(),
                    addressed_to: Some(party(who)),
                    kind: rec::GateKind::Approval as i32,
                    deadline_unix_ms: if dated { self.deadline } else { 0 },
                    participants: vec![party(who)],
                    aggregation: None,
                }),
            }),
            O::Satisfy => {
                extra.push(gate.clone());
                Operation::SatisfyCondition(rec::SatisfyCondition {})
            }
            O::GateAccept => {
                extra.push(gate.clone());
                Operation::GateDecision(rec::GateDecision {
                    answer: rec::GateAnswer::Accept as i32,
                    content_digest: view.map(|v| v.version.clone()).unwrap_or_default(),
                    participant: None,
                    reason: String::new(),
                })
            }
            O::Defer(first) => Operation::Defer(rec::Defer {
                reason: "waiting on a supplier".into(),
                return_unix_ms: if first {
                    self.deadline
                } else {
                    now + 10 * WINDOW_MS
                },
                return_event: String::new(),
            }),
            O::DeclareObsolete => Operation::DeclareObsolete(rec::DeclareObsolete {
                parent_ref: format!("{}-parent", self.id),
            }),
            O::RunStart => Operation::RunStart(rec::RunStart {
                run: format!("{}-run", self.id),
                heartbeat_interval_ms: WINDOW_MS,
                ..Default::default()
            }),
            O::RunRunning => Operation::RunTransition(rec::RunTransition {
                run: format!("{}-run", self.id),
                to: rec::RunState::Running as i32,
                context: None,
            }),
        };
        let mut basis: Vec<Vec<u8>> = view
            .and_then(|v| {
                v.history.iter().rev().find(|h| {
                    h.operation != "admission" && h.outcome.as_ref().is_some_and(|o| o.applied)
                })
            })
            .map(|h| h.record_id.to_vec())
            .into_iter()
            .collect();
        for e in extra {
            if !e.is_empty() && !basis.contains(&e) {
                basis.push(e);
            }
        }
        Record {
            author: Some(party(act.org)),
            declared_at_unix_ms: now,
            commitment_id: self.id.clone(),
            basis: basis.into_iter().map(Into::into).collect(),
            nonce: nonce.to_vec().into(),
            operation: Some(op),
            ..Default::default()
        }
    }

    /// Whether the record of `op` is one the later moves name (the offer, the gate, the defer).
    pub fn names(op: ActOp) -> bool {
        matches!(
            op,
            ActOp::DelegateOffer
                | ActOp::AssignOffer
                | ActOp::OpenCondition
                | ActOp::OpenGate(..)
                | ActOp::Defer(true)
        )
    }
}
