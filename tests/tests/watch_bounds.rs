//! Issue 27, item 3: slow `WatchCommitments` clients cannot grow node memory or hold up the
//! ledger writer. Forty watch streams that never read, over two thousand commitments, while a
//! thousand of them change: each stream holds at most `limits.watch_pending` dirty ids, one scan
//! chunk and its channel, and is closed RESOURCE_EXHAUSTED (`accord-reason: watch_lagged`) once
//! its client is further behind than that; every write is answered meanwhile.
//! (Before: 240 unread streams over 2,000 commitments took a node from 800 MiB to 3.5 GB.)

use crate::federation_common;

use accord_proto::pb::record::v1::{self as rec, Record, record::Operation};
use accord_proto::pb::work::v1 as work;
use accord_tests::{TestNode, WorkClient};
use federation_common::{party, record};
use std::time::{Duration, Instant};
use tonic::Code;

/// A deadline guard for stream messages and writes (not a timing assertion).
const WAIT: Duration = Duration::from_secs(60);
const COMMITMENTS: usize = 1000;
const WATCHERS: usize = 40;
const PENDING: usize = 64;
/// README ("What needs me"): what an unread watch stream may cost the node, KiB (measured
/// 190-390 KiB; before issue 27, 6.5-17 MiB).
const PER_WATCH_KIB: u64 = 1024;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn reason(s: &tonic::Status) -> &str {
    s.metadata()
        .get("accord-reason")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn asked(i: usize) -> Record {
    record(
        "acme",
        "alice",
        &format!("c-{i:04}"),
        &[],
        Operation::Request(rec::Request {
            candidate: Some(party("acme", "bob")),
            terms: Some(rec::Terms {
                title: "report".into(),
                description: "x".repeat(2048),
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
}

fn promised(i: usize) -> Record {
    record(
        "acme",
        "bob",
        &format!("c-{i:04}"),
        &[],
        Operation::Promise(rec::Promise {}),
    )
}

/// Declares every record, 32 at a time; returns each call's latency (for the report only).
async fn declare_all(node: &TestNode, who: &str, records: Vec<Record>) -> Vec<Duration> {
    let c = node.work().await.unwrap();
    let token = node.party_token(who);
    let mut took = Vec::new();
    for group in records.chunks(32) {
        let mut tasks = Vec::new();
        for r in group.iter().cloned() {
            let mut c = c.clone();
            let req = accord_tests::with_token(work::DeclareRequest { record: Some(r) }, &token);
            tasks.push(tokio::spawn(async move {
                let t = Instant::now();
                let resp = tokio::time::timeout(WAIT, c.declare(req))
                    .await
                    .expect("a write is answered while the watches stall")
                    .expect("declare")
                    .into_inner();
                assert!(resp.outcome.unwrap().applied);
                t.elapsed()
            }));
        }
        for t in tasks {
            took.push(t.await.unwrap());
        }
    }
    took.sort();
    took
}

/// A client whose HTTP/2 stream window is small, so an unread stream stalls at once.
async fn small_window(node: &TestNode) -> WorkClient {
    let ch = tonic::transport::Endpoint::from_shared(format!("https://{}", node.addr))
        .unwrap()
        .tls_config(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(node.ca_pem()))
                .domain_name("localhost"),
        )
        .unwrap()
        .initial_stream_window_size(Some(16 * 1024))
        .initial_connection_window_size(Some(4 * 1024 * 1024))
        .connect()
        .await
        .unwrap();
    accord_tests::work_client(ch, &node.admin_token())
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_watchers_are_closed_watch_lagged_and_hold_bounded_memory_while_writes_go_on() {
    let node = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .config(|t, _| {
            t.push_str(&format!(
                "\n[limits]\nwatch_pending = {PENDING}\nmax_streams_per_connection = 1024\n"
            ))
        })
        .start()
        .await
        .unwrap();
    declare_all(&node, "alice", (0..2 * COMMITMENTS).map(asked).collect()).await;
    let pid = node.pid().unwrap();
    // The same flood without watches first, so that the node's own memory for it (caches,
    // memtables, the allocator's arenas) is there before the measure.
    let quiet = declare_all(
        &node,
        "bob",
        (COMMITMENTS..2 * COMMITMENTS).map(promised).collect(),
    )
    .await;
    let before = rss_kib(pid);

    // Forty operator watches on one small-window connection, none of them read.
    let c = small_window(&node).await;
    let mut stalled = Vec::new();
    for _ in 0..WATCHERS {
        let mut c = c.clone();
        stalled.push(
            c.watch_commitments(work::WatchCommitmentsRequest::default())
                .await
                .unwrap()
                .into_inner(),
        );
    }
    // A thousand commitments change: bob promises each. Every write is answered.
    let busy = declare_all(&node, "bob", (0..COMMITMENTS).map(promised).collect()).await;
    let during = rss_kib(pid);
    let p50 = |d: &[Duration]| d[d.len() / 2];
    eprintln!(
        "node RSS {before} KiB before, {during} KiB with {WATCHERS} stalled watches; Declare p50 \
         {:?} without them, {:?} with them (p99 {:?})",
        p50(&quiet),
        p50(&busy),
        busy[busy.len() * 99 / 100]
    );
    let per_watch = during.saturating_sub(before) / WATCHERS as u64;
    assert!(
        per_watch <= PER_WATCH_KIB,
        "{per_watch} KiB a stalled watch (bound {PER_WATCH_KIB}): node RSS {during} KiB, {before} \
         KiB before"
    );

    // A stalled client that reads again gets what was buffered, then the documented status:
    // it was more than watch_pending commitments behind.
    let mut s = stalled.pop().unwrap();
    let mut read = 0;
    let status = loop {
        match tokio::time::timeout(WAIT, s.message())
            .await
            .expect("deadline")
        {
            Ok(Some(_)) => read += 1,
            Ok(None) => panic!("the stream ended without a status after {read} summaries"),
            Err(e) => break e,
        }
        assert!(
            read <= 3 * COMMITMENTS,
            "{read} summaries and no watch_lagged"
        );
    };
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(reason(&status), "watch_lagged", "{status:?}");
    assert!(
        status.message().contains("limits.watch_pending"),
        "{status:?}"
    );
    // The client lists again and watches anew: a fresh watch starts with every commitment.
    drop(stalled);
    let mut fresh = node
        .work()
        .await
        .unwrap()
        .watch_commitments(work::WatchCommitmentsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let first = tokio::time::timeout(WAIT, fresh.message())
        .await
        .expect("deadline")
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            first.commitment_id.as_str(),
            first.change.as_str(),
            first.state.as_str()
        ),
        ("c-0000", "initial", "promised")
    );
}
