//! Issue 26 item 7: one truth across organisations, over real nodes. Every class of the issue's
//! table, with two or three organisations (acme/alice, globex/bob, initech/carol; peered both
//! ways), each node in this process on its own driven clock. A race is made deterministic by
//! holding delivery between the racing nodes (`partition`: each disables the other as a peer,
//! records wait in the outboxes), letting each side write, then letting delivery resume.
//!
//! Every test then waits until every outbox drained and two Work service ticks passed
//! (`quiesce`), and asserts that every node holding the commitment shows the same
//! `GetCommitment` view (`assert_same_view`, as each node's operator), that the record that lost
//! is rejected with the kernel's code at every node (its history entry and GetRecord), and, for
//! the records time produces, that only the home's Work service party wrote them.
//!
//! Expected outcomes follow seed 000 and the design: the home of a commitment is the
//! organisation that wrote its request (here always acme); the home's order and the home's clock
//! decide; a check against time uses the time the record was declared at, not the receiver's
//! clock at arrival.

use crate::federation_common;

use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_tests::TestNode;
use federation_common::convergence::*;
use federation_common::{party, record, request, wall_now_ms};

/// The organisation that writes every request here (the home).
const HOME: &str = "acme";

fn t0() -> i64 {
    wall_now_ms() / 1000 * 1000
}

async fn two() -> (Org, Org, i64) {
    let t = t0();
    let mut o = driven_orgs(&[("acme", "alice"), ("globex", "bob")], t).await;
    let b = o.pop().unwrap();
    (o.pop().unwrap(), b, t)
}

async fn three() -> (Org, Org, Org, i64) {
    let t = t0();
    let mut o = driven_orgs(
        &[("acme", "alice"), ("globex", "bob"), ("initech", "carol")],
        t,
    )
    .await;
    let c = o.pop().unwrap();
    let b = o.pop().unwrap();
    (o.pop().unwrap(), b, c, t)
}

fn alice(c: &str, basis: &[[u8; 32]], op: Operation) -> Record {
    record("acme", "alice", c, basis, op)
}

fn bob(c: &str, basis: &[[u8; 32]], op: Operation) -> Record {
    record("globex", "bob", c, basis, op)
}

fn carol(c: &str, basis: &[[u8; 32]], op: Operation) -> Record {
    record("initech", "carol", c, basis, op)
}

/// alice's request of `c` from bob, with `edit` applied to it.
fn asked(c: &str, edit: impl FnOnce(&mut rec::Request)) -> Record {
    let mut r = request("acme", "alice", c, party("globex", "bob"));
    if let Some(Operation::Request(q)) = &mut r.operation {
        edit(q);
    }
    r
}

/// alice's request of `c` put in her queue "desk" for `candidates`.
fn pooled(c: &str, candidates: Vec<PartyRef>, lease_ms: i64) -> Record {
    asked(c, |q| {
        q.candidate = None;
        q.queue = Some(rec::Queue {
            name: "desk".into(),
            owner: Some(party("acme", "alice")),
            candidates,
            lease_ms,
            return_to_pool_on_lease_end: lease_ms > 0,
            ..Default::default()
        });
    })
}

fn promise() -> Operation {
    Operation::Promise(rec::Promise {})
}

fn state() -> Operation {
    Operation::State(rec::State {
        fulfillment_refs: vec!["report.pdf".into()],
    })
}

fn claim() -> Operation {
    Operation::Claim(rec::Claim {})
}

fn gate_answer(version: &[u8], answer: rec::GateAnswer) -> Operation {
    Operation::GateDecision(rec::GateDecision {
        answer: answer as i32,
        content_digest: version.to_vec().into(),
        ..Default::default()
    })
}

/// An approval gate with `participants` (aggregation `rule`) and an optional deadline.
fn gate(participants: Vec<PartyRef>, rule: rec::AggregationRule, deadline: i64) -> Operation {
    Operation::OpenCondition(rec::OpenCondition {
        condition: Some(rec::Condition {
            description: "approve the plan".into(),
            kind: rec::GateKind::Approval as i32,
            deadline_unix_ms: deadline,
            participants,
            aggregation: Some(rec::Aggregation {
                rule: rule as i32,
                ..Default::default()
            }),
            ..Default::default()
        }),
    })
}

