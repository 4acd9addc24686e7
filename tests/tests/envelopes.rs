//! Commit envelopes between two organisations' real nodes (seed 003; issue 13): all-ACK commit,
//! one NACK aborts everywhere, a participant that never answers aborts on timeout, the
//! coordinator killed mid-PREPARING and restarted aborts on timeout, and a replay (restart)
//! after the abort leaves the same state. Ticks are external (`envelopes.external_ticks`): the
//! test submits a tick whose `instant_time` lies past the timeout, so nothing waits on a clock.

use crate::federation_common;

use accord_proto::pb::envelope::v1 as env;
use accord_proto::pb::record::v1::{self as rec, record::Operation};
use accord_tests::envelopes::{
    EXTERNAL_TICKS, account, client, get, steps, tick, wait_history, wait_phase,
};
use accord_tests::{TestNode, with_token};
use federation_common::*;

const TIMEOUT_MS: i64 = 30_000;

pub(crate) fn config(text: &mut String, p: &std::path::Path) {
    fast(text, p);
    text.push_str(EXTERNAL_TICKS);
}

/// acme (alice, holding commitment `src` with budget 100) and globex (bob), peers of each
/// other; alice requests `dst` from bob with a budget of 50, so globex holds `dst` and alice is
/// its holder (issue 27: a participant moves a budget only with its holder's consent — the
/// envelope's author must be the commitment's obligee or accountable party).
async fn two_orgs() -> (TestNode, TestNode) {
    two_orgs_with("").await
}

/// [`two_orgs`] with `extra` appended to both nodes' configs (e.g. a declared envelope type).
pub(crate) async fn two_orgs_with(extra: &'static str) -> (TestNode, TestNode) {
    let with = move |text: &mut String, p: &std::path::Path| {
        config(text, p);
        text.push_str(extra);
    };
    let a = TestNode::builder("acme")
        .party("alice")
        .config(with)
        .start()
        .await
        .unwrap();
    let b = TestNode::builder("globex")
        .party("bob")
        .config(with)
        .start()
        .await
        .unwrap();
    with_budgets(a, b).await
}

/// acme and globex federated, with [`two_orgs`]'s budgets: `src` at acme, `dst` at globex.
pub(crate) async fn with_budgets(a: TestNode, b: TestNode) -> (TestNode, TestNode) {
    accord_tests::federate(&a, &b).await.unwrap();
    budget(&a, "alice", "src", 100).await;
    let mut dst = request("acme", "alice", "dst", party("globex", "bob"));
    if let Some(Operation::Request(q)) = &mut dst.operation {
        q.terms = Some(rec::Terms {
            title: "dst budget".into(),
            budget: Some(rec::Budget {
                amount: 50,
                unit: "EUR".into(),
            }),
            ..Default::default()
        });
    }
    declare(&a, "alice", dst).await;
    wait_state(&b, "dst", "requested").await;
    (a, b)
}

