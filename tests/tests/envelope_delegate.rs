//! The atomic cross-organisation delegate (issue 13 item 7b) with three organisations' real
//! nodes: acme (alice, the obligee), globex (bob, the obligor) and initech (carol, the new
//! obligor; she is the commitment's principal, so initech holds the commitment from its request
//! on — federation carries a commitment's records only to organisations with a role on it).
//! alice starts an `obligation_delegate` envelope at acme carrying bob's pre-signed
//! `delegate_offer` and carol's pre-signed `delegate_acceptance`; the commitment itself changes
//! (GetCommitment shows the new obligor at all three) or stays (at all three).

use crate::federation_common;

use accord_proto::pb::envelope::v1 as env;
use accord_proto::pb::record::v1::{self as rec, SignedRecord, record::Operation};
use accord_proto::signing;
use accord_tests::envelopes::{EXTERNAL_TICKS, client, get, holds, tick, wait_phase, wait_vote};
use accord_tests::{TestNode, with_token};
use federation_common::*;
use prost::Message;

const TIMEOUT_MS: i64 = 30_000;
const JOB: &str = "job-1";

fn config(text: &mut String, p: &std::path::Path) {
    fast(text, p);
    text.push_str(EXTERNAL_TICKS);
}

async fn node(name: &str, party: &str) -> TestNode {
    TestNode::builder(name)
        .party(party)
        .config(config)
        .start()
        .await
        .unwrap()
}

/// Three organisations, each a peer of the others; alice's request of `JOB` from bob (carol
/// its principal) promised by bob, and seen promised at all three.
async fn three_orgs() -> [TestNode; 3] {
    let a = node("acme", "alice").await;
    let b = node("globex", "bob").await;
    let c = node("initech", "carol").await;
    for (x, y) in [(&a, &b), (&a, &c), (&b, &c)] {
        accord_tests::federate(x, y).await.unwrap();
    }
    let mut r = request("acme", "alice", JOB, party("globex", "bob"));
    if let Some(Operation::Request(q)) = &mut r.operation {
        q.principal = Some(party("initech", "carol"));
    }
    declare(&a, "alice", r).await;
    wait_state(&b, JOB, "requested").await;
    let promise = record(
        "globex",
        "bob",
        JOB,
        &[],
        Operation::Promise(rec::Promise {}),
    );
    declare(&b, "bob", promise).await;
    for n in [&a, &b, &c] {
        wait_state(n, JOB, "promised").await;
    }
    [a, b, c]
}

/// bob's offer to carol and carol's acceptance naming `offer_id` (the offer's own id unless
/// given), each signed with its party's own key.
fn halves(b: &TestNode, c: &TestNode, accept: Option<[u8; 32]>) -> (SignedRecord, SignedRecord) {
    let offer = record(
        "globex",
        "bob",
        JOB,
        &[],
        Operation::Delegate(rec::Delegate {
            step: Some(rec::delegate::Step::Offer(rec::DelegateOffer {
                to: Some(party("initech", "carol")),
                handover_note: "carol takes it over".into(),
            })),
        }),
    );
    let offer = signing::sign_record(&signer(b, "bob"), &offer);
    let named = accept.unwrap_or(id_of(&offer));
    let acceptance = record(
        "initech",
        "carol",
        JOB,
        &[id_of(&offer)],
        Operation::Delegate(rec::Delegate {
            step: Some(rec::delegate::Step::Acceptance(rec::HandoverAcceptance {
                offer_id: named.to_vec().into(),
            })),
        }),
    );
    (
        offer,
        signing::sign_record(&signer(c, "carol"), &acceptance),
    )
}

fn staged(s: &SignedRecord) -> env::EnvelopeChange {
    env::EnvelopeChange {
        kind: env::ChangeKind::Record as i32,
        signed_record: s.encode_to_vec().into(),
        ..Default::default()
    }
}

/// alice starts the delegate at acme: acme holds and validates; globex writes the offer,
/// initech the acceptance.
async fn start(a: &TestNode, id: &str, offer: &SignedRecord, acceptance: &SignedRecord) {
    let req = env::StartRequest {
        envelope: id.into(),
        envelope_type: "obligation_delegate".into(),
        participants: vec![
            env::EnvelopeParticipant {
                participant: "acme".into(),
                changes: vec![],
            },
            env::EnvelopeParticipant {
                participant: "globex".into(),
                changes: vec![staged(offer)],
            },
            env::EnvelopeParticipant {
                participant: "initech".into(),
                changes: vec![staged(acceptance)],
            },
        ],
    };
    let r = client(a)
        .await
        .start(with_token(req, &a.party_token("alice")))
        .await
        .expect("start")
        .into_inner();
    assert_eq!(r.phase, "PENDING");
}

