//! Shared fixtures: a cast of parties, Access, and a driven "world" that applies records.
#![allow(dead_code)]

use accord_kernel::*;

pub fn p(org: &str, name: &str) -> Party {
    Party::new(org, name)
}

/// The cast. Each party has its own organisation, except the executor E, who acts for the
/// candidate/obligor C's organisation, and O2, who acts for the obligee O's.
pub struct Cast;
impl Cast {
    pub fn o() -> Party {
        p("buyer", "olga")
    }
    pub fn o2() -> Party {
        p("buyer", "otto")
    }
    pub fn c() -> Party {
        p("supplier", "carl")
    }
    pub fn e() -> Party {
        p("supplier", "eve")
    }
    pub fn k() -> Party {
        p("pool", "kim")
    }
    pub fn q() -> Party {
        p("hub", "quinn")
    }
    pub fn a() -> Party {
        p("qa", "ada")
    }
    pub fn x() -> Party {
        p("mgmt", "xena")
    }
    pub fn pr() -> Party {
        p("board", "pia")
    }
    pub fn d() -> Party {
        p("ops", "dan")
    }
    pub fn s() -> Party {
        p("node", "work-service")
    }
    pub fn n1() -> Party {
        p("delegate-co", "nina")
    }
    pub fn n2() -> Party {
        p("assign-co", "noah")
    }
    pub fn y() -> Party {
        p("cond-co", "yan")
    }
    pub fn w() -> Party {
        p("bank", "walt")
    }
    pub fn z() -> Party {
        p("else", "zed")
    }
    pub fn u() -> Party {
        p("rogue", "ursula")
    }
    /// An external claimant: Access grants it `Observer` for the supplier's work.
    pub fn m() -> Party {
        p("monitor-co", "mo")
    }
}

pub fn access() -> Access {
    let mut a = Access::new(Cast::s());
    for org in [
        "buyer",
        "supplier",
        "pool",
        "hub",
        "qa",
        "mgmt",
        "board",
        "ops",
        "delegate-co",
        "assign-co",
        "cond-co",
        "bank",
        "else",
        "monitor-co",
        "x",
        "y",
    ] {
        a = a.with_organisation(org);
    }
    a.with_grant(Authority::AdministrativeClose, Cast::d())
        .with_grant(
            Authority::Observer {
                organisation: "supplier".into(),
            },
            Cast::m(),
        )
}

pub fn rid(n: u64) -> RecordId {
    let mut id = [0u8; 32];
    id[..8].copy_from_slice(&n.to_be_bytes());
    id[31] = 0xAC;
    id
}

pub fn terms(title: &str) -> Terms {
    Terms {
        title: title.into(),
        description: "work".into(),
        ..Terms::default()
    }
}

pub fn terms_items(title: &str, items: &[&str]) -> Terms {
    Terms {
        title: title.into(),
        items: items
            .iter()
            .map(|i| LineItem {
                id: (*i).into(),
                description: format!("item {i}"),
            })
            .collect(),
        ..Terms::default()
    }
}

pub const T0: i64 = 1_000_000;

/// A commitment driven through records with an explicit clock.
pub struct World {
    pub access: Access,
    pub now: i64,
    pub next: u64,
    pub id: String,
    pub c: Option<Commitment>,
    pub effects: Vec<Effect>,
    /// Every applied record with the time it was applied at.
    pub log: Vec<(Record, i64)>,
}

impl World {
    pub fn new() -> Self {
        World {
            access: access(),
            now: T0,
            next: 1,
            id: "c-1".into(),
            c: None,
            effects: Vec::new(),
            log: Vec::new(),
        }
    }

    pub fn fresh_id(&mut self) -> RecordId {
        self.next += 1;
        rid(self.next)
    }

    pub fn record(
        &mut self,
        author: &Party,
        op: Operation,
        basis: &[RecordId],
        items: &[&str],
    ) -> Record {
        Record {
            id: self.fresh_id(),
            author: author.clone(),
            commitment: self.id.clone(),
            basis: basis.to_vec(),
            items: items.iter().map(|s| s.to_string()).collect(),
            op,
        }
    }