fn gate_of<'a>(v: &'a work::GetCommitmentResponse, g: &[u8; 32]) -> Option<&'a work::Gate> {
    v.gates.iter().find(|x| x.record_id.as_ref() == g)
}

fn gate_status(v: &work::GetCommitmentResponse, g: &[u8; 32]) -> String {
    gate_of(v, g).map(|x| x.status.clone()).unwrap_or_default()
}

fn obligor(v: &work::GetCommitmentResponse) -> String {
    v.obligor
        .as_ref()
        .map(|p| format!("{}/{}", p.organisation, p.name))
        .unwrap_or_default()
}

/// Waits until every node in `nodes` shows `c` in `state`.
async fn all_in(nodes: &[&TestNode], c: &str, want: &str) {
    for n in nodes {
        wait_view(n, c, &format!("state {want}"), |v| v.state == want).await;
    }
}

/// Waits until `n` holds the record `id` with a decided outcome (applied or rejected).
async fn decided(n: &TestNode, c: &str, id: &[u8; 32]) {
    wait_view(n, c, &format!("{} decided", hex::encode(id)), |v| {
        v.history.iter().any(|h| {
            h.record_id.as_ref() == id.as_slice()
                && h.outcome.as_ref().is_some_and(|o| {
                    o.applied
                        || (!o.rejection_code.is_empty() && o.rejection_code != "awaiting_sequence")
                })
        })
    })
    .await;
}

// ---- authorities: each organisation's own configuration ----

/// Seed 000, "administrative_close — a party with that authority (`[authorities]`)": acme
/// grants it to alice, globex grants it to no one, and no node holds another's grants. alice
/// closes a commitment homed at acme, shared with bob: globex takes the home's word on her
/// authority, and both nodes show it closed (before, globex's kernel refused it `wrong_role`
/// and the two disagreed for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_authority_granted_at_the_home_holds_at_every_node() {
    let c = "grant-close";
    let mut o = driven_orgs_edited(
        &[("acme", "alice"), ("globex", "bob")],
        t0(),
        |org, text| {
            if org == "acme" {
                *text = text.replace(
                    "administrative_close = []",
                    "administrative_close = [\"acme/alice\"]",
                );
            }
        },
    )
    .await;
    let (b, a) = (o.pop().unwrap(), o.pop().unwrap());
    a.act_ok(asked(c, |_| {})).await;
    all_in(&[&a.node, &b.node], c, "requested").await;
    let close = a
        .act_ok(alice(
            c,
            &[],
            Operation::AdministrativeClose(rec::AdministrativeClose {
                reason: "duplicate of another request".into(),
            }),
        ))
        .await;
    let nodes = [&a.node, &b.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(v.state, "closed_administratively");
    assert_applied_everywhere(&nodes, c, &close).await;
}

