//! Issue 9, metrics: a real node and a real witness with `metrics_listen = "127.0.0.1:0"`, scraped
//! over HTTP; the Prometheus text is parsed with a parser crate and the values follow behaviour
//! (appends count the records submitted, the ledger size is the log size, the witness counts its
//! add-checkpoint outcomes and holds the node's checkpoint size, admissions count by outcome).

use accord_proto::note::Signer;
use accord_proto::pb::admin::v1::GetStatusRequest;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1::{self as work, work_service_client::WorkServiceClient};
use accord_proto::signing;
use accord_tests::metrics::{WitnessOf, metrics_on, scrape, serve_node, serve_witness_of, value};
use accord_tests::{FAST_FEDERATION, TestNode, eventually, federate};
use anyhow::Result;
use std::time::Duration;

fn request(org: &str, author: &str, candidate: (&str, &str), commitment: &str, n: u8) -> Record {
    Record {
        author: Some(PartyRef {
            organisation: org.into(),
            name: author.into(),
        }),
        declared_at_unix_ms: 1,
        commitment_id: commitment.into(),
        nonce: vec![n].into(),
        operation: Some(Operation::Request(rec::Request {
            candidate: Some(PartyRef {
                organisation: candidate.0.into(),
                name: candidate.1.into(),
            }),
            terms: Some(rec::Terms {
                title: format!("job {n}"),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

async fn submit(node: &TestNode, who: &Signer, r: &Record) -> Result<work::SubmitResponse> {
    Ok(WorkServiceClient::new(node.channel().await?)
        .submit(work::SubmitRequest {
            record: Some(signing::sign_record(who, r)),
        })
        .await?
        .into_inner())
}

#[tokio::test(flavor = "multi_thread")]
async fn node_metrics_follow_appends_and_the_log() {
    let mut node = TestNode::builder("acme")
        .party("alice")
        .config(|t, _| metrics_on(t))
        .init()
        .unwrap();
    let (_proc, maddr) = serve_node(&mut node).await.unwrap();
    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();

    let before = scrape(maddr).unwrap();
    let appends0 = value(&before, "accord_ledger_appends_total", &[]).unwrap();
    assert_eq!(value(&before, "accord_ledger_records", &[]), Some(appends0));

    let n = 7u8;
    let records: Vec<Record> = (0..n)
        .map(|i| request("acme", "alice", ("acme", "bob"), &format!("m-{i}"), i))
        .collect();
    for r in &records {
        submit(&node, &alice, r).await.unwrap();
    }
    // The same record again is a duplicate: answered, not appended.
    let dup = submit(&node, &alice, &records[0]).await.unwrap();
    assert_eq!(dup.sequence, appends0 as u64);

    let after = scrape(maddr).unwrap();
    assert_eq!(
        value(&after, "accord_ledger_appends_total", &[]),
        Some(appends0 + f64::from(n)),
        "appends count the records submitted, not the duplicate"
    );
    assert_eq!(
        value(&after, "accord_ledger_duplicate_appends_total", &[]),
        Some(1.0)
    );
    assert_eq!(
        value(&after, "accord_ledger_group_commit_records_sum", &[]),
        Some(appends0 + f64::from(n)),
        "group commits wrote exactly the new records"
    );
    let latency_count = value(&after, "accord_ledger_append_seconds_count", &[]).unwrap();
    assert!(latency_count >= f64::from(n) + 1.0, "{latency_count}");

    // The ledger size is the log's: GetStatus, and the checkpoint once it covers it.
    let mut admin = node.admin().await.unwrap();
    let status = admin
        .get_status(node.admin_request(GetStatusRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        value(&after, "accord_ledger_records", &[]),
        Some(status.ledger_size as f64)
    );
    let size = status.ledger_size as f64;
    let s = eventually(Duration::from_secs(30), || async move {
        let s = scrape(maddr)?;
        anyhow::Ok((value(&s, "accord_log_checkpoint_size", &[]) == Some(size)).then_some(s))
    })
    .await
    .unwrap();
    assert_eq!(value(&s, "accord_ledger_records", &[]), Some(size));
    assert_eq!(
        value(&s, "accord_federation_quarantine_records", &[]),
        Some(0.0)
    );
    // No witnesses configured: nothing witnessed.
    assert_eq!(value(&s, "accord_log_witnessed_size", &[]), Some(0.0));
}

#[tokio::test(flavor = "multi_thread")]
async fn witness_metrics_count_add_checkpoint_and_node_counts_cosignature_failures() {
    // The node first, so its vkey can go into the witness's config.
    let mut node = TestNode::builder("acme")
        .party("alice")
        .config(|t, _| metrics_on(t))
        .init()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let wdir = tmp.path().join("w");
    let WitnessOf {
        proc: _w,
        vkey: wvkey,
        grpc: wgrpc,
        metrics: wmetrics,
    } = serve_witness_of(&node, &wdir).unwrap();

    let w0 = scrape(wmetrics).unwrap();
    assert_eq!(value(&w0, "accord_witness_logs", &[]), Some(1.0));
    assert_eq!(
        value(
            &w0,
            "accord_witness_add_checkpoint_total",
            &[("status", "200")]
        ),
        None,
        "nothing co-signed yet"
    );

    // The node uses this witness (k = 1) and a second one that is not there (a closed port):
    // its cosignature failures are counted per witness.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let dead_vkey = {
        let (code, out, _) = accord_tests::run_bin(
            "accordctl",
            &["key", "generate", "--name", "dead.example", "--cosigner"],
            None,
        )
        .unwrap();
        assert_eq!(code, 0);
        out.lines().next().unwrap().to_string()
    };
    let wca = wdir.join("tls/ca.pem");
    node.edit_config(|t| {
        *t = t.replace("k = 0", "k = 1");
        t.push_str(&format!(
            "\n[[witnesses.list]]\nvkey = \"{wvkey}\"\nendpoint = \"https://{wgrpc}\"\nca = \"{}\"\n\n[[witnesses.list]]\nvkey = \"{dead_vkey}\"\nendpoint = \"https://{dead_addr}\"\nca = \"{}\"\n",
            wca.display(),
            wca.display()
        ));
    })
    .unwrap();
    let (_n, nmetrics) = serve_node(&mut node).await.unwrap();
    let alice = Signer::from_skey(node.party_skey("alice").trim()).unwrap();
    for i in 0..3 {
        submit(
            &node,
            &alice,
            &request("acme", "alice", ("acme", "bob"), &format!("w-{i}"), i),
        )
        .await
        .unwrap();
    }
    let size = node
        .admin()
        .await
        .unwrap()
        .get_status(node.admin_request(GetStatusRequest {}))
        .await
        .unwrap()
        .into_inner()
        .ledger_size as f64;
    let origin = node.origin();
    let origin = origin.as_str();
    // The witness holds the node's checkpoint of the whole ledger and counted its 200s. (The
    // count follows the answer, the held size the synced write before it: a scrape between the
    // two sees the size alone, so the wait is for both.)
    let w = eventually(Duration::from_secs(60), || async move {
        let s = scrape(wmetrics)?;
        let counted = value(
            &s,
            "accord_witness_add_checkpoint_total",
            &[("status", "200")],
        )
        .is_some();
        anyhow::Ok(
            (value(&s, "accord_witness_checkpoint_size", &[("origin", origin)]) == Some(size)
                && counted)
                .then_some(s),
        )
    })
    .await
    .unwrap();
    let ok = value(
        &w,
        "accord_witness_add_checkpoint_total",
        &[("status", "200")],
    )
    .unwrap();
    assert!(ok >= 1.0, "{ok}");
    // The node: witnessed up to that size; the dead witness's failures counted, the live one's not.
    let s = eventually(Duration::from_secs(60), || async move {
        let s = scrape(nmetrics)?;
        let failed = value(
            &s,
            "accord_witness_cosignature_failures_total",
            &[("witness", "dead.example")],
        );
        anyhow::Ok(
            (value(&s, "accord_log_witnessed_size", &[]) == Some(size)
                && failed.is_some_and(|f| f >= 1.0))
            .then_some(s),
        )
    })
    .await
    .unwrap();
    assert_eq!(
        value(
            &s,
            "accord_witness_cosignature_failures_total",
            &[("witness", "w.example")]
        ),
        None
    );
    // Every co-signed checkpoint was persisted by a synced write before its answer; writes are
    // shared, never more than the checkpoints. Read once the node holds the last answer: the
    // witness counts a 200 before it answers, but a write before its 200, so a scrape between
    // the last checkpoint's write and its answer would see one write too many.
    let w = scrape(wmetrics).unwrap();
    let ok = value(
        &w,
        "accord_witness_add_checkpoint_total",
        &[("status", "200")],
    )
    .unwrap();
    let writes = value(&w, "accord_witness_checkpoint_writes_total", &[]).unwrap();
    assert!(
        (1.0..=ok).contains(&writes),
        "{writes} writes for {ok} checkpoints"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn admissions_and_peer_queues_are_counted() {
    let a = TestNode::builder("acme")
        .party("alice")
        .config(|t, _| t.push_str(FAST_FEDERATION))
        .start()
        .await
        .unwrap();
    let mut b = TestNode::builder("globex")
        .party("bob")
        .config(|t, _| {
            metrics_on(t);
            t.push_str(FAST_FEDERATION);
        })
        .init()
        .unwrap();
    let (_b, bmetrics) = serve_node(&mut b).await.unwrap();
    federate(&a, &b).await.unwrap();

    let s0 = scrape(bmetrics).unwrap();
    assert_eq!(
        value(&s0, "accord_federation_queue_depth", &[("peer", "acme")]),
        Some(0.0)
    );
    assert_eq!(
        value(
            &s0,
            "accord_federation_breaker_state",
            &[("peer", "acme"), ("state", "closed")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s0,
            "accord_federation_admissions_total",
            &[("outcome", "admitted")]
        ),
        None
    );

    let alice = Signer::from_skey(a.party_skey("alice").trim()).unwrap();
    for i in 0..3 {
        submit(
            &a,
            &alice,
            &request("acme", "alice", ("globex", "bob"), &format!("f-{i}"), i),
        )
        .await
        .unwrap();
    }
    let s = eventually(Duration::from_secs(60), || async move {
        let s = scrape(bmetrics)?;
        let admitted = value(
            &s,
            "accord_federation_admissions_total",
            &[("outcome", "admitted")],
        );
        anyhow::Ok((admitted == Some(3.0)).then_some(s))
    })
    .await
    .unwrap();
    assert_eq!(
        value(
            &s,
            "accord_federation_admissions_total",
            &[("outcome", "rejected")]
        ),
        None
    );
}