    pub fn apply_record(&mut self, r: Record) -> Result<RecordId, Rejection> {
        let before = self.c.clone();
        match apply(self.c.as_ref(), &r, &self.access, self.now) {
            Ok((next, fx)) => {
                self.c = Some(next);
                self.effects = fx;
                let id = r.id;
                self.log.push((r, self.now));
                Ok(id)
            }
            Err(e) => {
                assert_eq!(self.c, before, "a rejection changed the state");
                Err(e)
            }
        }
    }

    pub fn try_op(
        &mut self,
        author: &Party,
        op: Operation,
        basis: &[RecordId],
        items: &[&str],
    ) -> Result<RecordId, Rejection> {
        let r = self.record(author, op, basis, items);
        self.apply_record(r)
    }

    /// Applies and expects success.
    pub fn ok(&mut self, author: &Party, op: Operation) -> RecordId {
        self.ok_with(author, op, &[], &[])
    }

    pub fn ok_with(
        &mut self,
        author: &Party,
        op: Operation,
        basis: &[RecordId],
        items: &[&str],
    ) -> RecordId {
        let name = op.wire_name();
        self.try_op(author, op, basis, items)
            .unwrap_or_else(|e| panic!("{name} by {author} rejected: {e}"))
    }

    /// Applies and expects a rejection with `code`.
    pub fn err(&mut self, author: &Party, op: Operation, code: RejectionCode) {
        self.err_with(author, op, &[], &[], code)
    }

    pub fn err_with(
        &mut self,
        author: &Party,
        op: Operation,
        basis: &[RecordId],
        items: &[&str],
        code: RejectionCode,
    ) {
        let name = op.wire_name();
        match self.try_op(author, op, basis, items) {
            Ok(_) => panic!("{name} by {author} was accepted; expected {code}"),
            Err(e) => assert_eq!(e.code, code, "{name} by {author}: {e}"),
        }
    }

    pub fn c(&self) -> &Commitment {
        self.c.as_ref().expect("commitment exists")
    }

    pub fn state(&self) -> Option<State> {
        self.c().state()
    }

    pub fn item(&self, id: &str) -> State {
        self.c().items[id].state
    }

    pub fn view(&self) -> View {
        view(self.c(), self.now, &self.access)
    }

    /// Applies every due Work service record; returns them.
    pub fn tick(&mut self) -> Vec<ServiceAction> {
        let due = due_work(self.c(), self.now);
        for a in due.clone() {
            let id = self.fresh_id();
            let r = service_record(a, id);
            self.apply_record(r)
                .unwrap_or_else(|e| panic!("service record rejected: {e}"));
        }
        due
    }

    /// Replays the log from scratch and returns the final state.
    pub fn replay(&self) -> Commitment {
        let mut c: Option<Commitment> = None;
        for (r, at) in &self.log {
            c = Some(apply(c.as_ref(), r, &self.access, *at).expect("replay").0);
        }
        c.expect("non-empty log")
    }
}

impl Default for World {
    fn default() -> Self {
        World::new()
    }
}

/// A request from O to candidate C, acceptor A, accountable X, principal P.
pub fn basic_request() -> Request {
    Request {
        candidate: Some(Cast::c()),
        acceptor: Some(Cast::a()),
        accountable: Some(Cast::x()),
        principal: Some(Cast::pr()),
        terms: terms("build it"),
        ..Request::default()
    }
}

pub fn pooled_request() -> Request {
    Request {
        queue: Some(Queue {
            name: "q".into(),
            owner: Some(Cast::q()),
            candidates: vec![Cast::k(), Cast::c()],
            lease_ms: Some(1_000),
            return_to_pool_on_lease_end: true,
            start_deadline: None,
            distribution: Distribution::Unspecified,
        }),
        candidate: None,
        ..basic_request()
    }
}

pub fn req(r: Request) -> Operation {
    Operation::Request(Box::new(r))
}

pub fn world_with(r: Request) -> (World, RecordId) {
    let mut w = World::new();
    let id = w.ok(&Cast::o(), req(r));
    (w, id)
}

pub fn state_op(refs: &[&str]) -> Operation {
    Operation::State {
        fulfillment_refs: refs.iter().map(|s| s.to_string()).collect(),
    }
}

