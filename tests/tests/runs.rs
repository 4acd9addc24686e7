//! Issue 12 on the node (seed 002): runs over gRPC (`accord.run.v1.RunService`). Every one of
//! the fourteen states and every declared transition of ARCHITECTURE.md's table is exercised,
//! and every undeclared move is refused with the run unchanged; approval moves need context;
//! receipts show missing evidence, link (or say they lack) the approving decision, link a
//! recovery run to its parent, and verify offline with `accordctl run verify-receipt` — and
//! fail with one reference altered; a run at globex executing acme's commitment is reported,
//! with a verifying receipt, by acme's node.

use crate::federation_common;
use crate::runs_common;

use accord_proto::pb::record::v1 as rec;
use accord_proto::pb::run::v1 as pb;
use accord_tests::{TestNode, run_bin};
use prost::Message;
use runs_common::*;
use std::collections::{BTreeMap, VecDeque};

/// The table from ARCHITECTURE.md, "Runs: the transition table".
fn table() -> BTreeMap<&'static str, Vec<&'static str>> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../ARCHITECTURE.md"))
        .unwrap();
    let section = text.split("## Runs: the transition table").nth(1).unwrap();
    let mut t = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let from = STATES
            .iter()
            .find(|s| cells[1] == format!("`{s}`"))
            .unwrap();
        let to: Vec<&str> = STATES
            .iter()
            .copied()
            .filter(|s| cells[2].split(", ").any(|c| c == format!("`{s}`")))
            .collect();
        t.insert(*from, to);
    }
    assert_eq!(t.len(), 14, "the table lists all fourteen states");
    t
}

/// A shortest path of declared moves from pending to `to`.
fn path(t: &BTreeMap<&'static str, Vec<&'static str>>, to: &str) -> Vec<&'static str> {
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut q = VecDeque::from(["pending"]);
    while let Some(s) = q.pop_front() {
        for n in &t[s] {
            if *n != "pending" && !prev.contains_key(n) {
                prev.insert(n, s);
                q.push_back(n);
            }
        }
    }
    let mut p = vec![];
    let mut cur = STATES.iter().copied().find(|s| *s == to).unwrap();
    while cur != "pending" {
        p.push(cur);
        cur = prev[cur];
    }
    p.reverse();
    p
}

