//! Issue 27, item 3: `WatchCommitments` sends changes from the projection's change feed and
//! from the time index, not from rescans. On an in-process node on a driven clock (the Work
//! service ticks every 20 ms of real time; the clock only moves when the test moves it), a
//! watch sees a record made after it started, and a flag that only time raises (overdue: no
//! record is written for it).

use crate::federation_common;

use accord_node::clock::{Clock, ManualClock};
use accord_proto::pb::record::v1::{self as rec, Record, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_tests::TestNode;
use federation_common::{declare, ledger, party, record};
use std::sync::Arc;
use std::time::Duration;

/// A deadline guard for stream messages (not a timing assertion).
const WAIT: Duration = Duration::from_secs(30);
const T0: i64 = 1_900_000_000_000;
/// The request's due time.
const DUE: i64 = T0 + 60_000;

async fn acme() -> (TestNode, Arc<ManualClock>) {
    let (clock, manual) = Clock::manual(T0);
    let n = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .config(|t, _| *t = t.replace("tick_ms = 1000", "tick_ms = 20"))
        .start_with_clock(clock)
        .await
        .unwrap();
    (n, manual)
}

/// alice asks bob for `id`, due at [`DUE`].
fn asked(id: &str) -> Record {
    record(
        "acme",
        "alice",
        id,
        &[],
        Operation::Request(rec::Request {
            candidate: Some(party("acme", "bob")),
            terms: Some(rec::Terms {
                title: "report".into(),
                due_unix_ms: DUE,
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
}

async fn next(
    s: &mut tonic::Streaming<work::WatchCommitmentsResponse>,
) -> work::WatchCommitmentsResponse {
    tokio::time::timeout(WAIT, s.message())
        .await
        .expect("a message within the deadline")
        .expect("stream ok")
        .expect("stream open")
}

fn seen(s: &work::WatchCommitmentsResponse) -> (&str, &str, &str, Vec<&str>) {
    (
        s.commitment_id.as_str(),
        s.change.as_str(),
        s.state.as_str(),
        s.flags.iter().map(String::as_str).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_a_record_made_after_it_started_and_a_flag_raised_by_time() {
    let (mut n, clock) = acme().await;
    declare(&n, "alice", asked("c-1")).await;
    let mut alice = n.work_party("alice").await.unwrap();
    let mut watch = alice
        .watch_commitments(work::WatchCommitmentsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        seen(&next(&mut watch).await),
        ("c-1", "initial", "requested", vec![])
    );

    // A record after the watch started: it comes from the feed.
    declare(
        &n,
        "bob",
        record(
            "acme",
            "bob",
            "c-1",
            &[],
            Operation::Promise(rec::Promise {}),
        ),
    )
    .await;
    assert_eq!(
        seen(&next(&mut watch).await),
        ("c-1", "changed", "promised", vec![])
    );
    // A commitment created after the watch started comes from the feed too.
    declare(&n, "alice", asked("c-2")).await;
    assert_eq!(
        seen(&next(&mut watch).await),
        ("c-2", "changed", "requested", vec![])
    );

    // Time alone: the due time passes (the kernel's `overdue` is `now > due`). No record is
    // written for a flag; the time index names c-1 and c-2 at DUE + 1.
    let records = ledger(&n).await.len();
    clock.advance(DUE + 1 - T0);
    let mut overdue = [next(&mut watch).await, next(&mut watch).await];
    overdue.sort_by(|a, b| a.commitment_id.cmp(&b.commitment_id));
    assert_eq!(
        overdue.iter().map(seen).collect::<Vec<_>>(),
        [
            ("c-1", "changed", "promised", vec!["overdue"]),
            ("c-2", "changed", "requested", vec!["overdue"]),
        ]
    );
    assert_eq!(ledger(&n).await.len(), records, "a flag writes no record");

    // The operator's watch, started now, shows the flag in its first scan.
    let mut op = n.work().await.unwrap();
    let mut all = op
        .watch_commitments(work::WatchCommitmentsRequest {
            flag: "overdue".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let firsts = [next(&mut all).await, next(&mut all).await];
    assert_eq!(
        firsts.iter().map(seen).collect::<Vec<_>>(),
        [
            ("c-1", "initial", "promised", vec!["overdue"]),
            ("c-2", "initial", "requested", vec!["overdue"]),
        ]
    );
    n.stop_inproc().await.unwrap();
    drop((watch, all));
}
