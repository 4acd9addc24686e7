//! Issue 14, item 6: every `accordctl bench` runs in quick mode once in CI, so none of them rots,
//! and its `--json` last line parses with the keys BENCHMARKS.md and the issue name, as numbers.
//! No timing is asserted: the figures depend on the machine and its load.

use accord_tests::run_bin;

fn last_json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = run_bin("accordctl", args, None).unwrap();
    assert_eq!(code, 0, "accordctl {args:?} failed:\n{err}");
    let line = out.lines().last().expect("a last line");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {line}"))
}

fn numbers(v: &serde_json::Value, keys: &[&str]) {
    for k in keys {
        let x = v[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} is not a number in {v}"));
        assert!(x.is_finite() && x >= 0.0, "{k} = {x}");
    }
}

// One test, so the benches run one after another and do not compete for the cores.
#[test]
fn quick_benches_print_their_json() {
    let v = last_json(&[
        "bench",
        "append",
        "--quick",
        "--json",
        "--records",
        "1000",
        "--latency-secs",
        "1",
    ]);
    numbers(
        &v,
        &[
            "appends_per_s",
            "appends_per_s_unary",
            "verify_batch_per_s_2core",
            "ratio",
            "p50_ms_half_load",
            "p99_ms_half_load",
            "records",
            "clients",
        ],
    );
    assert!(v["appends_per_s"].as_f64().unwrap() > 0.0);
    // Where the time went, from the node's stage histograms: every stage of the record path
    // saw the half-load phase's appends (each Submit is queued for a verifier once, and for the
    // writer once — as is any record the Work service writes meanwhile; verify, apply, sync and
    // publish run at least once, for one or more appends each).
    let half = &v["stages"]["half_load"];
    let appends = v["half_load_records"].as_f64().unwrap();
    assert_eq!(
        half["verify_queue"]["count"].as_f64(),
        Some(appends),
        "{half}"
    );
    let queued = half["writer_queue"]["count"].as_f64().unwrap_or(0.0);
    assert!(queued >= appends, "{half}");
    for stage in ["verify", "apply", "sync", "publish"] {
        let n = half[stage]["count"].as_f64().unwrap_or(0.0);
        assert!((1.0..=queued).contains(&n), "{stage}: {half}");
        numbers(&half[stage], &["p50_ms", "p99_ms", "mean_ms", "max_ms"]);
    }
    let v = last_json(&[
        "bench",
        "federation",
        "--quick",
        "--json",
        "--records",
        "500",
        "--latency-records",
        "50",
    ]);
    numbers(
        &v,
        &[
            "federated_per_s",
            "verify_batch_per_s_1core",
            "ratio",
            "p50_ms_half_load",
            "p99_ms_half_load",
            "records",
        ],
    );
    let v = last_json(&[
        "bench",
        "witness",
        "--quick",
        "--json",
        "--checkpoints",
        "50",
        "--origins",
        "3",
        "--samples",
        "5",
    ]);
    numbers(
        &v,
        &[
            "add_checkpoint_per_s_one_origin",
            "add_checkpoint_per_s_many_origins",
            "recorded_to_witnessed_p50_ms",
            "recorded_to_witnessed_p99_ms",
        ],
    );
    assert!(v["recorded_to_witnessed_p99_ms"].as_f64().unwrap() > 0.0);
    let v = last_json(&["bench", "log", "--quick", "--json", "--proofs", "100"]);
    numbers(
        &v,
        &[
            "inclusion_time_ratio",
            "node_reads_ratio",
            "checkpoint_sign_us",
        ],
    );
}
