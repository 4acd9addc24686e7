//! Helpers shared by the scenarios of a node on PostgreSQL with several instances
//! (tests/tests/storage_*.rs, issue 31): submitting through a failover, finding the instance
//! that serves as the writer, and reading what each ledger holds.
#![allow(dead_code)]

use crate::federation_common::*;
use accord_proto::pb::record::v1::SignedRecord;
use accord_proto::pb::work::v1 as work;
use accord_tests::WorkClient;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// acme with `parties`, on `pg` (writer's lease `lease_ms`), with quick federation retries.
pub async fn on_postgres(
    pg: &accord_tests::pg::TestPostgres,
    lease_ms: u64,
    parties: &[&str],
) -> accord_tests::TestNode {
    let section = pg.storage_section(lease_ms);
    let mut b = accord_tests::TestNode::builder("acme");
    for p in parties {
        b = b.party(p);
    }
    b.config(move |t, p| {
        t.push_str(&section);
        fast(t, p);
    })
    .start()
    .await
    .unwrap()
}

/// Transport failures a client sees while the instance it called is gone: retried at the other
/// instance. Any other status is a failure of the test.
pub fn gone(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
    ) || accord_tests::closed_under(s)
}

/// Submits every record in order at `first`, moving to `next()` (the instance that serves now)
/// each time the one it calls is gone; returns the ids acknowledged, with the longest switch
/// (from the failed call to the first acknowledgement at the next instance).
pub async fn submit_all<F, Fut>(
    first: WorkClient,
    next: F,
    records: Vec<SignedRecord>,
    acked: Arc<AtomicUsize>,
) -> (Vec<[u8; 32]>, Option<Duration>)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<WorkClient>>,
{
    let mut c = first;
    let mut switched: Option<Instant> = None;
    let mut took: Option<Duration> = None;
    let mut ids = Vec::new();
    for s in records {
        loop {
            match c
                .submit(work::SubmitRequest {
                    record: Some(s.clone()),
                })
                .await
            {
                Ok(r) => {
                    let r = r.into_inner();
                    assert!(r.outcome.as_ref().is_some_and(|o| o.applied), "{r:?}");
                    if let Some(at) = switched.take() {
                        took = Some(took.unwrap_or_default().max(at.elapsed()));
                    }
                    ids.push(id_of(&s));
                    acked.fetch_add(1, Ordering::SeqCst);
                    break;
                }
                Err(e) if gone(&e) => {
                    switched.get_or_insert_with(Instant::now);
                    c = next().await.expect("an instance serves");
                }
                Err(e) => panic!("submit refused for a reason other than the kill: {e:?}"),
            }
        }
    }
    (ids, took)
}

/// A client of whichever of `addrs` serves as the writer (the others answer NOT_SERVING as
/// standbys, or are down), waiting up to 60 s for one.
pub async fn the_writer(
    addrs: &[std::net::SocketAddr],
    dir: &std::path::Path,
) -> anyhow::Result<WorkClient> {
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};
    let ca = std::fs::read(dir.join("tls/ca.pem"))?;
    let token = std::fs::read_to_string(dir.join("admin.token"))?;
    let started = Instant::now();
    loop {
        for a in addrs {
            let Ok(ch) = accord_tests::tls_channel(*a, &ca, None).await else {
                continue;
            };
            let status = tonic_health::pb::health_client::HealthClient::new(ch.clone())
                .check(HealthCheckRequest::default())
                .await
                .map(|r| r.into_inner().status());
            if matches!(status, Ok(ServingStatus::Serving)) {
                return Ok(accord_tests::work_client(ch, token.trim()));
            }
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "no instance serves"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The record ids of every entry of a ledger, read through `c`.
pub async fn ledger_ids(c: &mut WorkClient) -> Vec<[u8; 32]> {
    ledger_of(c)
        .await
        .iter()
        .map(|e| e.record_id.as_ref().try_into().expect("32-byte id"))
        .collect()
}

/// Each id once; every id of `want` among them.
pub fn once_each(ledger: &[[u8; 32]], want: &[[u8; 32]], at: &str) {
    let mut seen = HashSet::new();
    for id in ledger {
        assert!(seen.insert(*id), "{at}: record {} twice", hex::encode(id));
    }
    for id in want {
        assert!(
            seen.contains(id),
            "{at}: record {} missing",
            hex::encode(id)
        );
    }
}

/// Waits until `c` holds every id of `want`.
pub async fn holds_all(c: &WorkClient, want: &[[u8; 32]], at: &str) {
    for id in want {
        let (c, id) = (c.clone(), *id);
        accord_tests::eventually(WAIT, move || {
            let mut c = c.clone();
            async move {
                match c
                    .get_record(work::GetRecordRequest {
                        record_id: id.to_vec().into(),
                    })
                    .await
                {
                    Ok(r) => Ok(r.into_inner().entry.map(|_| ())),
                    Err(e) if e.code() == tonic::Code::NotFound => Ok(None),
                    Err(e) => Err(e),
                }
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{at}: record {} never arrived: {e:#}", hex::encode(id)));
    }
}

/// Waits until `id` is witnessed at `c` (K = 2 cosignatures); the checkpoint's size.
pub async fn witnessed_size(c: &WorkClient, id: [u8; 32]) -> u64 {
    let c = c.clone();
    let d = accord_tests::eventually(WAIT, move || {
        let mut c = c.clone();
        async move {
            let d = c
                .get_durability(work::GetDurabilityRequest {
                    record_id: id.to_vec().into(),
                })
                .await?
                .into_inner();
            // This node's own progress (the summary moves on to the peer's answers).
            Ok::<_, tonic::Status>((d.local() == work::Durability::Witnessed).then_some(d))
        }
    })
    .await
    .expect("the record is witnessed");
    let body = d.checkpoint.lines().nth(1).expect("checkpoint size line");
    body.parse().expect("checkpoint size")
}

/// Which of `addrs` the lease row names as the writer (`acme@ADDR (pid N)`).
pub fn writer_of(pg: &accord_tests::pg::TestPostgres, addrs: &[std::net::SocketAddr]) -> usize {
    let holder = pg
        .query("SELECT holder FROM accord_lease WHERE id = 1")
        .unwrap();
    addrs
        .iter()
        .position(|a| holder.starts_with(&format!("acme@{a} ")))
        .unwrap_or_else(|| panic!("the lease names no instance: {holder:?}"))
}

/// Makes `node` a peer of `peer` reachable at every one of `addrs`, in that order (issue 31:
/// several endpoints for one organisation).
pub async fn peer_at(
    peer: &accord_tests::TestNode,
    node: &accord_tests::TestNode,
    addrs: &[std::net::SocketAddr],
) {
    use accord_proto::pb::admin::v1 as admin;
    let mut as_peer = node.as_peer();
    as_peer.endpoint = addrs
        .iter()
        .map(|a| format!("https://{a}"))
        .collect::<Vec<_>>()
        .join(", ");
    peer.admin()
        .await
        .unwrap()
        .add_peer(peer.admin_request(admin::AddPeerRequest {
            peer: Some(as_peer),
        }))
        .await
        .unwrap();
}