// ---- races with no deadline ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn release_at_acme_against_decline_at_globex() {
    let c = "race-release";
    let (a, b, _) = two().await;
    a.act_ok(asked(c, |_| {})).await;
    all_in(&[&a.node, &b.node], c, "requested").await;

    partition(&a.node, &b.node).await;
    a.act_ok(alice(
        c,
        &[],
        Operation::Release(rec::Release {
            reason: "no longer needed".into(),
        }),
    ))
    .await;
    let (decline, _) = b
        .act(bob(
            c,
            &[],
            Operation::Decline(rec::Decline {
                reason: rec::DeclineReason::NoCapacity as i32,
                text: String::new(),
            }),
        ))
        .await;
    heal(&a.node, &b.node).await;

    let nodes = [&a.node, &b.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(v.state, "released", "the home applied the release first");
    assert_rejected_everywhere(&nodes, c, &decline, "terminal_state").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_at_globex_against_accept_at_acme_on_a_stated_commitment() {
    let c = "race-cancel";
    let (a, b, _) = two().await;
    a.act_ok(asked(c, |_| {})).await;
    all_in(&[&a.node, &b.node], c, "requested").await;
    b.act_ok(bob(c, &[], promise())).await;
    all_in(&[&a.node, &b.node], c, "promised").await;
    b.act_ok(bob(c, &[], state())).await;
    all_in(&[&a.node, &b.node], c, "stated").await;

    partition(&a.node, &b.node).await;
    a.act_ok(alice(c, &[], Operation::Accept(rec::Accept::default())))
        .await;
    let (cancel, _) = b
        .act(bob(
            c,
            &[],
            Operation::Cancel(rec::Cancel {
                reason: rec::CancelReason::CannotComplete as i32,
                text: String::new(),
            }),
        ))
        .await;
    heal(&a.node, &b.node).await;

    let nodes = [&a.node, &b.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(v.state, "accepted", "the home applied the accept first");
    assert_rejected_everywhere(&nodes, c, &cancel, "terminal_state").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_claims_at_once_by_globex_and_initech_on_a_queued_request() {
    let c = "race-claims";
    let (a, b, x, _) = three().await;
    a.act_ok(pooled(
        c,
        vec![party("globex", "bob"), party("initech", "carol")],
        0,
    ))
    .await;
    let nodes = [&a.node, &b.node, &x.node];
    all_in(&nodes, c, "requested").await;

    // Nobody hears anybody: bob and carol both claim.
    partition(&a.node, &b.node).await;
    partition(&a.node, &x.node).await;
    partition(&b.node, &x.node).await;
    let (bobs, _) = b.act(bob(c, &[], claim())).await;
    let (carols, _) = x.act(carol(c, &[], claim())).await;
    // bob's claim reaches the home first, carol's after.
    heal(&a.node, &b.node).await;
    decided(&a.node, c, &bobs).await;
    heal(&a.node, &x.node).await;
    heal(&b.node, &x.node).await;

    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(obligor(&v), "globex/bob", "the home took bob's claim first");
    assert_eq!(v.state, "promised");
    assert_applied_everywhere(&nodes, c, &bobs).await;
    // Seed 000: claim moves requested to promised; a second claim finds it promised.
    assert_rejected_everywhere(&nodes, c, &carols, "invalid_state").await;
    // The records time produces are the home's alone; the promise bob's claim produced is
    // written once, by bob (his node, globex), and held the same at every node.
    assert_time_records_by(&nodes, c, HOME).await;
    assert_produced_promise(&nodes, c, &bobs, "globex/bob").await;
}

// ---- records time produces, racing a party's record ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn valid_until_passes_at_the_home_while_bob_promises_just_before_on_his_clock() {
    let c = "time-expire";
    let (a, b, t) = two().await;
    let d = t + 1_000;
    a.act_ok(asked(c, |q| q.valid_until_unix_ms = d)).await;
    all_in(&[&a.node, &b.node], c, "requested").await;

    partition(&a.node, &b.node).await;
    // acme's clock reaches the validity statement: its Work service party expires the request.
    a.clock.set(d);
    wait_view(&a.node, c, "expired at the home", |v| v.state == "expired").await;
    // globex's clock is 1 ms short of it: bob promises.
    b.clock.set(d - 1);
    let (promised, _) = b.act(bob(c, &[], promise())).await;
    heal(&a.node, &b.node).await;
    set_clocks(&[&a, &b], d + 100);

    let nodes = [&a.node, &b.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(v.state, "expired", "the home's expire came first");
    assert_rejected_everywhere(&nodes, c, &promised, "terminal_state").await;
    let counts = assert_time_records_by(&nodes, c, HOME).await;
    assert_eq!(counts, [1, 1], "one expire, by the home, held everywhere");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn implicit_acceptance_window_ends_at_globex_while_alice_rejects_at_the_home() {
    let c = "time-implicit";
    let (a, b, t) = two().await;
    let window = 1_000;
    a.act_ok(asked(c, |q| {
        q.implicit_acceptance = Some(rec::ImplicitAcceptanceTerms { window_ms: window })
    }))
    .await;
    all_in(&[&a.node, &b.node], c, "requested").await;
    b.act_ok(bob(c, &[], promise())).await;
    all_in(&[&a.node, &b.node], c, "promised").await;
    b.act_ok(bob(c, &[], state())).await;
    all_in(&[&a.node, &b.node], c, "stated").await;

    partition(&a.node, &b.node).await;
    // globex's clock passes the window's end; two of its ticks pass.
    b.clock.set(t + window + 10);
    settle(&[&b.node], false).await;
    // At the home the window is still open: alice rejects.
    a.clock.set(t + window - 1);
    let reject = a
        .act_ok(alice(
            c,
            &[],
            Operation::Reject(rec::Reject {
                reason: "page 3 is missing".into(),
            }),
        ))
        .await;
    heal(&a.node, &b.node).await;
    set_clocks(&[&a, &b], t + window + 100);

    let nodes = [&a.node, &b.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(
        v.state, "promised",
        "the reject came within the home's window"
    );
    assert_applied_everywhere(&nodes, c, &reject).await;
    assert_eq!(
        assert_time_records_by(&nodes, c, HOME).await,
        [0, 0],
        "no implicit accept: at the home the statement was rejected in time"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lease_ends_at_the_home_while_bob_states_on_his_clock() {
    let c = "time-lease";
    let (a, b, t) = two().await;
    let lease = 1_000;
    a.act_ok(pooled(c, vec![party("globex", "bob")], lease))
        .await;
    all_in(&[&a.node, &b.node], c, "requested").await;
    let claimed = b.act_ok(bob(c, &[], claim())).await;
    for n in [&a.node, &b.node] {
        wait_view(n, c, "held by bob", |v| {
            v.state == "promised" && v.assignment == "held"
        })
        .await;
    }
    // Nothing else in flight (the promise the claim produced has reached both: bob's node wrote
    // it as bob, and the home ordered it).
    quiesce(&[&a.node, &b.node]).await;
    assert_produced_promise(&[&a.node, &b.node], c, &claimed, "globex/bob").await;

    partition(&a.node, &b.node).await;
    // The lease ends on acme's clock: its Work service party returns the work to the pool.
    a.clock.set(t + lease);
    wait_view(&a.node, c, "back in the pool at the home", |v| {
        v.state == "requested" && v.assignment == "pooled"
    })
    .await;
    // On globex's clock the lease still runs: bob states fulfilment.
    b.clock.set(t + lease - 1);
    let (stated, _) = b.act(bob(c, &[], state())).await;
    heal(&a.node, &b.node).await;
    set_clocks(&[&a, &b], t + lease + 100);

    let nodes = [&a.node, &b.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(
        (v.state.as_str(), v.assignment.as_str()),
        ("requested", "pooled")
    );
    assert_applied_everywhere(&nodes, c, &claimed).await;
    // Seed 000: state is from promised; the unclaim took it back to requested.
    assert_rejected_everywhere(&nodes, c, &stated, "invalid_state").await;
    assert_time_records_by(&nodes, c, HOME).await;
    // The produced promise stays the one record on the ended claim.
    assert_produced_promise(&nodes, c, &claimed, "globex/bob").await;
}

// ---- a run at one organisation executing a commitment homed at another ----

/// Issue 29; seed 000: "Execution, control and liveness come from executor or external
/// Claims"; "active — Execution running; liveness live or not applicable". bob runs the work
/// of a commitment homed at acme on his own node: globex's clock writes his run's execution
/// claims (observations resting on the run records, written where the run is, not at the
/// home), the home orders them, and both nodes show the same execution, liveness and category
/// — then, once the declared heartbeat interval passes on both clocks with no new record, the
/// same `stale` and `unknown`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_at_globex_claims_the_execution_of_a_commitment_homed_at_acme() {
    let c = "run-remote";
    let (a, b, t) = two().await;
    let nodes = [&a.node, &b.node];
    a.act_ok(asked(c, |_| {})).await;
    all_in(&nodes, c, "requested").await;
    b.act_ok(bob(c, &[], promise())).await;
    all_in(&nodes, c, "promised").await;
    let interval = 600_000;
    let start = b
        .act_ok(bob(
            c,
            &[],
            Operation::RunStart(rec::RunStart {
                run: "r1".into(),
                heartbeat_interval_ms: interval,
                ..Default::default()
            }),
        ))
        .await;
    let running = b
        .act_ok(bob(
            c,
            &[],
            Operation::RunTransition(rec::RunTransition {
                run: "r1".into(),
                to: rec::RunState::Running as i32,
                context: None,
            }),
        ))
        .await;
    for n in nodes {
        wait_view(n, c, "running", |v| v.execution == "running").await;
    }
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(
        (
            v.execution.as_str(),
            v.liveness.as_str(),
            v.category.as_str()
        ),
        ("running", "live", "active")
    );
    // Each claim is bob's, rests on one of his run records, and is applied at both nodes.
    for n in nodes {
        let claims = history_records(n, c, "observation").await;
        let mut rested: Vec<Vec<u8>> = Vec::new();
        for (author, r, applied) in &claims {
            assert_eq!(
                (author.as_str(), *applied),
                ("globex/bob", true),
                "{}",
                n.name
            );
            rested.extend(r.basis.iter().map(|b| b.to_vec()));
        }
        rested.sort();
        let mut want = vec![start.to_vec(), running.to_vec()];
        want.sort();
        assert_eq!(rested, want, "{}: one claim per run record", n.name);
    }
    // The interval passes on both clocks with no new record: stale, unknown, at both nodes.
    set_clocks(&[&a, &b], t + interval + 1_000);
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(
        (v.liveness.as_str(), v.category.as_str()),
        ("stale", "unknown"),
        "seed 000: unknown — Liveness stale or unknown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deferral_returns_at_the_home_after_bob_defers_again_on_his_clock() {
    let c = "time-defer";
    let (a, b, t) = two().await;
    let back = t + 1_000;
    a.act_ok(asked(c, |_| {})).await;
    all_in(&[&a.node, &b.node], c, "requested").await;
    b.act_ok(bob(c, &[], promise())).await;
    all_in(&[&a.node, &b.node], c, "promised").await;
    a.act_ok(alice(
        c,
        &[],
        Operation::Defer(rec::Defer {
            reason: "budget review".into(),
            return_unix_ms: back,
            ..Default::default()
        }),
    ))
    .await;
    for n in [&a.node, &b.node] {
        wait_view(n, c, "deferred", |v| v.deferral.is_some()).await;
    }

    partition(&a.node, &b.node).await;
    // globex's clock reaches the return date first; two of its ticks pass; bob defers again.
    b.clock.set(back);
    settle(&[&b.node], false).await;
    let (again, _) = b
        .act(bob(
            c,
            &[],
            Operation::Defer(rec::Defer {
                reason: "waiting for parts".into(),
                ..Default::default()
            }),
        ))
        .await;
    // bob's defer reaches the home while its deferral is still open there…
    heal(&a.node, &b.node).await;
    decided(&a.node, c, &again).await;
    // …and then the home's clock reaches the return date.
    set_clocks(&[&a, &b], back + 100);

    let nodes = [&a.node, &b.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert!(v.deferral.is_none(), "the home's resume closed it: {v:?}");
    assert_eq!(v.category, "ready");
    assert_rejected_everywhere(&nodes, c, &again, "already_deferred").await;
    assert_eq!(
        assert_time_records_by(&nodes, c, HOME).await,
        [1, 1],
        "one resume, by the home"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gate_closed_as_obsolete_by_the_home_against_carols_late_reject() {
    let c = "time-obsolete";
    let (a, b, x, _) = three().await;
    // carol is the principal: initech holds the commitment from its request on.
    a.act_ok(asked(c, |q| q.principal = Some(party("initech", "carol"))))
        .await;
    let nodes = [&a.node, &b.node, &x.node];
    all_in(&nodes, c, "requested").await;
    b.act_ok(bob(c, &[], promise())).await;
    all_in(&nodes, c, "promised").await;
    let g = b
        .act_ok(bob(
            c,
            &[],
            gate(
                vec![party("acme", "alice"), party("initech", "carol")],
                rec::AggregationRule::Any,
                0,
            ),
        ))
        .await;
    let mut version = Vec::new();
    for n in nodes {
        version = wait_view(n, c, "the gate waits", |v| gate_status(v, &g) == "waiting")
            .await
            .version
            .to_vec();
    }

    partition(&a.node, &x.node).await;
    partition(&b.node, &x.node).await;
    // alice accepts: the gate (any) is satisfied; the home closes carol's request as obsolete.
    a.act_ok(alice(
        c,
        &[g],
        gate_answer(&version, rec::GateAnswer::Accept),
    ))
    .await;
    wait_view(&a.node, c, "carol's request closed as obsolete", |v| {
        gate_of(v, &g).is_some_and(|x| x.answers.iter().any(|y| y.answer == "obsolete"))
    })
    .await;
    // carol, not knowing it yet, rejects.
    let (late, _) = x
        .act(carol(
            c,
            &[g],
            gate_answer(&version, rec::GateAnswer::Reject),
        ))
        .await;
    heal(&a.node, &x.node).await;
    heal(&b.node, &x.node).await;

    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(gate_status(&v, &g), "satisfied");
    assert_rejected_everywhere(&nodes, c, &late, "already_answered").await;
    assert_time_records_by(&nodes, c, HOME).await;
}

/// alice requests `c` of bob, bob promises, and alice opens a gate with bob its one participant
/// (rule all) closing at `deadline`; returns the gate and the terms version bob answers against,
/// once both nodes show the gate waiting.
async fn promised_with_a_gate_for_bob(
    a: &Org,
    b: &Org,
    c: &str,
    deadline: i64,
) -> ([u8; 32], Vec<u8>) {
    a.act_ok(asked(c, |_| {})).await;
    all_in(&[&a.node, &b.node], c, "requested").await;
    b.act_ok(bob(c, &[], promise())).await;
    all_in(&[&a.node, &b.node], c, "promised").await;
    let g = a
        .act_ok(alice(
            c,
            &[],
            gate(
                vec![party("globex", "bob")],
                rec::AggregationRule::All,
                deadline,
            ),
        ))
        .await;
    let mut version = Vec::new();
    for n in [&a.node, &b.node] {
        version = wait_view(n, c, "the gate waits", |v| gate_status(v, &g) == "waiting")
            .await
            .version
            .to_vec();
    }
    (g, version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gate_answered_1_ms_before_its_deadline_reaches_the_home_after_it() {
    let c = "time-gate-deadline";
    let (a, b, t) = two().await;
    let deadline = t + 1_000;
    let (g, version) = promised_with_a_gate_for_bob(&a, &b, c, deadline).await;

    partition(&a.node, &b.node).await;
    b.clock.set(deadline - 1);
    let answer = b
        .act_ok(bob(c, &[g], gate_answer(&version, rec::GateAnswer::Accept)))
        .await;
    // The answer reaches acme 5 ms after the deadline, on acme's clock.
    a.clock.set(deadline + 5);
    heal(&a.node, &b.node).await;
    b.clock.set(deadline + 5);

    let nodes = [&a.node, &b.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(gate_status(&v, &g), "satisfied", "answered in time");
    assert_applied_everywhere(&nodes, c, &answer).await;
    assert_time_records_by(&nodes, c, HOME).await;
}

/// bob answers a gate 1 ms before its deadline on his clock; the answer reaches acme, the home,
/// 2.5 s after the deadline on acme's clock. The home honours bob's time only within
/// `federation.clock_skew_ms` (README, "Delivery"): with the default 2 s it decides the answer
/// at its clock less 2 s, past the deadline; with 5 s, at bob's time, in time. Either way every
/// node ends the same.
async fn gate_answer_held_past_the_skew_tolerance(skew: Option<u64>) -> String {
    let c = "time-gate-skew";
    let t = t0();
    let extra = skew.map_or(String::new(), |ms| format!("clock_skew_ms = {ms}\n"));
    let mut o = driven_orgs_with(&[("acme", "alice"), ("globex", "bob")], t, &extra).await;
    let b = o.pop().unwrap();
    let a = o.pop().unwrap();
    let deadline = t + 1_000;
    let (g, version) = promised_with_a_gate_for_bob(&a, &b, c, deadline).await;
    partition(&a.node, &b.node).await;
    b.clock.set(deadline - 1);
    let answer = b
        .act_ok(bob(c, &[g], gate_answer(&version, rec::GateAnswer::Accept)))
        .await;
    // acme's clock passes the deadline by 2.5 s before the answer reaches it. (A gate's
    // deadline is checked against the answer's time; the view shows the gate unsatisfiable once
    // the deadline passed with an answer missing.)
    a.clock.set(deadline + 2_500);
    b.clock.set(deadline + 2_500);
    heal(&a.node, &b.node).await;
    let nodes = [&a.node, &b.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_time_records_by(&nodes, c, HOME).await;
    match skew {
        None => assert_rejected_everywhere(&nodes, c, &answer, "deadline_passed").await,
        Some(_) => assert_applied_everywhere(&nodes, c, &answer).await,
    }
    gate_status(&v, &g)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gate_answer_held_longer_than_the_skew_tolerance_is_late_everywhere() {
    let status = gate_answer_held_past_the_skew_tolerance(None).await;
    assert_eq!(
        status, "unsatisfiable",
        "2.5 s in transit > the default 2 s tolerance"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wider_skew_tolerance_counts_the_same_answer_in_time_everywhere() {
    let status = gate_answer_held_past_the_skew_tolerance(Some(5_000)).await;
    assert_eq!(
        status, "satisfied",
        "2.5 s in transit < clock_skew_ms = 5000"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn promise_conditional_with_a_deadline_2_ms_ahead() {
    let c = "time-conditional";
    let (a, b, t) = two().await;
    a.act_ok(asked(c, |_| {})).await;
    all_in(&[&a.node, &b.node], c, "requested").await;

    partition(&a.node, &b.node).await;
    let pc = b
        .act_ok(bob(
            c,
            &[],
            Operation::PromiseConditional(rec::PromiseConditional {
                condition: Some(rec::Condition {
                    description: "the site is open".into(),
                    addressed_to: Some(party("acme", "alice")),
                    ..Default::default()
                }),
                deadline_unix_ms: t + 2,
            }),
        ))
        .await;
    // It reaches acme after its deadline on acme's clock.
    set_clocks(&[&a, &b], t + 5);
    heal(&a.node, &b.node).await;

    let nodes = [&a.node, &b.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    // Declared 2 ms before its deadline, it was valid; then the home's clock passed the
    // deadline, the precondition's validity statement: the home expires it.
    assert_applied_everywhere(&nodes, c, &pc).await;
    assert_eq!(v.state, "expired");
    assert_eq!(
        assert_time_records_by(&nodes, c, HOME).await,
        [1, 1],
        "one expire, by the home"
    );
}

// ---- an organisation joining mid-way ----

/// alice's request `r` of `c`, held by acme and globex; initech is a peer of both but not on it.
async fn requested_without_initech(c: &str, r: Record) -> (Org, Org, Org) {
    let (a, b, x, _) = three().await;
    a.act_ok(r).await;
    all_in(&[&a.node, &b.node], c, "requested").await;
    (a, b, x)
}

/// Waits until initech holds `c` as carol reads it (her own token), within [`SETTLE`].
async fn carol_sees(x: &Org, c: &str) -> work::GetCommitmentResponse {
    // NOT_FOUND is "not arrived yet" (or not hers yet); any other answer fails the wait at once.
    let w = x.node.work_party("carol").await.unwrap();
    let got = accord_tests::eventually(SETTLE, || {
        let mut w = w.clone();
        async move {
            accord_tests::not_yet(
                w.get_commitment(work::GetCommitmentRequest {
                    commitment_id: c.into(),
                })
                .await,
                &[tonic::Code::NotFound],
            )
        }
    })
    .await;
    match got {
        Ok(v) => v,
        Err(e) => panic!(
            "initech never received {c} (GetCommitment as carol: {e:#}); operator's view: {:?}",
            view(&x.node, c).await.map(|v| v.state)
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn initech_joins_by_a_delegate_offer_and_carol_accepts_at_once() {
    let c = "join-delegate";
    let (a, b, x) = requested_without_initech(c, asked(c, |_| {})).await;
    b.act_ok(bob(c, &[], promise())).await;
    all_in(&[&a.node, &b.node], c, "promised").await;

    let offer = b
        .act_ok(bob(
            c,
            &[],
            Operation::Delegate(rec::Delegate {
                step: Some(rec::delegate::Step::Offer(rec::DelegateOffer {
                    to: Some(party("initech", "carol")),
                    handover_note: "carol takes it over".into(),
                })),
            }),
        ))
        .await;
    carol_sees(&x, c).await;
    let acceptance = x
        .act_ok(carol(
            c,
            &[offer],
            Operation::Delegate(rec::Delegate {
                step: Some(rec::delegate::Step::Acceptance(rec::HandoverAcceptance {
                    offer_id: offer.to_vec().into(),
                })),
            }),
        ))
        .await;

    let nodes = [&a.node, &b.node, &x.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(obligor(&v), "initech/carol");
    assert_applied_everywhere(&nodes, c, &acceptance).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn initech_joins_by_an_assign_offer_and_carol_accepts_at_once() {
    let c = "join-assign";
    let (a, b, x) = requested_without_initech(c, asked(c, |_| {})).await;
    b.act_ok(bob(c, &[], promise())).await;
    all_in(&[&a.node, &b.node], c, "promised").await;

    let offer = a
        .act_ok(alice(
            c,
            &[],
            Operation::Assign(rec::Assign {
                step: Some(rec::assign::Step::Offer(rec::AssignOffer {
                    to: Some(party("initech", "carol")),
                })),
            }),
        ))
        .await;
    carol_sees(&x, c).await;
    let acceptance = x
        .act_ok(carol(
            c,
            &[offer],
            Operation::Assign(rec::Assign {
                step: Some(rec::assign::Step::Acceptance(rec::HandoverAcceptance {
                    offer_id: offer.to_vec().into(),
                })),
            }),
        ))
        .await;

    let nodes = [&a.node, &b.node, &x.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(
        v.obligee,
        Some(party("initech", "carol")),
        "carol is the new obligee"
    );
    assert_applied_everywhere(&nodes, c, &acceptance).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn initech_joins_by_an_offer_from_the_queue_and_carol_promises_at_once() {
    let c = "join-offer";
    let (a, b, x) = requested_without_initech(c, pooled(c, vec![party("globex", "bob")], 0)).await;

    a.act_ok(alice(
        c,
        &[],
        Operation::Offer(rec::Offer {
            to: Some(party("initech", "carol")),
        }),
    ))
    .await;
    carol_sees(&x, c).await;
    let promised = x.act_ok(carol(c, &[], promise())).await;

    let nodes = [&a.node, &b.node, &x.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(
        (v.state.as_str(), obligor(&v).as_str()),
        ("promised", "initech/carol")
    );
    assert_applied_everywhere(&nodes, c, &promised).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn initech_joins_as_a_gate_participant_and_carol_answers_at_once() {
    let c = "join-gate";
    let (a, b, x) = requested_without_initech(c, asked(c, |_| {})).await;
    b.act_ok(bob(c, &[], promise())).await;
    all_in(&[&a.node, &b.node], c, "promised").await;

    let g = b
        .act_ok(bob(
            c,
            &[],
            gate(
                vec![party("initech", "carol")],
                rec::AggregationRule::All,
                0,
            ),
        ))
        .await;
    let seen = carol_sees(&x, c).await;
    let answer = x
        .act_ok(carol(
            c,
            &[g],
            gate_answer(&seen.version, rec::GateAnswer::Accept),
        ))
        .await;

    let nodes = [&a.node, &b.node, &x.node];
    quiesce(&nodes).await;
    let v = assert_same_view(&nodes, c).await;
    assert_eq!(gate_status(&v, &g), "satisfied");
    assert_applied_everywhere(&nodes, c, &answer).await;
}