async fn obligor(node: &TestNode) -> String {
    let c = work(node)
        .await
        .get_commitment(accord_proto::pb::work::v1::GetCommitmentRequest {
            commitment_id: JOB.into(),
        })
        .await
        .expect("commitment")
        .into_inner();
    c.obligor
        .map(|p| format!("{}/{}", p.organisation, p.name))
        .unwrap_or_default()
}

/// Waits until `node`'s commitment shows `want` as its obligor.
async fn wait_obligor(node: &TestNode, want: &str) {
    if accord_tests::eventually(WAIT, || async {
        (obligor(node).await == want).then_some(())
    })
    .await
    .is_err()
    {
        panic!(
            "{}: obligor never {want}; now {}",
            node.name,
            obligor(node).await
        );
    }
}

/// bob defers `JOB` at globex; the outcome's rejection code ("" when applied). JOB's home is
/// acme: bob's record applies once acme ordered it (issue 26).
async fn bob_defers(b: &TestNode) -> String {
    declared_code(b, "bob", defer("globex", "bob", JOB)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_delegate_commits_and_all_three_organisations_show_the_new_obligor() {
    accord_tests::ensure_fresh_bins();
    let [a, b, c] = three_orgs().await;
    let (offer, acceptance) = halves(&b, &c, None);
    start(&a, "d-1", &offer, &acceptance).await;
    for n in [&a, &b, &c] {
        let e = wait_phase(n, "d-1", "COMMITTED").await;
        for org in ["acme", "globex", "initech"] {
            assert_eq!(e.votes.get(org).map(String::as_str), Some("ACK"), "{e:?}");
        }
    }
    // The commitment's own state changed, through the kernel's delegate, everywhere.
    for n in [&a, &b, &c] {
        wait_obligor(n, "initech/carol").await;
    }
    for n in [&a, &b, &c] {
        let h = work(n)
            .await
            .get_commitment(accord_proto::pb::work::v1::GetCommitmentRequest {
                commitment_id: JOB.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .history;
        for id in [id_of(&offer), id_of(&acceptance)] {
            let e = h
                .iter()
                .find(|e| e.record_id.as_ref() == id.as_slice())
                .unwrap_or_else(|| panic!("{}: a staged record missing", n.name));
            assert!(e.outcome.as_ref().is_some_and(|o| o.applied), "{e:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_acceptance_is_nacked_and_the_obligation_stays_everywhere() {
    accord_tests::ensure_fresh_bins();
    let [a, b, c] = three_orgs().await;
    // carol's acceptance names an offer that is not the staged one (one she saw earlier).
    let (offer, acceptance) = halves(&b, &c, Some([7u8; 32]));
    start(&a, "d-2", &offer, &acceptance).await;
    let at_a = wait_phase(&a, "d-2", "ABORTED").await;
    assert_eq!(at_a.abort_cause, "NACK");
    assert!(at_a.votes.values().any(|v| v == "NACK"), "{at_a:?}");
    wait_phase(&b, "d-2", "ABORTED").await;
    wait_phase(&c, "d-2", "ABORTED").await;
    for n in [&a, &b, &c] {
        assert_eq!(obligor(n).await, "globex/bob", "{}", n.name);
        // Neither staged record reached any ledger.
        let entries = ledger(n).await;
        for id in [id_of(&offer), id_of(&acceptance)] {
            assert!(
                !entries
                    .iter()
                    .any(|e| e.record_id.as_ref() == id.as_slice()),
                "{}: a dropped record was written",
                n.name
            );
        }
    }
    // The hold ended with the abort: bob's own record on the commitment applies.
    assert_eq!(bob_defers(&b).await, "");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_commitment_is_held_while_the_delegate_is_open_and_freed_by_the_timeout() {
    accord_tests::ensure_fresh_bins();
    let [a, b, mut c] = three_orgs().await;
    assert!(c.terminate().unwrap(), "initech stops: it never answers");
    let (offer, acceptance) = halves(&b, &c, None);
    start(&a, "d-3", &offer, &acceptance).await;
    let preparing = wait_phase(&a, "d-3", "PREPARING").await;
    // globex prepared and answered ACK: from then on its parties write nothing else on JOB.
    wait_vote(&a, "d-3", "globex", "ACK").await;
    assert_eq!(bob_defers(&b).await, "envelope_hold");
    // A tick past the timeout aborts; every hold ends, nothing moved.
    tick(
        &a,
        "late",
        preparing.started_at_unix_ms + TIMEOUT_MS + 1_000,
    )
    .await;
    wait_phase(&a, "d-3", "ABORTED").await;
    wait_phase(&b, "d-3", "ABORTED").await;
    assert_eq!(bob_defers(&b).await, "");
    c.spawn().await.unwrap();
    wait_phase(&c, "d-3", "ABORTED").await;
    for n in [&a, &b, &c] {
        assert_eq!(obligor(n).await, "globex/bob", "{}", n.name);
    }
}

/// Issue 27: the coordinator goes silent (acme never ticks) and initech never answers. globex,
/// a following participant that ACKed, holds `JOB` until the envelope's timeout (seed 003:
/// `abort_after_seconds: 30`, from its prepare) passes on globex's own tick — not before — and
/// then bob writes on JOB again while the envelope is still PREPARING everywhere. The operator
/// lists holds and releases acme's: the envelope aborts on TIMEOUT at acme and globex.
#[tokio::test(flavor = "multi_thread")]
async fn a_following_participants_hold_ends_at_its_own_timeout_and_the_operator_releases_holds() {
    accord_tests::ensure_fresh_bins();
    let [a, b, mut c] = three_orgs().await;
    assert!(c.terminate().unwrap(), "initech stops: it never answers");
    let (offer, acceptance) = halves(&b, &c, None);
    start(&a, "d-4", &offer, &acceptance).await;
    wait_vote(&a, "d-4", "globex", "ACK").await;
    // globex's hold, as its operator sees it: it lapses 30 s after globex's prepare.
    let at_b = get(&b, "d-4").await.unwrap();
    let prepared_at = at_b
        .history
        .iter()
        .find(|h| h.step == "envelope_prepare")
        .map(|h| h.at_unix_ms)
        .expect("prepare at globex");
    let listed = holds(&b).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].commitment.as_str(), listed[0].envelope.as_str()),
        (JOB, "d-4")
    );
    assert_eq!(
        (listed[0].phase.as_str(), listed[0].role.as_str()),
        ("PREPARING", "participant")
    );
    assert_eq!(listed[0].lapses_at_unix_ms, prepared_at + TIMEOUT_MS);
    assert_eq!(bob_defers(&b).await, "envelope_hold");
    // globex's own tick 1 ms before the timeout: still held.
    tick(&b, "early", prepared_at + TIMEOUT_MS - 1).await;
    assert_eq!(holds(&b).await.len(), 1);
    // At the timeout: the hold ends at globex; the envelope is still the coordinator's to decide.
    tick(&b, "due", prepared_at + TIMEOUT_MS).await;
    assert!(holds(&b).await.is_empty());
    assert_eq!(get(&b, "d-4").await.unwrap().phase, "PREPARING");
    assert_eq!(bob_defers(&b).await, "");
    // acme (coordinating and participating) holds JOB too; its operator releases it.
    let at_a = holds(&a).await;
    assert_eq!(at_a.len(), 1, "{at_a:?}");
    assert_eq!(at_a[0].role, "coordinator");
    let unknown = client(&a)
        .await
        .release_hold(with_token(
            env::ReleaseHoldRequest {
                envelope: "no-such-envelope".into(),
            },
            &a.admin_token(),
        ))
        .await
        .expect_err("nothing to release");
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    let by_party = client(&a)
        .await
        .release_hold(with_token(
            env::ReleaseHoldRequest {
                envelope: "d-4".into(),
            },
            &a.party_token("alice"),
        ))
        .await
        .expect_err("operator only");
    assert!(
        matches!(
            by_party.code(),
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
        ),
        "{by_party:?}"
    );
    client(&a)
        .await
        .release_hold(with_token(
            env::ReleaseHoldRequest {
                envelope: "d-4".into(),
            },
            &a.admin_token(),
        ))
        .await
        .expect("release");
    for n in [&a, &b] {
        let e = wait_phase(n, "d-4", "ABORTED").await;
        assert_eq!(e.abort_cause, "TIMEOUT", "{}", n.name);
        assert!(holds(n).await.is_empty(), "{}", n.name);
    }
}
