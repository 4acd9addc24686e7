//! Issue 31, item 3: the database fails over under the node. acme runs as two instances on a
//! PostgreSQL primary with a synchronous streaming replica (`pg_basebackup`), `[storage] url`
//! naming both with `target_session_attrs=read-write`, and one witness. While alice submits,
//! the primary is stopped at once (as when its machine is lost) and the replica promoted. The
//! writer instance, cut off, stops when its lease lapses and its supervisor restarts it; the
//! standby rides out the failover and reconnects to the promoted replica, where it takes the
//! lease. Then: every record alice was acknowledged is in the ledger once, the promoted
//! database holds exactly what the node serves, and the witness cosigns the new checkpoints
//! (they are consistent with the one it cosigned before).

use crate::federation_common::*;
use crate::storage_common::*;
use accord_proto::signing;
use accord_tests::TestWitness;
use accord_tests::pg::{Instance, TestPostgres};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Records alice submits.
const N: usize = 120;
/// The primary is stopped once alice has this many acknowledged.
const KILL_AFTER: usize = 40;
/// The writer's lease, ms.
const LEASE_MS: u64 = 1_000;

#[tokio::test(flavor = "multi_thread")]
async fn promoting_the_synchronous_replica_under_load_loses_no_acknowledged_record() {
    use accord_proto::pb::work::v1 as work;
    let primary = TestPostgres::start().unwrap();
    let replica = primary.synchronous_replica().unwrap();
    let section = primary.storage_section_at(&primary.url_with(&replica), LEASE_MS);
    let acme = accord_tests::TestNode::builder("acme")
        .party("alice")
        .config(move |t, p| {
            *t = t.replace(
                "checkpoint_interval_ms = 1000",
                "checkpoint_interval_ms = 100",
            );
            t.push_str(&section);
            fast(t, p);
        })
        .init()
        .unwrap();
    let w1 = TestWitness::start("w1.example", &acme.origin(), &acme.vkey())
        .await
        .unwrap();
    let entry = w1.node_config_entry();
    acme.trust_witnesses(1, &[entry]).unwrap();
    let acme = Arc::new(acme);
    let instances = vec![
        Instance::start(&acme).unwrap(),
        Instance::start(&acme).unwrap(),
    ];
    let addrs = [instances[0].addr, instances[1].addr];

    // The supervisor (systemd's `Restart=always`, a pod's restart policy): an instance that
    // exited is started again on its own address, where it waits as a standby.
    let stop = Arc::new(AtomicBool::new(false));
    let supervisor = {
        let (acme, stop) = (acme.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut instances = instances;
            let mut restarts = [0; 2];
            while !stop.load(Ordering::SeqCst) {
                for (i, inst) in instances.iter_mut().enumerate() {
                    if !inst.running() {
                        *inst = Instance::start_at(&acme, &addrs[i].to_string())
                            .expect("the instance restarts");
                        restarts[i] += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (instances, restarts)
        })
    };

    let alice = signer(&acme, "alice");
    let first = signing::sign_record(
        &alice,
        &request("acme", "alice", "before", party("acme", "alice")),
    );
    let mut c = the_writer(&addrs, &acme.dir).await.unwrap();
    c.submit(work::SubmitRequest {
        record: Some(first.clone()),
    })
    .await
    .unwrap();
    let before = witnessed_size(&c, id_of(&first)).await;

    let records = (0..N)
        .map(|i| {
            signing::sign_record(
                &alice,
                &request("acme", "alice", &format!("p-{i}"), party("acme", "alice")),
            )
        })
        .collect::<Vec<_>>();
    let acked = Arc::new(AtomicUsize::new(0));
    let dir = acme.dir.clone();
    let load = tokio::spawn(submit_all(
        c,
        move || {
            let dir = dir.clone();
            async move { the_writer(&addrs, &dir).await }
        },
        records,
        acked.clone(),
    ));
    accord_tests::eventually(WAIT, || {
        let n = acked.load(Ordering::SeqCst);
        async move { Ok::<_, tonic::Status>((n >= KILL_AFTER).then_some(())) }
    })
    .await
    .unwrap();
    // The writer is the instance the lease row names; the other is the standby.
    let writer = writer_of(&primary, &addrs);
    let killed = Instant::now();
    primary.kill().unwrap();
    replica.promote().unwrap();
    println!("database promoted {:?} after the kill", killed.elapsed());
    let (ids, took) = load.await.unwrap();
    let took = took.expect("alice's client saw the failover");
    println!("pg-promotion: the node served {took:?} after the primary was stopped");
    stop.store(true, Ordering::SeqCst);
    let (_instances, restarts) = supervisor.join().unwrap();
    assert!(
        restarts[writer] >= 1,
        "the cut-off writer stopped and was restarted: {restarts:?}"
    );
    // The standby rode the database's failover out: it reconnected while it waited.
    assert_eq!(
        restarts[1 - writer],
        0,
        "the standby exited when the database went away"
    );

    // Every acknowledged record, once, at the instance that serves on the promoted database.
    let mut c = the_writer(&addrs, &acme.dir).await.unwrap();
    let ledger = ledger_ids(&mut c).await;
    let mut want = ids.clone();
    want.push(id_of(&first));
    once_each(&ledger, &want, "acme");
    // The promoted database, read by psql, holds the records the node serves, no more.
    let rows: usize = replica
        .query("SELECT count(*) FROM accord_kv WHERE cf = 'records'")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(rows, ledger.len(), "records in the promoted database");
    // The witness cosigns checkpoints past the one it cosigned on the old primary.
    let after = witnessed_size(&c, *ids.last().expect("alice's records")).await;
    assert!(after > before, "witnessed {after} after, {before} before");
    drop(w1);
}
