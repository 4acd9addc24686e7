//! Issue 16's suspicion, settled on a real node (RocksDB ledger, kernel, decisions store) on a
//! driven clock: a receiver that appended its admission declarations and crashed before the
//! synced write of its decisions must, on the retry, re-create the same declarations — so the
//! ledger answers them as duplicates — for rejected and quarantined records as for admitted ones.

use super::*;
use crate::clock::Clock;
use crate::federation::logproof;
use crate::federation::peers::{PeerKey, PeerRecord};
use crate::node::Node;
use accord_proto::note::Signer;
use accord_proto::pb::federation::v1::Envelope;
use accord_proto::pb::record::v1::{self as pbr, Record, SignedRecord, record::Operation};
use accord_proto::signing::RECORD_PAYLOAD_TYPE;

const T0: i64 = 1_700_000_000_000;

struct Receiver {
    node: Arc<Node>,
    clock: Arc<crate::clock::ManualClock>,
    _tmp: tempfile::TempDir,
}

/// `globex`, opened on a manual clock, with `acme` (node key `acme_key`) as a peer.
async fn receiver(acme_key: &Signer) -> Receiver {
    let tmp = tempfile::tempdir().unwrap();
    let made = crate::init::init(&crate::init::InitOptions {
        dir: tmp.path().join("globex"),
        name: "globex".into(),
        parties: vec!["bob".into()],
        listen: "127.0.0.1:0".into(),
        sans: vec![],
    })
    .unwrap();
    let config = crate::config::Config::load(&made.config).unwrap();
    let (clock, manual) = Clock::manual(T0);
    let opened = crate::node::open(config, clock).await.unwrap();
    let tls_pem = crate::pki::generate("acme", &["localhost".into()])
        .unwrap()
        .ca_cert_pem;
    opened
        .node
        .federation
        .peers
        .add(PeerRecord {
            name: "acme".into(),
            endpoint: "https://127.0.0.1:1".into(),
            keys: vec![PeerKey {
                vkey: acme_key.verifier().to_vkey(),
                valid_until_unix_ms: 0,
            }],
            tls_pem,
            enabled: true,
            pin_sha256: String::new(),
        })
        .unwrap();
    Receiver {
        node: opened.node,
        clock: manual,
        _tmp: tmp,
    }
}