async fn drive(c: &mut Client, t: &BTreeMap<&'static str, Vec<&'static str>>, run: &str, to: &str) {
    assert!(applied(&start(c, run, "", "").await));
    for s in path(t, to) {
        let r = go(c, run, s, ctx()).await;
        assert!(applied(&r), "{run}: into {s}: {r:?}");
    }
    assert_eq!(get(c, run).await.state, num(to), "{run} reached {to}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_state_and_every_declared_transition() {
    let n = node().await;
    let mut c = client(&n, &n.party_token("alice")).await;
    let t = table();
    let mut n_runs = 0;
    for from in STATES {
        // Undeclared moves out of `from` are refused and change nothing.
        n_runs += 1;
        let run = format!("r{n_runs}");
        drive(&mut c, &t, &run, from).await;
        let before = get(&mut c, &run).await;
        for to in STATES.iter().filter(|s| !t[from].contains(s)) {
            let r = go(&mut c, &run, to, ctx()).await;
            let want = if t[from].is_empty() {
                "terminal_state"
            } else {
                "invalid_state"
            };
            assert_eq!(code(&r), want, "{from} -> {to}");
        }
        assert_eq!(
            get(&mut c, &run).await,
            before,
            "refused moves change nothing"
        );
        // Every declared move out of `from`, each on its own run.
        for to in &t[from] {
            n_runs += 1;
            let run = format!("r{n_runs}");
            drive(&mut c, &t, &run, from).await;
            let r = go(&mut c, &run, to, ctx()).await;
            assert!(applied(&r), "{from} -> {to}: {r:?}");
            let g = get(&mut c, &run).await;
            assert_eq!(g.state, num(to));
            let last = g.transitions.last().unwrap();
            assert_eq!((last.prior, last.next), (num(from), num(to)));
            assert_eq!(last.record_id, r.record_id);
            assert_eq!(last.context.as_ref().unwrap().metadata["ticket"], "T-1");
            assert_eq!(
                g.terminal,
                ["completed", "failed", "rejected", "canceled", "expired"].contains(to)
            );
        }
    }
    // All 14 states were reached and every declared arrow taken.
    assert!(n_runs > 14 + 50);
}

#[tokio::test(flavor = "multi_thread")]
async fn approval_needs_context_terminal_refuses_and_visibility() {
    let n = node().await;
    let mut c = client(&n, &n.party_token("alice")).await;
    assert!(applied(&start(&mut c, "a1", "", "").await));
    assert!(applied(&go(&mut c, "a1", "running", None).await));
    let r = go(&mut c, "a1", "awaiting_approval", None).await;
    assert_eq!(code(&r), "missing_approval_context");
    assert_eq!(get(&mut c, "a1").await.state, num("running"));
    let p = c
        .add_proposal(pb::AddProposalRequest {
            proposal: Some(rec::RunProposal {
                run: "a1".into(),
                summary: "send the invoices".into(),
                action: Default::default(),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let with = Some(rec::RunTransitionContext {
        proposal: p.record_id.clone(),
        ..Default::default()
    });
    assert!(applied(
        &go(&mut c, "a1", "awaiting_approval", with.clone()).await
    ));
    let r = go(&mut c, "a1", "partially_approved", None).await;
    assert_eq!(code(&r), "missing_approval_context");
    assert!(applied(&go(&mut c, "a1", "partially_approved", with).await));
    assert!(applied(&go(&mut c, "a1", "rejected", None).await));
    // Terminal: no move, no new action; the state stays rejected.
    assert_eq!(
        code(&go(&mut c, "a1", "running", None).await),
        "terminal_state"
    );
    let act = c
        .add_action(pb::AddActionRequest {
            action: Some(rec::RunAction {
                run: "a1".into(),
                tool: "mailer".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&act), "terminal_state");
    assert_eq!(get(&mut c, "a1").await.state, num("rejected"));

    // bob is not on the run and has no role on a commitment it executes: NOT_FOUND, as an
    // unknown run; the operator reads it.
    let mut bob = client(&n, &n.party_token("bob")).await;
    let e = bob
        .get_run(pb::GetRunRequest { run: "a1".into() })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    let e2 = bob
        .get_run(pb::GetRunRequest { run: "nope".into() })
        .await
        .unwrap_err();
    assert_eq!(e2.code(), tonic::Code::NotFound);
    assert_eq!(
        e.message().replace("a1", "x"),
        e2.message().replace("nope", "x")
    );
    let mut op = client(&n, &n.admin_token()).await;
    assert_eq!(get(&mut op, "a1").await.state, num("rejected"));
    // Bad input: a missing body and a bad state number are InvalidArgument, nothing recorded.
    let e = c
        .transition(pb::TransitionRequest { transition: None })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let e = c
        .transition(pb::TransitionRequest {
            transition: Some(rec::RunTransition {
                run: "a1".into(),
                to: 99,
                context: None,
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert_eq!(get(&mut op, "a1").await.transitions.len(), 4);
}

async fn action(c: &mut Client, run: &str, tool: &str, gated: bool, proposal: &[u8]) -> Vec<u8> {
    let r = c
        .add_action(pb::AddActionRequest {
            action: Some(rec::RunAction {
                run: run.into(),
                tool: tool.into(),
                side_effect: true,
                approval_gated: gated,
                proposal: proposal.to_vec().into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(applied(&r), "{r:?}");
    r.record_id.to_vec()
}

async fn run_receipt(c: &mut Client, run: &str) -> pb::RunReceipt {
    c.get_receipt(pb::GetReceiptRequest { run: run.into() })
        .await
        .unwrap()
        .into_inner()
}

fn verify(node: &TestNode, r: &pb::RunReceipt, name: &str) -> (i32, String, String) {
    let path = std::env::temp_dir().join(format!("accord-receipt-{}-{name}", std::process::id()));
    std::fs::write(&path, r.encode_to_vec()).unwrap();
    let out = run_bin(
        "accordctl",
        &[
            "run",
            "verify-receipt",
            &path.display().to_string(),
            "--node-vkey",
            node.vkey().trim(),
        ],
        None,
    )
    .unwrap();
    let _ = std::fs::remove_file(&path);
    out
}

/// Issue 29, item 2: every byte of the encoded receipt, flipped (each bit pattern 0x01 and
/// 0xff): an encoding that decodes to a receipt showing anything different is refused by the
/// verifier (`accord_proto::run_receipt::verify`, the function `verify-receipt` runs). One that
/// does not decode, or decodes to the same receipt (an unknown field), shows nothing changed.
fn every_altered_byte_is_refused(n: &TestNode, r: &pb::RunReceipt) {
    use accord_proto::note::Verifier;
    let keys = [Verifier::from_vkey(n.vkey().trim()).unwrap()];
    accord_proto::run_receipt::verify(r, &keys, &[], 0).expect("the receipt verifies");
    let bytes = r.encode_to_vec();
    let (mut changed, mut tried) = (0, 0);
    for i in 0..bytes.len() {
        for mask in [0x01u8, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= mask;
            tried += 1;
            let Ok(altered) = pb::RunReceipt::decode(b.as_slice()) else {
                continue;
            };
            if altered == *r {
                continue;
            }
            changed += 1;
            assert!(
                accord_proto::run_receipt::verify(&altered, &keys, &[], 0).is_err(),
                "byte {i} ^ {mask:#04x} changes what the receipt shows and still verifies"
            );
        }
    }
    // Most flips decode to a changed receipt: the loop checked the verifier, not the decoder.
    assert!(
        changed * 2 > tried,
        "{changed} of {tried} flips changed the receipt"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn receipts_show_missing_link_decisions_and_verify_offline() {
    use federation_common::{declare, party, record, request};
    let n = node().await;
    let mut c = client(&n, &n.party_token("alice")).await;

    // An approval-gated side effect with an approving decision: the receipt links it. The run
    // executes a commitment bob asked alice for, so bob, its obligee, may decide on alice's
    // proposal (issue 27: a decision comes from a role on the executed commitment, not from
    // being a party of the organisation).
    declare(
        &n,
        "bob",
        request("acme", "bob", "deal-g1", party("acme", "alice")),
    )
    .await;
    declare(
        &n,
        "alice",
        record(
            "acme",
            "alice",
            "deal-g1",
            &[],
            rec::record::Operation::Promise(rec::Promise {}),
        ),
    )
    .await;
    assert!(applied(&start(&mut c, "g1", "deal-g1", "").await));
    assert!(applied(&go(&mut c, "g1", "running", None).await));
    let p = c
        .add_proposal(pb::AddProposalRequest {
            proposal: Some(rec::RunProposal {
                run: "g1".into(),
                summary: "pay the supplier".into(),
                action: Default::default(),
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .record_id
        .to_vec();
    let mut bob = client(&n, &n.party_token("bob")).await;
    let d = bob
        .add_decision(pb::AddDecisionRequest {
            decision: Some(rec::RunDecision {
                run: "g1".into(),
                proposal: p.clone().into(),
                verdict: rec::RunVerdict::Approve as i32,
                reason: "ok".into(),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(applied(&d));
    let a = action(&mut c, "g1", "payments", true, &p).await;
    let out = c
        .add_output(pb::AddOutputRequest {
            output: Some(rec::RunOutput {
                run: "g1".into(),
                action: a.clone().into(),
                artifact: Some(rec::RunArtifact {
                    digest: vec![7; 32].into(),
                    size: 10,
                }),
                summary: "paid".into(),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(applied(&out));
    assert!(applied(&go(&mut c, "g1", "completed", None).await));
    let r = run_receipt(&mut c, "g1").await;
    assert_eq!(r.state, num("completed"));
    assert!(r.terminal && r.output_present && r.ended_at_unix_ms > 0);
    assert_eq!(r.gated_actions.len(), 1);
    assert_eq!(r.gated_actions[0].action.to_vec(), a);
    assert_eq!(r.gated_actions[0].approvals, vec![d.record_id.clone()]);
    // No evidence was recorded: the receipt shows none, never a made-up one.
    assert!(r.evidence.is_empty());
    assert_eq!(r.records.len(), 1 + 2 + 1 + 1 + 1 + 1);
    // Offline: valid; one reference altered: invalid.
    let (code, stdout, stderr) = verify(&n, &r, "g1");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("valid"), "{stdout}");
    let mut bad = r.clone();
    bad.decisions[0] = vec![9; 32].into();
    bad.gated_actions[0].approvals[0] = vec![9; 32].into();
    let (code, _, stderr) = verify(&n, &bad, "g1-bad");
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("invalid"), "{stderr}");
    let mut bad = r.clone();
    bad.state = num("failed");
    assert_eq!(verify(&n, &bad, "g1-bad-state").0, 1);
    let mut bad = r.clone();
    bad.gated_actions[0].approvals.clear();
    assert_eq!(verify(&n, &bad, "g1-bad-gate").0, 1);
    // The fields no record proves are bound by the node's signature: a changed end time, child
    // run count or node name is refused.
    for (what, bad) in [
        ("ended_at", {
            let mut b = r.clone();
            b.ended_at_unix_ms += 1;
            b
        }),
        ("child_runs", {
            let mut b = r.clone();
            b.child_runs += 1;
            b
        }),
        ("node", {
            let mut b = r.clone();
            b.node = "globex".into();
            b
        }),
    ] {
        let (code, _, stderr) = verify(&n, &bad, &format!("g1-{what}"));
        assert_eq!(code, 1, "{what} altered: {stderr}");
    }
    every_altered_byte_is_refused(&n, &r);
    // accord-proto's own test replays the same check on a saved receipt
    // (proto/tests/vectors/run-receipt/); `ACCORD_SAVE_RUN_RECEIPT=DIR` writes a new one.
    if let Some(dir) = std::env::var_os("ACCORD_SAVE_RUN_RECEIPT") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::write(dir.join("receipt.bin"), r.encode_to_vec()).unwrap();
        std::fs::write(dir.join("node.vkey"), n.vkey().trim()).unwrap();
    }
    // Another node's key does not verify it.
    let other = TestNode::builder("globex").start().await.unwrap();
    assert_eq!(verify(&other, &r, "g1-other").0, 1);

    // A gated side effect with no decision: the receipt says it has none; CLI shows it.
    assert!(applied(&start(&mut c, "g2", "", "").await));
    assert!(applied(&go(&mut c, "g2", "running", None).await));
    let a2 = action(&mut c, "g2", "deploy", true, &[]).await;
    assert!(applied(&go(&mut c, "g2", "completed", None).await));
    let r2 = run_receipt(&mut c, "g2").await;
    assert_eq!(r2.gated_actions.len(), 1);
    assert_eq!(r2.gated_actions[0].action.to_vec(), a2);
    assert!(r2.gated_actions[0].approvals.is_empty());
    assert!(r2.decisions.is_empty() && r2.evidence.is_empty() && !r2.output_present);
    assert_eq!(verify(&n, &r2, "g2").0, 0);
    let args = |json: bool| {
        let mut v = vec![
            "run".to_string(),
            "receipt".into(),
            "g2".into(),
            "--node".into(),
            format!("https://{}", n.addr),
            "--ca".into(),
            n.dir.join("tls/ca.pem").display().to_string(),
            "--token-file".into(),
            n.dir.join("parties/alice.token").display().to_string(),
        ];
        if json {
            v.insert(0, "json".into());
            v.insert(0, "--output".into());
        }
        v
    };
    let a: Vec<String> = args(false);
    let (code, table, err) = run_bin(
        "accordctl",
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
    )
    .unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(table.contains("no approving decision"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("evidence") && l.contains("missing")),
        "{table}"
    );
    let a: Vec<String> = args(true);
    let (code, json, err) = run_bin(
        "accordctl",
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
    )
    .unwrap();
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(j["state"], "completed");
    assert_eq!(j["evidence"], serde_json::json!([]));
    assert_eq!(j["gated_actions"][0]["approved"], false);
    assert_eq!(j["trigger"], "schedule:nightly");
    assert_eq!(j["parent"], serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread")]
async fn recovery_run_linked_to_parent_with_prior_work() {
    let n = node().await;
    let mut c = client(&n, &n.party_token("alice")).await;
    assert!(applied(&start(&mut c, "first", "", "").await));
    assert!(applied(&go(&mut c, "first", "running", None).await));
    let a = action(&mut c, "first", "charge-card", false, &[]).await;
    assert!(applied(&go(&mut c, "first", "paused", None).await));
    assert!(applied(&go(&mut c, "first", "recovering", None).await));
    assert!(applied(&go(&mut c, "first", "failed", None).await));
    // A failed run is not reopened.
    assert_eq!(
        code(&go(&mut c, "first", "running", None).await),
        "terminal_state"
    );
    let w = c
        .get_prior_work(pb::GetPriorWorkRequest {
            run: "first".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(w.actions, vec![prost::bytes::Bytes::from(a.clone())]);
    assert_eq!(w.side_effects, w.actions);
    assert_eq!(w.not_idempotent, w.actions);
    assert!(w.needs_confirmation);
    assert_eq!(w.state, num("failed"));
    // The recovery run needs the replay confirmed.
    assert_eq!(
        code(&start(&mut c, "second", "", "first").await),
        "replay_not_confirmed"
    );
    let r = c
        .create_run(pb::CreateRunRequest {
            commitment_id: String::new(),
            start: Some(rec::RunStart {
                run: "second".into(),
                parent: "first".into(),
                replay_confirmed: true,
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(applied(&r));
    assert_eq!(get(&mut c, "second").await.parent, "first");
    let child = run_receipt(&mut c, "second").await;
    assert_eq!(child.parent, "first");
    assert!(
        child.trigger.is_empty() && child.initiator.is_empty() && child.persistence_mode.is_empty()
    );
    assert_eq!(run_receipt(&mut c, "first").await.child_runs, 1);
    assert_eq!(
        code(&start(&mut c, "third", "", "nope").await),
        "unknown_run"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_at_globex_executing_acme_commitment_is_seen_at_acme() {
    use federation_common::*;
    // bob executes the commitment once he promised it: a run for a commitment is its obligor's
    // (issue 27; a candidate obligor that had not promised used to start one).
    let c = "deal-r";
    let (a, b) = promised_between(&["alice"], c).await;
    let mut bob = client(&b, &b.party_token("bob")).await;
    assert!(applied(&start(&mut bob, "exec-1", c, "").await));
    assert!(applied(&go(&mut bob, "exec-1", "running", None).await));
    assert!(applied(&go(&mut bob, "exec-1", "completed", None).await));
    // acme's node reports the run's state, to alice (obligee of the commitment) too.
    let mut alice = client(&a, &a.party_token("alice")).await;
    let seen = accord_tests::eventually(WAIT, || {
        let mut alice = alice.clone();
        async move {
            // NOT_FOUND until the run reaches acme; any other refusal fails the wait at once.
            let g = accord_tests::not_yet(
                alice
                    .get_run(pb::GetRunRequest {
                        run: "exec-1".into(),
                    })
                    .await,
                &[tonic::Code::NotFound],
            )?;
            Ok::<_, tonic::Status>(g.filter(|g| g.state == num("completed")))
        }
    })
    .await
    .expect("acme sees the run completed");
    assert_eq!(seen.organisation, "globex");
    assert_eq!(seen.commitment_id, c);
    assert_eq!(seen.transitions.len(), 2);
    let r = run_receipt(&mut alice, "exec-1").await;
    assert_eq!(r.node, "acme");
    assert_eq!(r.state, num("completed"));
    assert_eq!(verify(&a, &r, "fed").0, 0);
    assert_eq!(verify(&b, &r, "fed-wrong-key").0, 1);
}
