//! Issue 5: a duplicate envelope and a replayed record are answered with the original receipts,
//! never an error, and the record is in the receiver's ledger once (seed 000, "Federation
//! admission"; DESIGN.md, "Federation").

use crate::federation_common;

use accord_proto::pb::federation::v1::ReceiptKind;
use accord_proto::signing;
use federation_common::*;

#[tokio::test(flavor = "multi_thread")]
async fn duplicate_envelope_and_replayed_record_get_the_original_receipts() {
    // acme is only a sender here: the test speaks for it with its node key and TLS identity.
    let (b, a) = receiver_with_sender().await;
    let mut peer = AsPeer::new(&a, &b).await;
    let alice = signer(&a, "alice");

    let r1 = signing::sign_record(
        &alice,
        &request("acme", "alice", "d-1", party("globex", "bob")),
    );
    let r2 = signing::sign_record(&alice, &defer("acme", "alice", "d-1"));
    let r3 = signing::sign_record(
        &alice,
        &request("acme", "alice", "d-2", party("globex", "bob")),
    );

    let env1 = peer.envelope("globex", vec![r1.clone(), r2.clone()], 1);
    let first = peer.deliver(env1.clone()).await.unwrap();
    assert_eq!(first.len(), 3);
    assert_eq!(
        receipt(&first[0]).kind,
        ReceiptKind::EnvelopeRecorded as i32
    );
    assert_eq!(outcome(&first[1]), "admitted");
    assert_eq!(outcome(&first[2]), "admitted");
    assert_eq!(receipt(&first[1]).record_id.as_ref(), id_of(&r1));

    // The same envelope again: the very same receipts.
    let again = peer.deliver(env1).await.unwrap();
    assert_eq!(again, first);

    // r1 replayed in another envelope (and twice within it): its original receipt.
    let env2 = peer.envelope("globex", vec![r1.clone(), r3.clone(), r1.clone()], 2);
    let second = peer.deliver(env2).await.unwrap();
    assert_eq!(second.len(), 4);
    assert_ne!(
        second[0], first[0],
        "a new envelope gets its own envelope receipt"
    );
    assert_eq!(
        second[1], first[1],
        "the replayed record gets its original receipt"
    );
    assert_eq!(second[3], first[1]);
    assert_eq!(outcome(&second[2]), "admitted");

    // Each record is in globex's ledger once, with one admission declaration each.
    let entries = ledger(&b).await;
    for r in [&r1, &r2, &r3] {
        let id = id_of(r);
        assert_eq!(
            entries
                .iter()
                .filter(|e| e.record_id.as_ref() == id)
                .count(),
            1,
            "{}",
            hex::encode(id)
        );
    }
    let admissions = entries
        .iter()
        .filter(|e| {
            matches!(
                decode(e).operation,
                Some(accord_proto::pb::record::v1::record::Operation::Admission(
                    _
                ))
            )
        })
        .count();
    assert_eq!(admissions, 3);

    // GetReceipts gives the latest receipt for the same decision and admission declaration.
    let latest = peer.receipts(&[id_of(&r1)]).await;
    assert_eq!(latest.len(), 1);
    let (l, o) = (receipt(&latest[0]), receipt(&first[1]));
    assert_eq!(
        (l.admission_record_id, l.admission_sequence, l.outcome),
        (o.admission_record_id, o.admission_sequence, o.outcome)
    );
}
