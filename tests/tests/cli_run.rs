//! Issue 28 item 5, the run writes: a party drives a run from the command line (`accordctl run
//! create|move|action|evidence|output|audit-event`) against a real node process, each answer
//! checked against what the node's `GetRun` then shows over gRPC (not against the CLI's own
//! reading); a move the declared table refuses is recorded rejected with exit 3 and its code; a
//! party with no role on the run is refused as on an unknown run, and nothing is written.
//!
//! Expected codes come from ARCHITECTURE.md's run table ("any move out of `completed` … is
//! refused `terminal_state`"; "An undeclared move is refused `invalid_state`") and README.md's
//! access rule for runs ("A write the caller may not make is `NOT_FOUND`").

use crate::runs_common::{STATES, client};
use accord_proto::pb::run::v1::GetRunRequest;
use accord_tests::{TestNode, run_bin};
use serde_json::Value;

/// `accordctl run <args> <credentials of p> --output json`: (exit code, stdout, stderr).
fn run_cli(node: &TestNode, p: &str, args: &[&str]) -> (i32, String, String) {
    let mut v: Vec<String> = std::iter::once("run".to_string())
        .chain(args.iter().map(|s| s.to_string()))
        .collect();
    v.extend(node.cli_party(p));
    v.extend(["--output".into(), "json".into()]);
    let refs: Vec<&str> = v.iter().map(String::as_str).collect();
    run_bin("accordctl", &refs, None).expect("accordctl runs")
}

/// A write the kernel applied: exit 0, `applied`; returns the record id it printed.
fn applied(node: &TestNode, p: &str, args: &[&str]) -> String {
    let (code, out, err) = run_cli(node, p, args);
    let doc: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out} / {err}"));
    assert_eq!(code, 0, "{args:?}: {doc} {err}");
    assert_eq!(doc["outcome"], "applied", "{args:?}: {doc}");
    assert_eq!(doc["durability"], "recorded", "{doc}");
    let id = doc["record_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 64, "{doc}");
    id
}

const DIGEST: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

#[tokio::test(flavor = "multi_thread")]
async fn a_party_drives_a_run_from_the_command_line() {
    let node = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .start()
        .await
        .unwrap();

    let start = applied(&node, "alice", &["create", "r1", "--trigger", "manual"]);
    let mut moves = vec![applied(&node, "alice", &["move", "r1", "--to", "queued"])];
    moves.push(applied(&node, "alice", &["move", "r1", "--to", "running"]));
    let action = applied(
        &node,
        "alice",
        &["action", "r1", "--tool", "mailer", "--side-effect"],
    );
    let evidence = applied(
        &node,
        "alice",
        &[
            "evidence",
            "r1",
            "--kind",
            "log",
            "--digest",
            DIGEST,
            "--size",
            "12",
            "--supports",
            &action,
        ],
    );
    let output = applied(
        &node,
        "alice",
        &[
            "output", "r1", "--action", &action, "--digest", DIGEST, "--size", "12",
        ],
    );
    let audit = applied(
        &node,
        "alice",
        &[
            "audit-event",
            "r1",
            "--kind",
            "tool_timeout",
            "--detail",
            "retried once",
        ],
    );
    moves.push(applied(
        &node,
        "alice",
        &["move", "r1", "--to", "completed"],
    ));

    // A move out of a terminal state: recorded, rejected, exit 3 with the table's code.
    let (code, out, err) = run_cli(&node, "alice", &["move", "r1", "--to", "running"]);
    let doc: Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    assert_eq!(code, 3, "{doc}");
    assert_eq!(doc["outcome"], "rejected");
    assert_eq!(doc["rejection_code"], "terminal_state", "{doc}");
    assert!(
        !doc["meaning"].as_str().unwrap_or_default().is_empty(),
        "{doc}"
    );

    // bob has no role on alice's run: refused as on an unknown run, with the reason; nothing
    // written (the run's records below are exactly alice's).
    let (code, _, err) = run_cli(
        &node,
        "bob",
        &["audit-event", "r1", "--kind", "tool_timeout"],
    );
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("not_found"), "{err}");
    let (code_unknown, _, err_unknown) = run_cli(
        &node,
        "bob",
        &["audit-event", "nope", "--kind", "tool_timeout"],
    );
    assert_eq!(code, code_unknown);
    assert_eq!(
        err.replace("r1", "RUN"),
        err_unknown.replace("nope", "RUN"),
        "refusal on another's run and on an unknown run differ"
    );

    // What the node shows over gRPC, read as alice.
    let mut c = client(&node, &node.party_token("alice")).await;
    let r = c
        .get_run(GetRunRequest { run: "r1".into() })
        .await
        .expect("GetRun")
        .into_inner();
    let name = |n: i32| STATES[(n - 1) as usize];
    assert_eq!(name(r.state), "completed", "{r:?}");
    assert!(r.terminal);
    let hexes = |l: &[prost::bytes::Bytes]| l.iter().map(hex::encode).collect::<Vec<_>>();
    assert_eq!(
        r.transitions
            .iter()
            .map(|t| hex::encode(&t.record_id))
            .collect::<Vec<_>>(),
        moves,
        "the three applied moves, in order; the rejected one is not a transition"
    );
    assert_eq!(
        r.transitions
            .iter()
            .map(|t| (name(t.prior), name(t.next)))
            .collect::<Vec<_>>(),
        vec![
            ("pending", "queued"),
            ("queued", "running"),
            ("running", "completed")
        ],
        "pending → queued → running → completed"
    );
    assert_eq!(hexes(&r.actions), vec![action]);
    assert_eq!(hexes(&r.evidence), vec![evidence]);
    assert_eq!(hexes(&r.outputs), vec![output]);
    assert_eq!(hexes(&r.audit_events), vec![audit]);
    assert_eq!(r.organisation, "acme");
    assert_ne!(start, moves[0]);
}