pub fn accept_op() -> Operation {
    Operation::Accept {
        evidence_ref: String::new(),
        implicit: false,
        step_up: false,
    }
}

pub fn reason(s: &str) -> String {
    s.to_string()
}

/// An observation claim reporting `execution`, declaring `heartbeat_ms`.
pub fn observe(execution: ExecutionReport, heartbeat_ms: Option<i64>) -> Operation {
    Operation::Observation(Box::new(Observation {
        execution,
        heartbeat_interval_ms: heartbeat_ms,
        ..Observation::default()
    }))
}

/// A gate of `kind` addressed to `participants` with `aggregation`.
pub fn gate(kind: GateKind, participants: &[Party], aggregation: Aggregation) -> Operation {
    Operation::OpenCondition {
        condition: Condition {
            description: format!("{} gate", kind.wire_name().unwrap_or("plain")),
            addressed_to: None,
            kind,
            deadline: None,
            participants: participants.to_vec(),
            aggregation,
        },
    }
}

/// An aggregation rule without modifiers.
pub fn rule(rule: AggregationRule) -> Aggregation {
    Aggregation {
        rule,
        ..Aggregation::default()
    }
}

/// A participant's answer on the terms version `digest`.
pub fn answer(a: GateAnswer, digest: RecordId) -> Operation {
    Operation::GateDecision {
        answer: a,
        content_digest: Some(digest),
        participant: None,
        reason: String::new(),
    }
}

/// A promised commitment (O requests of C, C promises).
pub fn promised() -> World {
    let (mut w, _) = world_with(basic_request());
    w.ok(&Cast::c(), Operation::Promise);
    w
}

/// The record the Work service party writes for a due action (what the node builds from its wire
/// form).
pub fn service_record(a: ServiceAction, id: RecordId) -> Record {
    Record {
        id,
        author: Cast::s(),
        commitment: a.commitment,
        basis: a.basis,
        items: a.items,
        op: a.op,
    }
}

/// The cast by short name (the names the seed-table tests use to say whom a "Who" cell names).
pub fn named_cast() -> Vec<(&'static str, Party)> {
    vec![
        ("O", Cast::o()),
        ("O2", Cast::o2()),
        ("C", Cast::c()),
        ("E", Cast::e()),
        ("K", Cast::k()),
        ("Q", Cast::q()),
        ("A", Cast::a()),
        ("X", Cast::x()),
        ("PR", Cast::pr()),
        ("D", Cast::d()),
        ("S", Cast::s()),
        ("N1", Cast::n1()),
        ("N2", Cast::n2()),
        ("Y", Cast::y()),
        ("W", Cast::w()),
        ("Z", Cast::z()),
        ("U", Cast::u()),
    ]
}

/// The party of [`named_cast`] called `name`.
pub fn cast_party(name: &str) -> Party {
    named_cast()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no party {name} in the cast"))
        .1
}

/// A commitment O requested of C ([`basic_request`]) driven through records into `state`:
/// requested, conditionally_promised (C promises on a condition addressed to W), promised,
/// stated (C states) or accepted (A accepts).
pub fn reach_state(state: &str) -> World {
    let (mut w, _) = world_with(basic_request());
    match state {
        "requested" => {}
        "conditionally_promised" => {
            w.ok(
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
        }
        "promised" | "stated" | "accepted" => {
            w.ok(&Cast::c(), Operation::Promise);
            if state != "promised" {
                w.ok(&Cast::c(), state_op(&["r"]));
            }
            if state == "accepted" {
                w.ok(&Cast::a(), accept_op());
            }
        }
        other => panic!("no path to {other}"),
    }
    assert_eq!(w.state().map(|s| s.wire_name()), Some(state), "reached");
    w
}

/// The code a party of [`named_cast`] that holds no role an operation needs is refused with:
/// `not_authorized` for U (the fixture's Access lets no party act for its organisation,
/// "rogue"), `wrong_role` for every other (it acts for its organisation but holds no role).
pub fn refusal_for(name: &str) -> RejectionCode {
    if name == "U" {
        RejectionCode::NotAuthorized
    } else {
        RejectionCode::WrongRole
    }
}
