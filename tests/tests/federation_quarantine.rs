//! Issue 5: quarantine (seed 000, "Federation admission": `["quarantined", code]` — "Kept with
//! no local effect; later closes as admitted or rejected"). A record whose basis is not known is
//! quarantined `missing_basis` and admitted when its basis arrives; otherwise it times out
//! (`quarantine_timeout`) or the operator decides (`accordctl admin quarantine admit|reject`).

use crate::federation_common;

use accord_proto::pb::admin::v1 as admin;
use accord_proto::pb::record::v1::{Record, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_proto::signing;
use accord_tests::TestNode;
use federation_common::*;
use prost::Message;

/// Waits until `peer`'s receipt for `id` is admitted; the receipt, or `None` at the deadline.
async fn admitted(peer: &AsPeer, id: [u8; 32]) -> Option<accord_proto::pb::federation::v1::Signed> {
    accord_tests::eventually(WAIT, || {
        let mut p = AsPeer {
            name: peer.name.clone(),
            key: peer.key.clone(),
            client: peer.client.clone(),
        };
        async move {
            let r = p.receipts(&[id]).await.into_iter().next()?;
            (outcome(&r) == "admitted").then_some(r)
        }
    })
    .await
    .ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn record_before_its_basis_is_quarantined_then_admitted() {
    let (b, a) = receiver_with_sender().await;
    let mut peer = AsPeer::new(&a, &b).await;
    let alice = signer(&a, "alice");
    let c = "q-1";
    let started = std::time::Instant::now();
    let r1 = signing::sign_record(&alice, &request("acme", "alice", c, party("globex", "bob")));
    let r2 = signing::sign_record(&alice, &defer("acme", "alice", c));
    let r3 = signing::sign_record(&alice, &resume("acme", "alice", c, id_of(&r2)));

    // The resume arrives before the defer it rests on.
    let got = peer
        .deliver(peer.envelope("globex", vec![r1.clone(), r3.clone()], 1))
        .await
        .unwrap();
    assert_eq!(outcome(&got[1]), "admitted");
    assert_eq!(outcome(&got[2]), r#"["quarantined", "missing_basis"]"#);
    let opened = receipt(&got[2]).admission_record_id;

    // Kept with no local effect: not in the ledger, the commitment knows only the request.
    let mut wc = work(&b).await;
    let e = wc
        .get_record(work::GetRecordRequest {
            record_id: id_of(&r3).to_vec().into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    let view = wait_state(&b, c, "requested").await;
    assert!(
        view.history
            .iter()
            .all(|h| h.record_id.as_ref() != id_of(&r3))
    );

    // The operator sees it, with its code and age.
    let q = b
        .admin()
        .await
        .unwrap()
        .list_quarantine(b.admin_request(admin::ListQuarantineRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(q.records.len(), 1);
    let qr = &q.records[0];
    assert_eq!(
        (qr.record_id.as_ref(), qr.peer.as_str(), qr.code.as_str()),
        (id_of(&r3).as_slice(), "acme", "missing_basis")
    );
    // Its age counts from its arrival, which this test saw: never negative, never more.
    let waited = i64::try_from(started.elapsed().as_millis()).unwrap();
    assert!(
        (0..=waited).contains(&qr.age_ms),
        "quarantine age {} ms, {waited} ms since the delivery",
        qr.age_ms
    );
    assert_eq!(qr.author.as_ref().map(|p| p.name.as_str()), Some("alice"));
    let (code, out, err) = accordctl(
        &[
            admin_args(&b),
            vec!["--json".into(), "quarantine".into(), "list".into()],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        j[0]["outcome"],
        serde_json::json!(["quarantined", "missing_basis"])
    );

    // The basis arrives: the quarantine closes as admitted, by itself.
    let got = peer
        .deliver(peer.envelope("globex", vec![r2.clone()], 2))
        .await
        .unwrap();
    assert_eq!(outcome(&got[1]), "admitted");
    let latest = admitted(&peer, id_of(&r3))
        .await
        .expect("the quarantined record is admitted once its basis arrived");
    // The closing declaration names the one that opened the quarantine.
    let closing = receipt(&latest).admission_record_id;
    let e = wc
        .get_record(work::GetRecordRequest { record_id: closing })
        .await
        .unwrap()
        .into_inner()
        .entry
        .unwrap();
    let Some(Operation::Admission(adm)) = Record::decode(e.record.unwrap().payload.as_ref())
        .unwrap()
        .operation
    else {
        panic!()
    };
    assert_eq!(adm.closes, opened);

    let view = wait_state(&b, c, "requested").await;
    let ops: Vec<(&[u8], &str, bool)> = view
        .history
        .iter()
        .filter(|h| h.operation != "admission")
        .map(|h| {
            (
                h.record_id.as_ref(),
                h.operation.as_str(),
                h.outcome.as_ref().is_some_and(|o| o.applied),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            (id_of(&r1).as_slice(), "request", true),
            (id_of(&r2).as_slice(), "defer", true),
            (id_of(&r3).as_slice(), "resume", true)
        ]
    );
    // Within one envelope too: the resume before its defer is quarantined, then released.
    let c = "q-2";
    let r1 = signing::sign_record(&alice, &request("acme", "alice", c, party("globex", "bob")));
    let r2 = signing::sign_record(&alice, &defer("acme", "alice", c));
    let r3 = signing::sign_record(&alice, &resume("acme", "alice", c, id_of(&r2)));
    let got = peer
        .deliver(peer.envelope("globex", vec![r1, r3.clone(), r2], 3))
        .await
        .unwrap();
    let outs: Vec<String> = got[1..].iter().map(outcome).collect();
    assert_eq!(
        outs,
        [
            "admitted",
            r#"["quarantined", "missing_basis"]"#,
            "admitted"
        ]
    );
    admitted(&peer, id_of(&r3))
        .await
        .expect("released within the same envelope's delivery");

    let q = b
        .admin()
        .await
        .unwrap()
        .list_quarantine(b.admin_request(admin::ListQuarantineRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(q.records.is_empty());
}

/// A record of a commitment the receiver does not know yet — its request comes by another
/// organisation's node, or later — is quarantined `missing_basis` (it used to be rejected as
/// `invalid_operation:unknown_commitment`, and was lost: three organisations' nodes deliver a
/// commitment's records by different peers, in no common order) and admitted once the request
/// is in the ledger; in one envelope, a request before its commitment's records lets them in.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_of_an_unknown_commitment_waits_for_its_request() {
    let (b, a) = receiver_with_sender().await;
    let mut peer = AsPeer::new(&a, &b).await;
    let alice = signer(&a, "alice");
    let c = "q-unknown";
    let r1 = signing::sign_record(&alice, &request("acme", "alice", c, party("globex", "bob")));
    let r2 = signing::sign_record(&alice, &defer("acme", "alice", c));

    let got = peer
        .deliver(peer.envelope("globex", vec![r2.clone()], 1))
        .await
        .unwrap();
    assert_eq!(outcome(&got[1]), r#"["quarantined", "missing_basis"]"#);
    let mut wc = work(&b).await;
    let e = wc
        .get_commitment(work::GetCommitmentRequest {
            commitment_id: c.into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "no local effect");

    let got = peer
        .deliver(peer.envelope("globex", vec![r1.clone()], 2))
        .await
        .unwrap();
    assert_eq!(outcome(&got[1]), "admitted");
    admitted(&peer, id_of(&r2))
        .await
        .expect("the record is admitted once its commitment's request arrived");
    // The kernel applied it after the request: the commitment's history holds both, applied.
    let view = wait_state(&b, c, "requested").await;
    let ops: Vec<(&[u8], &str, bool)> = view
        .history
        .iter()
        .filter(|h| h.operation != "admission")
        .map(|h| {
            (
                h.record_id.as_ref(),
                h.operation.as_str(),
                h.outcome.as_ref().is_some_and(|o| o.applied),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            (id_of(&r1).as_slice(), "request", true),
            (id_of(&r2).as_slice(), "defer", true)
        ]
    );

    // In one envelope: after its request, admitted at once; before it, quarantined, then
    // released by it.
    let (c2, c3) = ("q-unknown-2", "q-unknown-3");
    let q1 = signing::sign_record(
        &alice,
        &request("acme", "alice", c2, party("globex", "bob")),
    );
    let q2 = signing::sign_record(&alice, &defer("acme", "alice", c2));
    let s1 = signing::sign_record(
        &alice,
        &request("acme", "alice", c3, party("globex", "bob")),
    );
    let s2 = signing::sign_record(&alice, &defer("acme", "alice", c3));
    let got = peer
        .deliver(peer.envelope("globex", vec![q1, q2, s2.clone(), s1], 3))
        .await
        .unwrap();
    let outs: Vec<String> = got[1..].iter().map(outcome).collect();
    assert_eq!(
        outs,
        [
            "admitted",
            "admitted",
            r#"["quarantined", "missing_basis"]"#,
            "admitted"
        ]
    );
    admitted(&peer, id_of(&s2))
        .await
        .expect("released by the request later in the same envelope");
}

/// The receiver runs on a driven clock: the quarantine times out when the test moves the clock
/// past `quarantine_timeout_ms`, so the operator's decisions never race the timeout.
#[tokio::test(flavor = "multi_thread")]
async fn quarantine_times_out_or_is_decided_by_the_operator() {
    const TIMEOUT: i64 = 3_600_000;
    let (clock, manual) = accord_node::clock::Clock::manual(wall_now_ms());
    let b = TestNode::builder("globex")
        .party("bob")
        .config(|t, _| {
            t.push_str(&format!(
                "\n[federation]\nquarantine_timeout_ms = {TIMEOUT}\nreceipt_poll_ms = 200\n"
            ))
        })
        .start_with_clock(clock)
        .await
        .unwrap();
    let a = TestNode::builder("acme")
        .party("alice")
        .start()
        .await
        .unwrap();
    b.add_peer(&a).await.unwrap();
    let mut peer = AsPeer::new(&a, &b).await;
    let alice = signer(&a, "alice");
    let never = |n: u8| [n; 32];
    // Three records on three commitments, each resting on a record that never comes.
    let mut rs = Vec::new();
    for (i, c) in ["t-1", "t-2", "t-3"].iter().enumerate() {
        rs.push(signing::sign_record(
            &alice,
            &request("acme", "alice", c, party("globex", "bob")),
        ));
        rs.push(signing::sign_record(
            &alice,
            &resume("acme", "alice", c, never(i as u8 + 1)),
        ));
    }
    let got = peer
        .deliver(peer.envelope("globex", rs.clone(), 1))
        .await
        .unwrap();
    let outs: Vec<String> = got[1..].iter().map(outcome).collect();
    assert_eq!(outs.iter().filter(|o| *o == "admitted").count(), 3);
    assert_eq!(
        outs.iter().filter(|o| o.contains("missing_basis")).count(),
        3
    );
    let (timed_out, rejected, admitted) = (id_of(&rs[1]), id_of(&rs[3]), id_of(&rs[5]));

    // By hand: one rejected, one admitted (the kernel still decides: no open defer to resume).
    let (code, _, err) = accordctl(
        &[
            admin_args(&b),
            vec![
                "quarantine".into(),
                "reject".into(),
                hex::encode(rejected),
                "--reason".into(),
                "not ours".into(),
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = accordctl(
        &[
            admin_args(&b),
            vec![
                "quarantine".into(),
                "admit".into(),
                hex::encode(admitted),
                "--reason".into(),
                "basis lost".into(),
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    // Deciding a record that is not quarantined: NotFound, nothing written.
    let e = b
        .admin()
        .await
        .unwrap()
        .decide_quarantined(b.admin_request(admin::DecideQuarantinedRequest {
            record_id: never(9).to_vec().into(),
            admit: true,
            reason: "x".into(),
        }))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);

    let r = peer.receipts(&[rejected, admitted]).await;
    assert_eq!(outcome(&r[0]), r#"["rejected", "operator"]"#);
    assert!(
        outcome(&r[1]).starts_with(r#"["rejected", "invalid_operation:"#),
        "{}",
        outcome(&r[1])
    );
    // Decided by hand: declared by the operator, signed by the node.
    let mut wc = work(&b).await;
    for s in &r {
        let e = wc
            .get_record(work::GetRecordRequest {
                record_id: receipt(s).admission_record_id,
            })
            .await
            .unwrap()
            .into_inner()
            .entry
            .unwrap();
        // The kernel applies the operator's decision (issue 11: Access decides who may write
        // admissions; the seed restricts it to no role), so the peer is told about a
        // declaration that holds, not one the kernel refused.
        let applied = e
            .outcome
            .as_ref()
            .map(|o| (o.applied, o.rejection_code.clone()));
        assert_eq!(
            applied,
            Some((true, String::new())),
            "operator admission outcome"
        );
        let rec = Record::decode(e.record.unwrap().payload.as_ref()).unwrap();
        assert_eq!(rec.author.unwrap().name, "operator");
    }

    // Until the clock moves, nothing times out: the third is still quarantined.
    let r = peer.receipts(&[timed_out]).await;
    assert_eq!(outcome(&r[0]), r#"["quarantined", "missing_basis"]"#);

    // The last one times out once the clock passes the timeout.
    manual.advance(TIMEOUT);
    let r = accord_tests::eventually(WAIT, || {
        let mut p = AsPeer {
            name: peer.name.clone(),
            key: peer.key.clone(),
            client: peer.client.clone(),
        };
        async move {
            let r = p.receipts(&[timed_out]).await.into_iter().next()?;
            (outcome(&r) != r#"["quarantined", "missing_basis"]"#).then_some(r)
        }
    })
    .await
    .unwrap();
    assert_eq!(outcome(&r), r#"["rejected", "quarantine_timeout"]"#);
    let q = b
        .admin()
        .await
        .unwrap()
        .list_quarantine(b.admin_request(admin::ListQuarantineRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(q.records.is_empty());
}
