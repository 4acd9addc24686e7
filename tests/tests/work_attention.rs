//! Issue 11 items 7–8 (node half): kernel effects delivered (a per-party attention list and
//! stream; a claim's produced promise record), the commitment list ("what needs me", paginated)
//! and watch, and the Work service clock on a driven clock — each on an in-process node run with
//! `run_with_clock` on a `ManualClock`, so nothing waits for wall-clock time to pass.

use crate::federation_common;

use accord_node::clock::{Clock, ManualClock};
use accord_proto::pb::record::v1::{self as rec, Record, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_tests::{TestNode, WorkClient, field};
use federation_common::{declare, decode, id_of, ledger, party, record, signer, submit};
use std::sync::Arc;
use std::time::Duration;

/// A deadline guard for stream messages (not a timing assertion).
const WAIT: Duration = Duration::from_secs(30);
const T0: i64 = 1_900_000_000_000;

/// acme with alice, bob and carol, ticking every 20 ms of real time on a clock at `T0`.
async fn acme() -> (TestNode, Arc<ManualClock>) {
    let (clock, manual) = Clock::manual(T0);
    let n = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .party("carol")
        .config(|t, _| *t = t.replace("tick_ms = 1000", "tick_ms = 20"))
        .start_with_clock(clock)
        .await
        .unwrap();
    (n, manual)
}

fn terms() -> Option<rec::Terms> {
    Some(rec::Terms {
        title: "report".into(),
        ..Default::default()
    })
}

/// alice asks bob for `id`.
fn offered(id: &str, valid_until: i64) -> Record {
    record(
        "acme",
        "alice",
        id,
        &[],
        Operation::Request(rec::Request {
            candidate: Some(party("acme", "bob")),
            terms: terms(),
            valid_until_unix_ms: valid_until,
            ..Default::default()
        }),
    )
}

/// alice puts `id` in her queue "desk", which bob may claim from.
fn pooled(id: &str) -> Record {
    record(
        "acme",
        "alice",
        id,
        &[],
        Operation::Request(rec::Request {
            queue: Some(rec::Queue {
                name: "desk".into(),
                owner: Some(party("acme", "alice")),
                candidates: vec![party("acme", "bob")],
                ..Default::default()
            }),
            terms: terms(),
            ..Default::default()
        }),
    )
}

fn op(name: &str, id: &str, basis: &[[u8; 32]], o: Operation) -> Record {
    record("acme", name, id, basis, o)
}

fn notice(text: &str) -> Operation {
    Operation::Notice(rec::Notice {
        notice_type: rec::NoticeType::AtRisk as i32,
        text: text.into(),
    })
}

async fn list(
    c: &mut WorkClient,
    req: work::ListCommitmentsRequest,
) -> work::ListCommitmentsResponse {
    c.list_commitments(req).await.expect("list").into_inner()
}

fn ids(r: &work::ListCommitmentsResponse) -> Vec<&str> {
    r.commitments
        .iter()
        .map(|c| c.commitment_id.as_str())
        .collect()
}

async fn next<T>(s: &mut tonic::Streaming<T>) -> T {
    tokio::time::timeout(WAIT, s.message())
        .await
        .expect("a message within the deadline")
        .expect("stream ok")
        .expect("stream open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offer_expires_when_the_driven_clock_passes_its_validity_and_the_watch_sees_it() {
    let (mut n, clock) = acme().await;
    declare(&n, "alice", offered("c-exp", T0 + 10_000)).await;
    let mut alice = n.work_party("alice").await.unwrap();
    let mut watch = alice
        .watch_commitments(work::WatchCommitmentsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let first = next(&mut watch).await;
    assert_eq!(
        (
            first.commitment_id.as_str(),
            first.state.as_str(),
            first.change.as_str()
        ),
        ("c-exp", "requested", "initial")
    );

    // The Work service ticks on, but its clock stands still: nothing is due. Moving the clock
    // past the validity statement makes the expire due on the next tick.
    clock.advance(10_000);
    let changed = next(&mut watch).await;
    assert_eq!(changed.commitment_id, "c-exp");
    assert_eq!(changed.change, "changed");
    assert_eq!(changed.state, "expired");
    assert_eq!(changed.category, "closed");

    // The watch may report the change before the ledger listing includes the record that made
    // it (the listing follows the published watermark); wait for the expire to be listed.
    let entries = accord_tests::eventually(WAIT, || async {
        let e = ledger(&n).await;
        e.last()
            .is_some_and(|l| matches!(decode(l).operation, Some(Operation::Expire(_))))
            .then_some(e)
    })
    .await
    .expect("the expire is listed in the ledger");
    let last = decode(entries.last().unwrap());
    assert_eq!(last.author.unwrap().name, "work-service");
    assert!(matches!(last.operation, Some(Operation::Expire(_))));
    assert_eq!(last.basis.len(), 1, "the expire rests on the request");
    assert_eq!(entries.last().unwrap().recorded_at_unix_ms, T0 + 10_000);
    // An open watch does not hold up the node's shutdown.
    n.stop_inproc().await.unwrap();
    drop(watch);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_commitments_filters_what_needs_a_party_and_pages() {
    let (mut n, _clock) = acme().await;
    declare(&n, "alice", offered("c-1", 0)).await;
    declare(&n, "alice", offered("c-2", 0)).await;
    declare(&n, "alice", pooled("c-3")).await;
    // bob promises and states c-1: alice's acceptance is awaited.
    declare(
        &n,
        "bob",
        op("bob", "c-1", &[], Operation::Promise(rec::Promise {})),
    )
    .await;
    declare(
        &n,
        "bob",
        op(
            "bob",
            "c-1",
            &[],
            Operation::State(rec::State {
                fulfillment_refs: vec!["doc-1".into()],
            }),
        ),
    )
    .await;

    let mut bob = n.work_party("bob").await.unwrap();
    let needs_bob = list(
        &mut bob,
        work::ListCommitmentsRequest {
            needs: Some(party("acme", "bob")),
            ..Default::default()
        },
    )
    .await;
    // c-2 is offered to bob; c-3 sits in a queue bob may claim from (the request row of "Whose
    // move it is" names the candidates and the queue owner). Both are in the request phase:
    // triage, offered or pooled (ARCHITECTURE.md, "Seed 000's summary category").
    assert_eq!(ids(&needs_bob), ["c-2", "c-3"], "{needs_bob:?}");
    assert_eq!(needs_bob.commitments[0].needs, ["triage"]);
    assert_eq!(needs_bob.commitments[1].needs, ["triage"]);

    let mut alice = n.work_party("alice").await.unwrap();
    let needs_alice = list(
        &mut alice,
        work::ListCommitmentsRequest {
            needs: Some(party("acme", "alice")),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(ids(&needs_alice), ["c-1", "c-3"], "{needs_alice:?}");
    assert_eq!(needs_alice.commitments[0].needs, ["awaiting_acceptance"]);
    assert_eq!(needs_alice.commitments[1].needs, ["triage"]);
    assert_eq!(needs_alice.commitments[1].category, "triage");

    let triage = list(
        &mut alice,
        work::ListCommitmentsRequest {
            category: "triage".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(ids(&triage), ["c-2", "c-3"]);

    // The operator pages through everything, one at a time, in id order.
    let mut op_client = n.work().await.unwrap();
    let mut seen = Vec::new();
    let mut token = String::new();
    for _ in 0..10 {
        let page = list(
            &mut op_client,
            work::ListCommitmentsRequest {
                page_size: 1,
                page_token: token.clone(),
                ..Default::default()
            },
        )
        .await;
        seen.extend(ids(&page).into_iter().map(str::to_string));
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen, ["c-1", "c-2", "c-3"]);

    // carol has a role on nothing: she sees nothing, and may not ask what needs alice.
    let mut carol = n.work_party("carol").await.unwrap();
    let hers = list(&mut carol, work::ListCommitmentsRequest::default()).await;
    assert!(hers.commitments.is_empty(), "{hers:?}");
    let denied = carol
        .list_commitments(work::ListCommitmentsRequest {
            needs: Some(party("acme", "alice")),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);
    let bad = alice
        .list_commitments(work::ListCommitmentsRequest {
            flag: "urgent".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert_eq!(field(&bad), "flag");
    let bad = alice
        .list_commitments(work::ListCommitmentsRequest {
            page_token: "zz".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(field(&bad), "page_token");

    // The same through accordctl, with bob's token: a table, and JSON for scripts.
    let conn = vec![
        "--node".to_string(),
        format!("https://{}", n.addr),
        "--ca".into(),
        n.dir.join("tls/ca.pem").display().to_string(),
        "--token-file".into(),
        n.dir.join("parties/bob.token").display().to_string(),
    ];
    let (code, out, err) = accordctl(
        &["work", "list", "--needs", "acme/bob", "--output", "json"],
        &conn,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    let listed: Vec<(&str, &str)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["commitment_id"].as_str().unwrap(),
                c["needs"][0].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed, [("c-2", "triage"), ("c-3", "triage")]);
    let (code, out, err) = accordctl(&["work", "list", "--needs", "acme/bob"], &conn).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("COMMITMENT"), "{out}");
    assert!(out.contains("c-3") && out.contains("triage"), "{out}");
    let (code, out, err) = accordctl(&["work", "show", "c-1", "--output", "json"], &conn).await;
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(v["state"], "stated");
    assert_eq!(v["category"], "awaiting_acceptance");
    assert_eq!(v["next_move"][0], "acme/alice");
    let (code, out, err) = accordctl(
        &["work", "watch", "--count", "2", "--output", "json"],
        &conn,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let changes: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON document per line"))
        .collect();
    assert_eq!(changes.len(), 2);
    assert!(changes.iter().all(|c| c["change"] == "initial"));
    // A party asking what needs someone else is told why it may not.
    let (code, _, err) = accordctl(&["work", "list", "--needs", "acme/alice"], &conn).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("permission") || err.contains("PermissionDenied"),
        "{err}"
    );
    n.stop_inproc().await.unwrap();
}

/// Runs accordctl (off the runtime's workers: the node under test serves on them).
async fn accordctl(args: &[&str], conn: &[String]) -> (i32, String, String) {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend(conn.iter().cloned());
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        accord_tests::run_bin("accordctl", &refs, None).expect("accordctl runs")
    })
    .await
    .unwrap()
}

/// Every applied promise record, with its author's name.
fn promises(entries: &[work::LedgerEntry]) -> Vec<(String, Record)> {
    entries
        .iter()
        .filter(|e| e.outcome.as_ref().is_some_and(|o| o.applied))
        .map(decode)
        .filter(|r| matches!(r.operation, Some(Operation::Promise(_))))
        .map(|r| (r.author.clone().unwrap_or_default().name, r))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_reach_only_their_party_stream_and_survive_a_restart_and_a_claim_produces_its_promise()
 {
    let (mut n, _clock) = acme().await;
    declare(&n, "alice", pooled("c-q")).await;
    let bob_key = signer(&n, "bob");
    let claim = op("bob", "c-q", &[], Operation::Claim(rec::Claim {}));
    let claim_id = id_of(&accord_proto::signing::sign_record(&bob_key, &claim));
    submit(&n, &bob_key, &claim).await;

    // The claim produced a promise (seed 000, "Assignment": claim — "a promise record is
    // produced"): written by the claimant, the candidate obligor the Operations table names for
    // `promise`, resting on the claim — not by the Work service party, whose records the seed
    // lists (expire, implicit accept, resume, unclaim).
    let (author, promise) = accord_tests::eventually(WAIT, || async {
        promises(&ledger(&n).await).into_iter().next()
    })
    .await
    .expect("the produced promise record is written");
    assert_eq!(author, "bob");
    assert_eq!(promise.commitment_id, "c-q");
    assert_eq!(promise.basis, vec![claim_id.to_vec()]);

    let mut alice = n.work_party("alice").await.unwrap();
    let mut watch = alice
        .watch_attention(work::WatchAttentionRequest::default())
        .await
        .unwrap()
        .into_inner();
    declare(&n, "bob", op("bob", "c-q", &[], notice("late"))).await;
    let first = work::AttentionItem::from(next(&mut watch).await);
    assert_eq!(first.commitment_id, "c-q");
    assert_eq!(first.about, "notice");
    assert_eq!(first.detail, "at_risk: late");
    assert_eq!(first.from, Some(party("acme", "bob")));
    assert_eq!(first.to, Some(party("acme", "alice")));
    declare(&n, "bob", op("bob", "c-q", &[], notice("later"))).await;
    let second = work::AttentionItem::from(next(&mut watch).await);
    assert_eq!(second.detail, "at_risk: later");
    assert!(second.sequence > first.sequence);

    let listed = alice
        .list_attention(work::ListAttentionRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.items, vec![first.clone(), second.clone()]);
    // Paged one at a time.
    let p1 = alice
        .list_attention(work::ListAttentionRequest {
            page_size: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(p1.items, vec![first.clone()]);
    let p2 = alice
        .list_attention(work::ListAttentionRequest {
            page_size: 1,
            page_token: p1.next_page_token,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(p2.items, vec![second.clone()]);

    // The author is not notified; nobody reads another party's list; the operator names one.
    let mut bob = n.work_party("bob").await.unwrap();
    let bobs = bob
        .list_attention(work::ListAttentionRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(bobs.items.is_empty(), "{bobs:?}");
    let denied = bob
        .list_attention(work::ListAttentionRequest {
            party: Some(party("acme", "alice")),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);
    let mut operator = n.work().await.unwrap();
    let unnamed = operator
        .list_attention(work::ListAttentionRequest::default())
        .await
        .unwrap_err();
    assert_eq!(unnamed.code(), tonic::Code::InvalidArgument);
    assert_eq!(field(&unnamed), "party");

    // After a restart the lists are derived again from the records, and the promise the claim
    // produced is not written a second time.
    drop(watch);
    n.stop_inproc().await.unwrap();
    let (clock, _) = Clock::manual(T0 + 1);
    n.spawn_with_clock(clock).await.unwrap();
    let mut operator = n.work().await.unwrap();
    let again = operator
        .list_attention(work::ListAttentionRequest {
            party: Some(party("acme", "alice")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.items, vec![first, second]);
    declare(&n, "bob", op("bob", "c-q", &[], notice("still"))).await;
    assert_eq!(promises(&ledger(&n).await).len(), 1);
    n.stop_inproc().await.unwrap();
}