/// acme/alice requests `commitment` from globex/bob (shared with `federation::pipeline_tests`).
pub(crate) fn request(commitment: &str, declared_at: i64) -> Record {
    Record {
        author: Some(pbr::PartyRef {
            organisation: "acme".into(),
            name: "alice".into(),
        }),
        declared_at_unix_ms: declared_at,
        commitment_id: commitment.into(),
        nonce: commitment.as_bytes().to_vec().into(),
        operation: Some(Operation::Request(pbr::Request {
            candidate: Some(pbr::PartyRef {
                organisation: "globex".into(),
                name: "bob".into(),
            }),
            terms: Some(pbr::Terms {
                title: "t".into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The admission declarations in the ledger about `id` (their sequences).
pub(crate) fn declarations_about(node: &FedContext, id: &RecordId) -> Vec<u64> {
    node.ledger
        .store()
        .range(0, 100_000)
        .unwrap()
        .into_iter()
        .filter(|e| {
            let Some(s) = &e.record else { return false };
            let Ok(r) = Record::decode(s.payload.as_ref()) else {
                return false;
            };
            matches!(r.operation, Some(Operation::Admission(a)) if a.record_id.as_ref() == id)
        })
        .map(|e| e.sequence)
        .collect()
}

#[tokio::test]
async fn a_retry_after_a_crash_before_the_decisions_are_kept_declares_nothing_twice() {
    let rng = &mut rand::rngs::OsRng;
    let acme = Signer::generate("acme.accord/log", rng).unwrap();
    let stranger = Signer::generate("acme/alice", rng).unwrap();
    let r = receiver(&acme).await;
    let node = &r.node.fed;
    let peer = node.federation.peers.get("acme").unwrap();

    // Rejected at the door (a key acme does not hold: `unknown_key`), malformed, and — no log
    // proof — quarantined `unproven`.
    let unknown_key = signing::sign_record(&stranger, &request("c-1", T0 - 5));
    let malformed = SignedRecord {
        payload: vec![0xff, 0xff, 0x01].into(),
        payload_type: RECORD_PAYLOAD_TYPE.into(),
        signatures: vec![signing::sign(
            &acme,
            RECORD_PAYLOAD_TYPE,
            &[0xff, 0xff, 0x01],
        )],
    };
    let unproven = signing::sign_record(&acme, &request("c-2", T0 - 7));
    let records = vec![unknown_key, malformed, unproven];
    let ids: Vec<RecordId> = records
        .iter()
        .map(|s| signing::record_id(&s.payload_type, &s.payload))
        .collect();
    let env = Envelope {
        sender: "acme".into(),
        receiver: "globex".into(),
        first_sequence: 0,
        sent_at_unix_ms: T0,
        records,
        log_proof: None,
        ..Default::default()
    };
    let payload = env.encode_to_vec();
    let env_signed = Signed {
        signatures: vec![signing::sign(&acme, ENVELOPE_PAYLOAD_TYPE, &payload)],
        payload: payload.into(),
        payload_type: ENVELOPE_PAYLOAD_TYPE.into(),
    };
    let env_id = signing::record_id(ENVELOPE_PAYLOAD_TYPE, &env_signed.payload);

    // The first attempt gets as far as the declarations, then "crashes": nothing is persisted.
    let now = node.clock.now_ms();
    let log = logproof::verify(node, &peer, &env, now).await.unwrap();
    let all: Vec<_> = env.records.iter().collect();
    let sig_ok = peer.verify_batch(&all, now);
    let work = triage::records(node, &peer, &env, &log.proven, &sig_ok, now).unwrap();
    let ledger = node.ledger.hold(false).await;
    let decided = commit::kernel(&ledger, &peer, work).await.unwrap();
    let first = declare::decisions(
        node,
        &ledger,
        &peer,
        decided.decided,
        env.checkpointed_declarations,
    )
    .await
    .unwrap();
    drop(ledger);
    assert_eq!(first.len(), 3);
    let first_seqs: Vec<u64> = first.iter().map(|d| d.appended.sequence).collect();
    for id in &ids {
        assert!(node.federation.decisions.entry(id).unwrap().is_none());
        assert_eq!(declarations_about(node, id).len(), 1);
    }

    // The peer retries later; the receiver decides again from scratch.
    r.clock.advance(90_000);
    let now = node.clock.now_ms();
    let sig_ok = peer.verify_batch(&all, now);
    let resp = admit(node, &peer, &env_signed, &env, &sig_ok, env_id, now)
        .await
        .unwrap();
    let codes: Vec<String> = resp.receipts[1..]
        .iter()
        .map(|s| {
            let rc = accord_proto::pb::federation::v1::Receipt::decode(s.payload.as_ref()).unwrap();
            rc.code
        })
        .collect();
    assert_eq!(codes, ["unknown_key", "malformed", "unproven"]);
    // The whole answer is one receipt batch (issue 14): one signature, each receipt verifiable
    // alone with the receiver's node key.
    assert!(
        resp.receipts
            .iter()
            .all(|s| s.signatures == resp.receipts[0].signatures)
    );
    for (i, v) in
        crate::federation::receipts::verify_many(&resp.receipts, &[node.signer.verifier()], &[])
            .into_iter()
            .enumerate()
    {
        let v = v.unwrap_or_else(|e| panic!("receipt {i}: {e}"));
        assert_eq!(v.receipt.batch.map(|b| b.index), Some(i as u64));
    }
    for (i, id) in ids.iter().enumerate() {
        // One declaration per record: the retry's was a ledger duplicate of the first.
        assert_eq!(
            declarations_about(node, id),
            [first_seqs[i]],
            "record {i}: a second, different declaration"
        );
        let e = node.federation.decisions.entry(id).unwrap().unwrap();
        assert_eq!(e.admission_seq, first_seqs[i]);
    }
    assert!(node.federation.quarantine.get(&ids[2]).unwrap().is_some());
}
