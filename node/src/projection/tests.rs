//! Reads see only synced records (issue 11, item 7): the shared projection shows a batch only
//! after its synced write returned.

use super::*;
use crate::clock::Clock;
use crate::ledger::{Append, Ledger};
use accord_proto::note::Signer;
use accord_proto::pb::record::v1 as rec;
use accord_proto::signing;
use std::sync::RwLock;

/// A request of `commitment` by acme/alice to acme/bob (shared with the listing tests).
pub(crate) fn request(commitment: &str) -> rec::Record {
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

/// `r` signed by `key`, as the writer takes it.
pub(crate) fn append_of(key: &Signer, r: &rec::Record) -> Append<k::Record> {
    let signed = signing::sign_record(key, r);
    let id = signing::record_id(&signed.payload_type, &signed.payload);
    let input = crate::convert::record_from_pb(id, r).unwrap();
    Append {
        id,
        signed,
        input,
        at: None,
    }
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
        let listed: Vec<String> = p
            .commitments_after("", 10)
            .iter()
            .map(|c| c.id.clone())
            .collect();
        assert_eq!(listed, vec!["c-1"]);
    }
    assert_eq!(ledger.len(), 1);
    drop((ledger, published));
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
        // The stored projection reflected every synced record: nothing to replay.
        assert_eq!(p.replayed(), 0);
    }
    drop((ledger, published));
    writer.join().unwrap();
}

fn access() -> k::Access {
    k::Access::new(k::Party::new("acme", WORK_SERVICE))
        .with_members("acme", ["alice".to_string(), "bob".to_string()])
}

fn open(
    dir: &std::path::Path,
    cache: usize,
) -> (
    Arc<RwLock<Projection>>,
    Ledger<k::Record>,
    std::thread::JoinHandle<()>,
) {
    let published = Arc::new(RwLock::new(Projection::default()));
    let machine = WorkMachine::new(published.clone(), access()).with_cache(cache);
    let (ledger, writer) =
        Ledger::open_with(dir, store::CFS, machine, 8, Clock::manual(1_000).0).unwrap();
    (published, ledger, writer)
}

/// Everything a read answers about `ids`, to compare two projections.
fn answers(p: &Projection, ids: &[String]) -> Vec<String> {
    let bob = k::Party::new("acme", "bob");
    let mut out: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(
                "{:?} {:?}",
                p.commitment(id, 5_000),
                p.may_read(id, &access(), &bob)
            )
        })
        .collect();
    out.push(format!("{:?}", p.attention(&bob, None, 1000)));
    out
}

#[tokio::test]
async fn the_stored_projection_equals_a_full_replay_and_the_cache_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let key = Signer::generate("acme/alice", &mut rand::rngs::OsRng).unwrap();
    let ids: Vec<String> = (0..40).map(|i| format!("c-{i}")).collect();
    let (published, ledger, writer) = open(dir.path(), 8);
    for id in &ids {
        assert!(
            ledger
                .append(append_of(&key, &request(id)))
                .await
                .unwrap()
                .outcome
                .applied
        );
    }
    // A rejected record is in the history too (a second request for c-0).
    let mut again = request("c-0");
    again.declared_at_unix_ms = 2;
    assert!(
        !ledger
            .append(append_of(&key, &again))
            .await
            .unwrap()
            .outcome
            .applied
    );
    let before = answers(&published.read().unwrap(), &ids);
    assert!(
        published.read().unwrap().cached() <= 8,
        "the cache is bounded"
    );
    drop((ledger, published));
    writer.join().unwrap();

    // Restarted: the stored projection serves, nothing replayed, same answers.
    let (published, ledger, writer) = open(dir.path(), 8);
    assert_eq!(published.read().unwrap().replayed(), 0);
    assert_eq!(answers(&published.read().unwrap(), &ids), before);
    drop((ledger, published));
    writer.join().unwrap();

    // A store whose projection layout is unknown is rebuilt by a full replay from sequence 0,
    // which reaches the same answers.
    {
        let st = crate::ledger::Store::open(dir.path(), store::CFS).unwrap();
        st.put_meta(store::LAYOUT, b"0").unwrap();
    }
    let (published, ledger, writer) = open(dir.path(), 8);
    assert_eq!(published.read().unwrap().replayed(), 41);
    assert_eq!(answers(&published.read().unwrap(), &ids), before);
    assert_eq!(published.read().unwrap().history("c-0").len(), 2);
    drop((ledger, published));
    writer.join().unwrap();
}
