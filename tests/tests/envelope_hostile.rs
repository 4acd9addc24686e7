//! Issue 27, "a hostile peer starts an envelope with a garbage record on acme's a3, sends prepare
//! and goes silent": a participant's NACK holds nothing, whatever the coordinator does next.
//!
//! acme (alice, carol) and initech (mallory) are peers; initech's node is stopped before it ever
//! sends anything, and the test speaks for it with its node key and TLS identity (a log of its
//! own, [`FixtureLog`](crate::federation_common::FixtureLog)): an `obligation_delegate` start
//! naming acme, then its prepare — and then nothing, ever (no abort, no tick). acme validates the
//! staged record, votes NACK with its reason, and lists no hold: carol's records on the
//! commitments go on applying, with the envelope still PREPARING at acme.

use crate::federation_common;

use accord_proto::pb::envelope::v1::{self as env, envelope_record::Step};
use accord_proto::pb::record::v1::{self as rec, SignedRecord, record::Operation};
use accord_proto::signing;
use accord_tests::TestNode;
use accord_tests::envelopes::{EXTERNAL_TICKS, get, holds, wait_vote};
use federation_common::*;
use prost::Message;

fn config(text: &mut String, p: &std::path::Path) {
    fast(text, p);
    text.push_str(EXTERNAL_TICKS);
}

async fn node(name: &str, parties: &[&str]) -> TestNode {
    let mut b = TestNode::builder(name).config(config);
    for p in parties {
        b = b.party(p);
    }
    b.start().await.unwrap()
}

fn lifecycle(envelope: &str, event: &str, basis: &[[u8; 32]], step: Step) -> rec::Record {
    record(
        "initech",
        "envelope-service",
        envelope,
        basis,
        Operation::Envelope(env::EnvelopeRecord {
            envelope: envelope.into(),
            event: event.into(),
            step: Some(step),
        }),
    )
}

/// mallory's start of `id` naming acme with `staged` as acme's change, and initech's prepare of
/// it, both signed by initech's node key (as a node signs its parties' and its own records).
fn start_and_prepare(peer: &AsPeer, id: &str, staged: &SignedRecord) -> Vec<SignedRecord> {
    let start = record(
        "initech",
        "mallory",
        id,
        &[],
        Operation::Envelope(env::EnvelopeRecord {
            envelope: id.into(),
            event: String::new(),
            step: Some(Step::Start(env::EnvelopeStart {
                envelope_type: "obligation_delegate".into(),
                participants: vec![env::EnvelopeParticipant {
                    participant: "acme".into(),
                    changes: vec![env::EnvelopeChange {
                        kind: env::ChangeKind::Record as i32,
                        signed_record: staged.encode_to_vec().into(),
                        ..Default::default()
                    }],
                }],
            })),
        }),
    );
    let start = signing::sign_record(&peer.key, &start);
    let prepare = lifecycle(
        id,
        "DELEGATE_PREPARED",
        &[id_of(&start)],
        Step::Prepare(env::EnvelopePrepare {}),
    );
    vec![start, signing::sign_record(&peer.key, &prepare)]
}

/// The reason acme gave with its vote on `id`.
async fn acme_vote_reason(a: &TestNode, id: &str) -> String {
    for e in ledger(a).await {
        let r = decode(&e);
        if let Some(Operation::Envelope(x)) = &r.operation
            && x.envelope == id
            && let Some(Step::Vote(v)) = &x.step
            && v.participant == "acme"
        {
            return v.reason.clone();
        }
    }
    panic!("acme recorded no vote on {id}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_hostile_coordinators_garbage_is_nacked_and_holds_nothing() {
    accord_tests::ensure_fresh_bins();
    let a = node("acme", &["alice", "carol"]).await;
    let mut i = node("initech", &["mallory"]).await;
    accord_tests::federate(&a, &i).await.unwrap();
    let mut peer = AsPeer::new(&i, &a).await;
    // initech goes silent before it sends anything: acme never sees its real log, only the
    // test's, and nothing initech could do later (an abort, a tick) ever comes.
    assert!(i.terminate().unwrap());

    // a3: alice's request of carol with initech's mallory as its principal (so mallory may read
    // it and acme checks the staged record itself); a4: internal to acme.
    let mut a3 = request("acme", "alice", "a3", party("acme", "carol"));
    if let Some(Operation::Request(q)) = &mut a3.operation {
        q.principal = Some(party("initech", "mallory"));
    }
    declare(&a, "alice", a3).await;
    declare(
        &a,
        "alice",
        request("acme", "alice", "a4", party("acme", "carol")),
    )
    .await;

    // h-1 stages a promise of a3 "by carol" that initech signed: not carol's key nor acme's.
    let forged = signing::sign_record(
        &peer.key,
        &record(
            "acme",
            "carol",
            "a3",
            &[],
            Operation::Promise(rec::Promise {}),
        ),
    );
    // h-2 stages mallory's own record on a4, which she may not even read.
    let foreign = signing::sign_record(
        &peer.key,
        &record(
            "initech",
            "mallory",
            "a4",
            &[],
            Operation::Promise(rec::Promise {}),
        ),
    );
    for (id, staged) in [("h-1", &forged), ("h-2", &foreign)] {
        let records = start_and_prepare(&peer, id, staged);
        let receipts = peer
            .deliver(peer.envelope("acme", records, 1))
            .await
            .expect("acme answers the envelope");
        assert_eq!(
            receipts.len(),
            3,
            "{id}: the envelope's receipt and one per record"
        );
        wait_vote(&a, id, "acme", "NACK").await;
    }
    let reason = acme_vote_reason(&a, "h-1").await;
    assert!(
        reason.starts_with("bad_signature:"),
        "h-1: a staged record of acme's carol not signed by her key: {reason}"
    );
    // mallory may not read a4: the one answer for "not known or not allowed".
    assert_eq!(
        acme_vote_reason(&a, "h-2").await,
        "not_found: no such account or commitment here, or not one the envelope's author may \
         change"
    );

    // The coordinator never speaks again; acme still follows both envelopes as PREPARING, and
    // holds nothing: its NACKs held nothing, so carol's promises apply at once.
    for id in ["h-1", "h-2"] {
        let e = get(&a, id).await.expect("acme follows the envelope");
        assert_eq!(e.phase, "PREPARING", "{id}: {e:?}");
    }
    let listed = holds(&a).await;
    assert!(listed.is_empty(), "a NACK held {listed:?}");
    for c in ["a3", "a4"] {
        let promise = record("acme", "carol", c, &[], Operation::Promise(rec::Promise {}));
        assert_eq!(
            declared_code(&a, "carol", promise).await,
            "",
            "carol's promise of {c} while the hostile envelopes are open"
        );
        wait_state(&a, c, "promised").await;
    }
    // The staged records were never written: a3's and a4's only promises are carol's.
    for e in ledger(&a).await {
        let r = decode(&e);
        if matches!(r.operation, Some(Operation::Promise(_))) {
            assert_eq!(
                r.author
                    .as_ref()
                    .map(|p| (p.organisation.as_str(), p.name.as_str())),
                Some(("acme", "carol")),
                "{r:?}"
            );
            assert!(
                e.record.as_ref() != Some(&forged) && e.record.as_ref() != Some(&foreign),
                "a staged record was written: {r:?}"
            );
        }
    }
}
