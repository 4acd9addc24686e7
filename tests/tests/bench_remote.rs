//! Issue 14, item 1: `accordctl bench federation` targets two running nodes (`--node-a`,
//! `--node-b` and their node directories) instead of starting its own, and what it submits at A
//! is admitted at B. A pair that is not peered is refused with a clear error before anything is
//! submitted.

use crate::federation_common;

use accord_proto::pb::admin::v1::GetStatusRequest;
use accord_tests::{TestNode, federate, run_bin};
use federation_common::two_orgs;

async fn ledger_size(n: &TestNode) -> u64 {
    n.admin()
        .await
        .unwrap()
        .get_status(n.admin_request(GetStatusRequest {}))
        .await
        .unwrap()
        .into_inner()
        .ledger_size
}

async fn bench(a: &TestNode, b: &TestNode) -> (i32, String, String) {
    let args: Vec<String> = [
        "bench",
        "federation",
        "--json",
        "--records",
        "200",
        "--latency-records",
        "20",
        "--clients",
        "4",
        "--batch",
        "16",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        "--node-a".into(),
        format!("https://{}", a.addr),
        "--a-dir".into(),
        a.dir.display().to_string(),
        "--node-b".into(),
        format!("https://{}", b.addr),
        "--b-dir".into(),
        b.dir.display().to_string(),
    ])
    .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_bin("accordctl", &args, None).unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_federation_targets_two_running_nodes() {
    let (a, b) = two_orgs(&["alice"], &["bob"]).await;

    // Not peered yet: refused, naming the missing peer; nothing recorded at A.
    let a0 = ledger_size(&a).await;
    let (code, _, err) = bench(&a, &b).await;
    assert_ne!(code, 0);
    assert!(err.contains("acme has no peer globex"), "{err}");
    assert_eq!(ledger_size(&a).await, a0);

    federate(&a, &b).await.unwrap();
    let b0 = ledger_size(&b).await;
    let (code, out, err) = bench(&a, &b).await;
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(v["placement"], "remote");
    assert_eq!(v["records"], 200);
    assert!(v["federated_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(v["latency"]["records"], 20, "{v}");
    // Every record reached B and was admitted there: the record and its admission declaration.
    assert!(ledger_size(&b).await >= b0 + 2 * 220);
    // The nodes are still running (the bench stops only what it started).
    assert!(ledger_size(&a).await >= a0 + 220);
}