/// `party` at `node` requests commitment `c` from itself with a budget of `amount`.
async fn budget(node: &TestNode, party: &str, c: &str, amount: u64) {
    let mut r = record(
        &node.name,
        party,
        c,
        &[],
        Operation::Request(rec::Request {
            candidate: Some(federation_common::party(&node.name, party)),
            terms: Some(rec::Terms {
                title: format!("{c} budget"),
                budget: Some(rec::Budget {
                    amount,
                    unit: "EUR".into(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    );
    r.declared_at_unix_ms = 0;
    declare(node, party, r).await;
}

pub(crate) fn change(kind: env::ChangeKind, account: &str, amount: u64) -> env::EnvelopeChange {
    env::EnvelopeChange {
        kind: kind as i32,
        account: account.into(),
        amount,
        ..Default::default()
    }
}

/// alice starts a transfer of `amount` from acme's `src` to globex's `dst`; globex debits
/// `dst_debit` extra when non-zero (to make it NACK).
pub(crate) async fn start(
    a: &TestNode,
    id: &str,
    amount: u64,
    dst_debit: u64,
) -> env::StartResponse {
    let mut dst = vec![change(env::ChangeKind::Credit, "dst", amount)];
    if dst_debit > 0 {
        dst = vec![change(env::ChangeKind::Debit, "dst", dst_debit)];
    }
    let req = env::StartRequest {
        envelope: id.into(),
        envelope_type: "budget_transfer".into(),
        participants: vec![
            env::EnvelopeParticipant {
                participant: "acme".into(),
                changes: vec![change(env::ChangeKind::Debit, "src", amount)],
            },
            env::EnvelopeParticipant {
                participant: "globex".into(),
                changes: dst,
            },
        ],
    };
    client(a)
        .await
        .start(with_token(req, &a.party_token("alice")))
        .await
        .expect("start")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread")]
async fn all_ack_commits_at_both_organisations_and_moves_the_budget() {
    accord_tests::ensure_fresh_bins();
    let (a, b) = two_orgs().await;
    let s = start(&a, "t-1", 30, 0).await;
    assert_eq!(s.phase, "PENDING");
    let at_a = wait_phase(&a, "t-1", "COMMITTED").await;
    let at_b = wait_phase(&b, "t-1", "COMMITTED").await;
    assert_eq!(at_a.role, "coordinator");
    assert_eq!(at_b.role, "participant");
    assert_eq!(at_a.votes.get("acme").map(String::as_str), Some("ACK"));
    assert_eq!(at_a.votes.get("globex").map(String::as_str), Some("ACK"));
    // The budget left one commitment and arrived at the other: nothing created or lost.
    let (src, dst) = (account(&at_a, "src"), account(&at_b, "dst"));
    assert_eq!((src.balance, src.reserved), (70, 0));
    assert_eq!((dst.balance, dst.reserved), (80, 0));
    assert_eq!(src.balance + dst.balance, 150);
    // Every lifecycle event is a record under its declared name, at both organisations.
    for e in [&at_a, &at_b] {
        let s = steps(e);
        for want in [
            "envelope_start budget_transfer",
            "envelope_prepare TRANSFER_PREPARED",
            "envelope_vote ACK by acme",
            "envelope_vote ACK by globex",
            "envelope_prepared TRANSFER_PREPARE_CONFIRMED",
            "envelope_commit TRANSFER_COMMITTED",
        ] {
            assert!(
                s.contains(&want.to_string()),
                "{}: {want} not in {s:?}",
                e.role
            );
        }
    }
    // Listing open envelopes shows none; with closed ones, this one, committed — at both.
    for n in [&a, &b] {
        let list = |include_closed| {
            let req = env::ListRequest {
                include_closed,
                ..Default::default()
            };
            async move {
                client(n)
                    .await
                    .list(with_token(req, &n.admin_token()))
                    .await
                    .unwrap()
                    .into_inner()
                    .envelopes
            }
        };
        let open = list(false).await;
        assert!(open.is_empty(), "{}: {open:?}", n.name);
        let all = list(true).await;
        let listed: Vec<(&str, &str)> = all
            .iter()
            .map(|e| (e.envelope.as_str(), e.phase.as_str()))
            .collect();
        assert_eq!(listed, [("t-1", "COMMITTED")], "{}", n.name);
    }
    // The coordinator restarted shows the envelope it showed live, event times included: the
    // peer's vote at the time its node applied it, not when acme recorded it (issue 26). (A
    // restart once showed acme's recording time: a standby following acme did too.)
    let mut a = a;
    let live = wait_phase(&a, "t-1", "COMMITTED").await;
    assert!(a.terminate().unwrap());
    a.spawn().await.unwrap();
    assert_eq!(wait_phase(&a, "t-1", "COMMITTED").await, live);
}

#[tokio::test(flavor = "multi_thread")]
async fn one_nack_aborts_everywhere_and_cleans_up() {
    accord_tests::ensure_fresh_bins();
    let (a, b) = two_orgs().await;
    // globex cannot debit 500 from a budget of 50: it answers NACK.
    start(&a, "t-2", 30, 500).await;
    let at_a = wait_phase(&a, "t-2", "ABORTED").await;
    let at_b = wait_phase(&b, "t-2", "ABORTED").await;
    assert_eq!(at_a.abort_cause, "NACK");
    assert_eq!(at_a.votes.get("globex").map(String::as_str), Some("NACK"));
    // acme's reservation is released (capped subtraction), the marks removed, nothing moved.
    let src = account(&at_a, "src");
    assert_eq!((src.balance, src.reserved), (100, 0));
    assert!(src.pending.is_empty(), "{src:?}");
    let dst = account(&at_b, "dst");
    assert_eq!((dst.balance, dst.reserved), (50, 0));
    assert!(
        steps(&at_b).contains(&"envelope_abort TRANSFER_ABORTED".to_string()),
        "{:?}",
        steps(&at_b)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_participant_aborts_on_timeout_and_a_replay_changes_nothing() {
    accord_tests::ensure_fresh_bins();
    let (a, mut b) = two_orgs().await;
    assert!(b.terminate().unwrap(), "globex stops");
    start(&a, "t-3", 30, 0).await;
    let preparing = wait_phase(&a, "t-3", "PREPARING").await;
    // A tick before the timeout changes nothing.
    let early = tick(&a, "early", preparing.started_at_unix_ms + 1_000).await;
    assert_eq!(early.checked, vec!["t-3".to_string()]);
    assert_eq!(get(&a, "t-3").await.unwrap().phase, "PREPARING");
    // A tick past the timeout aborts it.
    tick(
        &a,
        "late",
        preparing.started_at_unix_ms + TIMEOUT_MS + 1_000,
    )
    .await;
    let at_a = wait_phase(&a, "t-3", "ABORTED").await;
    assert_eq!(at_a.abort_cause, "TIMEOUT");
    assert_eq!(account(&at_a, "src").reserved, 0);
    // globex comes back, receives start, prepare, the tick and the abort, and ends ABORTED.
    b.spawn().await.unwrap();
    let at_b = wait_phase(&b, "t-3", "ABORTED").await;
    assert_eq!(account(&at_b, "dst").balance, 50);
    // A restart replays every record (the abort included) and reaches the same state.
    assert!(b.terminate().unwrap());
    b.spawn().await.unwrap();
    let again = wait_phase(&b, "t-3", "ABORTED").await;
    assert_eq!(again.accounts, at_b.accounts);
    assert_eq!(steps(&again), steps(&at_b));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coordinator_killed_mid_preparing_aborts_on_timeout_after_restart() {
    accord_tests::ensure_fresh_bins();
    let (mut a, mut b) = two_orgs().await;
    assert!(b.terminate().unwrap(), "globex stops: nobody answers");
    start(&a, "t-4", 30, 0).await;
    let preparing = wait_phase(&a, "t-4", "PREPARING").await;
    assert_eq!(account(&preparing, "src").reserved, 30);
    a.kill9();
    a.spawn().await.unwrap();
    // Rebuilt from the ledger: still PREPARING, the reservation still held.
    let rebuilt = wait_phase(&a, "t-4", "PREPARING").await;
    assert_eq!(account(&rebuilt, "src").reserved, 30);
    tick(
        &a,
        "after-restart",
        preparing.started_at_unix_ms + TIMEOUT_MS + 1_000,
    )
    .await;
    let at_a = wait_phase(&a, "t-4", "ABORTED").await;
    let src = account(&at_a, "src");
    assert_eq!(
        (src.balance, src.reserved, src.pending.clone()),
        (100, 0, vec![]),
        "{src:?}"
    );
    b.spawn().await.unwrap();
    wait_phase(&b, "t-4", "ABORTED").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_with_its_field_and_strangers_see_nothing() {
    accord_tests::ensure_fresh_bins();
    let a = TestNode::builder("acme")
        .party("alice")
        .config(config)
        .start()
        .await
        .unwrap();
    let mut c = client(&a).await;
    let bad = env::StartRequest {
        envelope: "x".into(),
        envelope_type: "no_such_type".into(),
        participants: vec![],
    };
    let e = c
        .start(with_token(bad, &a.party_token("alice")))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        e.metadata()
            .get("accord-field")
            .and_then(|v| v.to_str().ok()),
        Some("envelope_type")
    );
    let bad = env::StartRequest {
        envelope: "x".into(),
        envelope_type: "budget_transfer".into(),
        participants: vec![env::EnvelopeParticipant {
            participant: "acme".into(),
            changes: vec![env::EnvelopeChange {
                kind: 0,
                account: "src".into(),
                amount: 1,
                ..Default::default()
            }],
        }],
    };
    let e = c
        .start(with_token(bad, &a.party_token("alice")))
        .await
        .unwrap_err();
    assert_eq!(
        e.metadata()
            .get("accord-field")
            .and_then(|v| v.to_str().ok()),
        Some("participants[0].changes[0].kind")
    );
    let e = c
        .get(with_token(
            env::GetRequest {
                envelope: "nope".into(),
            },
            &a.admin_token(),
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    // Ticks are the operator's.
    let e = c
        .submit_tick(with_token(
            env::SubmitTickRequest {
                tick_id: "t".into(),
                instant_time: 1,
            },
            &a.party_token("alice"),
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
}

/// The wire name of an envelope record's step, or `tick`.
fn step_of(r: &rec::Record) -> &'static str {
    use env::envelope_record::Step as S;
    match &r.operation {
        Some(Operation::Envelope(e)) => match &e.step {
            Some(S::Start(_)) => "envelope_start",
            Some(S::Prepare(_)) => "envelope_prepare",
            Some(S::Vote(_)) => "envelope_vote",
            Some(S::Prepared(_)) => "envelope_prepared",
            Some(S::Commit(_)) => "envelope_commit",
            Some(S::Abort(_)) => "envelope_abort",
            None => "",
        },
        Some(Operation::Tick(_)) => "tick",
        _ => "",
    }
}

/// The records of envelope `id` with step `step` that `node` authored.
async fn own_records(node: &TestNode, id: &str, step: &str) -> Vec<rec::Record> {
    ledger(node)
        .await
        .iter()
        .map(decode)
        .filter(|r| {
            r.commitment_id == id
                && step_of(r) == step
                && r.author
                    .as_ref()
                    .is_some_and(|a| a.organisation == node.name)
        })
        .collect()
}

/// The same lifecycle event delivered again: a copy of `r` under a new id (another nonce),
/// signed with the node key of its author's node and submitted there, so it is recorded, applied
/// and routed like the original.
async fn again(node: &TestNode, r: &rec::Record) {
    let mut r = r.clone();
    r.nonce = rand::random::<[u8; 8]>().to_vec().into();
    submit(node, &node_signer(node), &r).await;
}

/// A tick by `node`'s envelope service listing `id` whatever its phase (the node's own
/// scheduler lists only PREPARING envelopes).
async fn tick_listing(node: &TestNode, id: &str, instant_time: i64) {
    let mut r = record(
        &node.name,
        "envelope-service",
        &format!("tick-{instant_time}"),
        &[],
        Operation::Tick(env::Tick {
            tick_id: format!("tick-{instant_time}"),
            instant_time,
        }),
    );
    r.items = vec![id.to_string()];
    submit(node, &node_signer(node), &r).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_event_delivered_again_after_commit_changes_nothing() {
    accord_tests::ensure_fresh_bins();
    let (a, b) = two_orgs().await;
    start(&a, "t-5", 30, 0).await;
    let before_a = wait_phase(&a, "t-5", "COMMITTED").await;
    let before_b = wait_phase(&b, "t-5", "COMMITTED").await;
    // Arrows "PREPARING/COMMITTING/COMMITTED prepare duplicate", "COMMITTED prepared, commit
    // duplicate", "any ack the same answer again", "COMMITTED tick": each delivered again, at
    // the coordinator and (routed) at the participant.
    let mut sent = 0;
    for step in [
        "envelope_prepare",
        "envelope_prepared",
        "envelope_commit",
        "envelope_vote",
    ] {
        for r in own_records(&a, "t-5", step).await {
            again(&a, &r).await;
            sent += 1;
        }
    }
    for r in own_records(&b, "t-5", "envelope_vote").await {
        again(&b, &r).await;
        sent += 1;
    }
    tick_listing(&a, "t-5", before_a.started_at_unix_ms + TIMEOUT_MS + 1_000).await;
    sent += 1;
    assert_eq!(sent, 6, "prepare, prepared, commit, two votes and a tick");
    let at_a = wait_history(&a, "t-5", before_a.history.len() + sent).await;
    let at_b = wait_history(&b, "t-5", before_b.history.len() + sent).await;
    for (before, now) in [(&before_a, &at_a), (&before_b, &at_b)] {
        assert_eq!(now.phase, "COMMITTED");
        assert_eq!(
            now.accounts, before.accounts,
            "{}: nothing moved again",
            now.role
        );
        assert_eq!(now.votes, before.votes);
        // Every new line of the history leaves the envelope COMMITTED.
        assert!(
            now.history[before.history.len()..]
                .iter()
                .all(|h| h.phase == "COMMITTED")
        );
    }
    assert_eq!(account(&at_a, "src").balance, 70);
    assert_eq!(account(&at_b, "dst").balance, 80);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_abort_delivered_twice_and_late_answers_leave_the_same_state() {
    accord_tests::ensure_fresh_bins();
    let (a, b) = two_orgs().await;
    start(&a, "t-6", 30, 500).await;
    let before_a = wait_phase(&a, "t-6", "ABORTED").await;
    let before_b = wait_phase(&b, "t-6", "ABORTED").await;
    // Arrows "ABORTED abort duplicate", "ABORTED prepare duplicate", "ABORTED ack/nack (a late
    // or repeated answer)", "ABORTED tick".
    let mut sent = 0;
    for step in ["envelope_abort", "envelope_prepare", "envelope_vote"] {
        for r in own_records(&a, "t-6", step).await {
            again(&a, &r).await;
            sent += 1;
        }
    }
    let nack = own_records(&b, "t-6", "envelope_vote").await;
    assert_eq!(nack.len(), 1, "globex answered once");
    again(&b, &nack[0]).await;
    sent += 1;
    tick_listing(&a, "t-6", before_a.started_at_unix_ms + TIMEOUT_MS + 1_000).await;
    sent += 1;
    assert!(
        sent >= 4,
        "abort, prepare, globex's NACK and a tick at least"
    );
    let at_a = wait_history(&a, "t-6", before_a.history.len() + sent).await;
    let at_b = wait_history(&b, "t-6", before_b.history.len() + sent).await;
    for (before, now) in [(&before_a, &at_a), (&before_b, &at_b)] {
        assert_eq!(now.phase, "ABORTED");
        assert_eq!(now.abort_cause, before.abort_cause);
        assert_eq!(now.votes, before.votes);
        // The cleanup ran again and left the same accounts: reservation 0, no marks.
        assert_eq!(now.accounts, before.accounts, "{}: same state", now.role);
    }
    let src = account(&at_a, "src");
    assert_eq!((src.balance, src.reserved, src.pending.len()), (100, 0, 0));
    assert_eq!(account(&at_b, "dst").balance, 50);
}

/// Issue 13 item 9: `accordctl bench envelope --quick --json` runs (CI runs every bench once)
/// and its last line carries the figures BENCHMARKS.md names, as numbers. No timing asserted.
#[test]
fn the_quick_envelope_bench_prints_its_figures() {
    accord_tests::ensure_fresh_bins();
    let args = ["bench", "envelope", "--quick", "--json"];
    let (code, out, err) = accord_tests::run_bin("accordctl", &args, None).unwrap();
    assert_eq!(code, 0, "accordctl {args:?} failed:\n{err}");
    let line = out.lines().last().expect("a last line");
    let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
    for k in [
        "envelopes_committed_per_s",
        "start_to_committed_p50_ms",
        "start_to_committed_p99_ms",
        "committed_per_s",
        "federation_round_trip_ms",
        "group_commit_p50_ms",
        "design_target_ms",
    ] {
        assert!(v[k].is_number(), "{k} missing in {line}");
    }
    assert_eq!(
        v["committed"], v["envelopes"],
        "every envelope COMMITTED: {line}"
    );
}

/// alice starts a `budget_transfer` with `participants` (org, kind, account, amount).
async fn start_with(a: &TestNode, id: &str, participants: &[(&str, env::ChangeKind, &str, u64)]) {
    let req = env::StartRequest {
        envelope: id.into(),
        envelope_type: "budget_transfer".into(),
        participants: participants
            .iter()
            .map(|(org, kind, acct, n)| env::EnvelopeParticipant {
                participant: org.to_string(),
                changes: vec![change(*kind, acct, *n)],
            })
            .collect(),
    };
    client(a)
        .await
        .start(with_token(req, &a.party_token("alice")))
        .await
        .expect("start");
}

/// The reason of `node`'s own vote on envelope `id`.
async fn vote_reason(node: &TestNode, id: &str) -> String {
    let votes = own_records(node, id, "envelope_vote").await;
    match votes.first().and_then(|r| match &r.operation {
        Some(Operation::Envelope(e)) => e.step.clone(),
        _ => None,
    }) {
        Some(env::envelope_record::Step::Vote(v)) => v.reason,
        other => panic!("{}: no vote on {id}: {other:?}", node.name),
    }
}

/// Issue 27: alice (acme) moves budget out of `g1`, a commitment internal to globex (bob's
/// request of himself): globex stages nothing and votes NACK, and an unknown account and an
/// amount of 10^6 on g1 get exactly the same vote and reason, so the votes say nothing about
/// what exists at globex or its balance. Her transfer into `dst` (whose budget is hers) still
/// commits.
#[tokio::test(flavor = "multi_thread")]
async fn a_budget_moves_only_with_its_holders_consent_and_the_votes_reveal_nothing() {
    accord_tests::ensure_fresh_bins();
    let (a, b) = two_orgs().await;
    budget(&b, "bob", "g1", 100).await;
    use env::ChangeKind::{Credit, Debit};
    for (id, account, amount) in [
        ("c-g1", "g1", 30),
        ("c-unknown", "no-such-commitment", 30),
        ("c-huge", "g1", 1_000_000),
    ] {
        start_with(
            &a,
            id,
            &[
                ("acme", Credit, "src", amount),
                ("globex", Debit, account, amount),
            ],
        )
        .await;
        for n in [&a, &b] {
            let e = wait_phase(n, id, "ABORTED").await;
            assert_eq!(e.abort_cause, "NACK", "{}: {e:?}", n.name);
            assert_eq!(e.votes.get("globex").map(String::as_str), Some("NACK"));
        }
        let at_b = get(&b, id).await.unwrap();
        assert!(
            at_b.accounts.iter().all(|x| x.account != "g1"),
            "{id}: globex staged on g1: {:?}",
            at_b.accounts
        );
        assert_eq!(
            vote_reason(&b, id).await,
            "not_found: no such account or commitment here, or not one the envelope's author \
             may change",
            "{id}: one NACK for not known or not allowed"
        );
    }
    // g1's budget at globex is untouched (GetCommitment: its terms and history).
    let g1 = wait_state(&b, "g1", "requested").await;
    assert_eq!(g1.history.len(), 1, "nothing but bob's request: {g1:?}");
    // With consent the transfer commits: 30 from alice's src into alice's dst at globex.
    start(&a, "c-ok", 30, 0).await;
    let at_b = wait_phase(&b, "c-ok", "COMMITTED").await;
    let at_a = wait_phase(&a, "c-ok", "COMMITTED").await;
    assert_eq!(account(&at_a, "src").balance, 70);
    assert_eq!(account(&at_b, "dst").balance, 80);
}

/// Issue 27: a tick declared by a party (through `Declare`, signed by the node for it) is
/// refused `not_authorized` and aborts nothing; the operator's `SubmitTick` at the same
/// instant does (seed 003: the timeout is checked on the scheduler's ticks).
#[tokio::test(flavor = "multi_thread")]
async fn a_partys_tick_is_refused_and_only_the_operators_tick_times_out() {
    accord_tests::ensure_fresh_bins();
    let (a, _b) = two_orgs().await;
    // initech is no peer of acme: it never answers, so k-1 stays PREPARING until a tick.
    use env::ChangeKind::{Credit, Debit};
    start_with(
        &a,
        "k-1",
        &[("acme", Debit, "src", 30), ("initech", Credit, "x", 30)],
    )
    .await;
    let preparing = wait_phase(&a, "k-1", "PREPARING").await;
    let late = preparing.started_at_unix_ms + TIMEOUT_MS + 1_000;
    let mut t = record(
        "acme",
        "alice",
        "k-tick",
        &[],
        Operation::Tick(env::Tick {
            tick_id: "k-tick".into(),
            instant_time: late,
        }),
    );
    t.items = vec!["k-1".into()];
    let resp = work(&a)
        .await
        .declare(with_token(
            accord_proto::pb::work::v1::DeclareRequest { record: Some(t) },
            &a.party_token("alice"),
        ))
        .await
        .expect("declare")
        .into_inner();
    let outcome = resp.outcome.unwrap_or_default();
    assert!(!outcome.applied, "{outcome:?}");
    assert_eq!(outcome.rejection_code, "not_authorized", "{outcome:?}");
    let still = get(&a, "k-1").await.unwrap();
    assert_eq!(
        still.phase, "PREPARING",
        "a party's tick aborted it: {still:?}"
    );
    tick(&a, "op-tick", late).await;
    let e = wait_phase(&a, "k-1", "ABORTED").await;
    assert_eq!(e.abort_cause, "TIMEOUT");
}
