//! Reads see only synced records (issue 11, item 7): the shared projection shows a batch only
//! after its synced write returned.

use super::*;
use crate::clock::Clock;
use crate::ledger::{Append, Ledger};
use accord_proto::note::Signer;
use accord_proto::pb::record::v1 as rec;
use accord_proto::signing::{self, RECORD_PAYLOAD_TYPE};
use std::sync::RwLock;

fn request(commitment: &str) -> rec::Record {
    rec::Record {
        author: Some(rec::PartyRef {
            organisation: "acme".into(),
            name: "alice".into(),
        }),
        declared_at_unix_ms: 1,
        commitment_id: commitment.into(),
        operation: Some(rec::record::Operation::Request(rec::Request {
            candidate: Some(rec::PartyRef {
                organisation: "acme".into(),
                name: "bob".into(),
            }),
            terms: Some(rec::Terms {
                title: "report".into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn append_of(key: &Signer, r: &rec::Record) -> Append<k::Record> {
    let signed = signing::sign_record(key, r);
    let id = signing::record_id(RECORD_PAYLOAD_TYPE, &signed.payload);
    let input = crate::convert::record_from_pb(id, r).unwrap();
    Append { id, signed, input }
}

#[tokio::test]
async fn a_batch_whose_write_fails_is_never_visible() {
    let dir = tempfile::tempdir().unwrap();
    let key = Signer::generate("acme/alice", &mut rand::rngs::OsRng).unwrap();
    let access = k::Access::new(k::Party::new("acme", WORK_SERVICE))
        .with_members("acme", ["alice".to_string(), "bob".to_string()]);
    let published = Arc::new(RwLock::new(Projection::default()));
    let machine = WorkMachine::new(published.clone(), access);
    let (clock, _) = Clock::manual(1_000);
    let (ledger, writer) = Ledger::open(dir.path(), machine, 8, clock).unwrap();

    let first = ledger
        .append(append_of(&key, &request("c-1")))
        .await
        .unwrap();
    assert!(first.outcome.applied);
    {
        let p = published.read().unwrap();
        assert_eq!(p.commitment("c-1", 1_000).unwrap().state, "requested");
        assert_eq!(p.history("c-1").len(), 1);
    }

    // The disk refuses the next write: the kernel applies c-2 in the writer's working copy,
    // but the batch never syncs, so no read may show it.
    ledger.fail_writes();
    let failed = ledger.append(append_of(&key, &request("c-2"))).await;
    assert!(matches!(failed, Err(Error::LedgerStopped)), "{failed:?}");
    {
        let p = published.read().unwrap();
        assert!(
            p.get("c-2").is_none(),
            "an unsynced record's state is visible"
        );
        assert!(p.history("c-2").is_empty());
        assert_eq!(p.open_ids().cloned().collect::<Vec<_>>(), vec!["c-1"]);
        assert_eq!(p.service_snapshot().len(), 1);
    }
    assert_eq!(ledger.len(), 1);
    drop(ledger);
    writer.join().unwrap();

    // After a restart only what the disk holds is derived.
    let published = Arc::new(RwLock::new(Projection::default()));
    let access = k::Access::new(k::Party::new("acme", WORK_SERVICE))
        .with_members("acme", ["alice".to_string(), "bob".to_string()]);
    let machine = WorkMachine::new(published.clone(), access);
    let (ledger, writer) = Ledger::open(dir.path(), machine, 8, Clock::manual(2_000).0).unwrap();
    {
        let p = published.read().unwrap();
        assert!(p.get("c-1").is_some());
        assert!(p.get("c-2").is_none());
    }
    drop(ledger);
    writer.join().unwrap();
}
