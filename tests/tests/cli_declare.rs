//! Issue 28 item 5: a party acts from the command line. `accordctl work declare <operation>`
//! over real node processes — each outcome read back through GetCommitment — flags refused
//! before anything is sent, and README.md's by-hand walk between two nodes run exactly as
//! written (its shell blocks), so the README cannot drift from the CLI.

use accord_proto::pb::work::v1::GetCommitmentRequest;
use accord_tests::{TestNode, bin_dir, eventually, first_line, run_bin, tls_channel, wait_serving};
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `accordctl work declare <args> <credentials of p> --output json`: (exit code, JSON answer).
fn declare(node: &TestNode, p: &str, args: &[&str]) -> (i32, Value) {
    let mut v: Vec<String> = ["work", "declare"].iter().map(|s| s.to_string()).collect();
    v.extend(args.iter().map(|s| s.to_string()));
    v.extend(node.cli_party(p));
    v.extend(["--output".into(), "json".into()]);
    let refs: Vec<&str> = v.iter().map(String::as_str).collect();
    let (code, out, err) = run_bin("accordctl", &refs, None).expect("accordctl runs");
    let doc = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out} / {err}"));
    (code, doc)
}

/// Declares and expects the kernel to have applied it (exit 0).
fn applied(node: &TestNode, p: &str, args: &[&str]) -> Value {
    let (code, doc) = declare(node, p, args);
    assert_eq!(code, 0, "{args:?}: {doc}");
    assert_eq!(doc["outcome"], "applied", "{args:?}: {doc}");
    assert_eq!(doc["applied"], true);
    assert_eq!(doc["durability"], "recorded");
    assert_eq!(doc["record_id"].as_str().map(str::len), Some(64), "{doc}");
    doc
}

async fn commitment(
    node: &TestNode,
    id: &str,
) -> Option<accord_proto::pb::work::v1::GetCommitmentResponse> {
    node.work()
        .await
        .ok()?
        .get_commitment(GetCommitmentRequest {
            commitment_id: id.into(),
        })
        .await
        .ok()
        .map(|r| r.into_inner())
}

fn who(p: &Option<accord_proto::pb::record::v1::PartyRef>) -> String {
    p.as_ref()
        .map(|p| format!("{}/{}", p.organisation, p.name))
        .unwrap_or_default()
}

/// Request → promise → state → accept by two parties of one node, each answered `applied` and
/// read back through GetCommitment; then a record the kernel rejects: recorded, exit 3, the
/// code and its meaning as the README's table gives them.
#[tokio::test(flavor = "multi_thread")]
async fn parties_declare_the_core_operations() {
    let node = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .start()
        .await
        .unwrap();
    let r = applied(
        &node,
        "alice",
        &[
            "request",
            "deal-1",
            "--candidate",
            "acme/bob",
            "--title",
            "Translate the manual",
            "--due",
            "+7d",
        ],
    );
    assert_eq!(r["operation"], "request");
    assert_eq!(r["commitment"], "deal-1");
    let c = commitment(&node, "deal-1").await.expect("deal-1 exists");
    // Seed 000: request → requested; the next move is the candidate obligor's.
    assert_eq!(c.state, "requested");
    assert_eq!(who(&c.obligee), "acme/alice");

    applied(&node, "bob", &["promise", "deal-1"]);
    let c = commitment(&node, "deal-1").await.unwrap();
    assert_eq!(
        (c.state.as_str(), who(&c.obligor)),
        ("promised", "acme/bob".into())
    );

    applied(
        &node,
        "bob",
        &["state", "deal-1", "--fulfillment-ref", "manual-en.pdf"],
    );
    assert_eq!(commitment(&node, "deal-1").await.unwrap().state, "stated");

    let acc = applied(&node, "alice", &["accept", "deal-1"]);
    let c = commitment(&node, "deal-1").await.unwrap();
    assert_eq!((c.state.as_str(), c.terminal), ("accepted", true));
    assert_eq!(who(&c.obligor), "acme/bob");
    assert_eq!(
        c.history.last().map(|h| hex::encode(&h.record_id)),
        acc["record_id"].as_str().map(str::to_string)
    );

    // "A terminal state never changes": a second statement is recorded and rejected.
    let (code, doc) = declare(
        &node,
        "bob",
        &["state", "deal-1", "--fulfillment-ref", "v2"],
    );
    assert_eq!(code, 3, "{doc}");
    assert_eq!(doc["outcome"], "rejected");
    assert_eq!(doc["applied"], false);
    assert_eq!(doc["rejection_code"], "terminal_state");
    assert_eq!(
        doc["meaning"],
        "An item acted on is in a terminal state, which never changes."
    );
    let c = commitment(&node, "deal-1").await.unwrap();
    assert_eq!(c.state, "accepted");
    let last = c.history.last().unwrap();
    assert_eq!(
        (
            hex::encode(&last.record_id),
            last.outcome.as_ref().unwrap().applied
        ),
        (doc["record_id"].as_str().unwrap().to_string(), false)
    );

    // The table form says the same for people.
    let mut args: Vec<String> = ["work", "declare", "release", "deal-1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(node.cli_party("alice"));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, _) = run_bin("accordctl", &refs, None).unwrap();
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("outcome:") && out.contains("rejected"),
        "{out}"
    );
    assert!(out.contains("terminal_state"), "{out}");
}

/// Bad flags are refused before sending: exit 2, the flag named with a machine-readable
/// reason, and the commitment unchanged.
#[tokio::test(flavor = "multi_thread")]
async fn bad_flags_are_named_and_nothing_is_sent() {
    let node = TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .start()
        .await
        .unwrap();
    applied(
        &node,
        "alice",
        &[
            "request",
            "deal-2",
            "--candidate",
            "acme/bob",
            "--title",
            "x",
        ],
    );
    let before = commitment(&node, "deal-2").await.unwrap().history.len();
    for (args, flag, reason) in [
        (
            vec!["decline", "deal-2", "--reason", "busy"],
            "--reason",
            "unknown_value",
        ),
        (vec!["decline", "deal-2"], "--reason", "missing_flag"),
        (vec!["state", "deal-2"], "--fulfillment-ref", "missing_flag"),
        (
            vec!["offer", "deal-2", "--to", "bob"],
            "--to",
            "invalid_party",
        ),
        (
            vec!["accept_counter", "deal-2", "--counter-digest", "abc"],
            "--counter-digest",
            "invalid_record_id",
        ),
        (
            vec!["defer", "deal-2", "--reason", "r", "--return", "next week"],
            "--return",
            "invalid_time",
        ),
    ] {
        let (code, doc) = declare(&node, "bob", &args);
        assert_eq!(code, 2, "{args:?}: {doc}");
        assert_eq!(doc["error"], "invalid_flag", "{doc}");
        assert_eq!(
            (doc["flag"].as_str(), doc["reason"].as_str()),
            (Some(flag), Some(reason)),
            "{args:?}: {doc}"
        );
    }
    let c = commitment(&node, "deal-2").await.unwrap();
    assert_eq!((c.history.len(), c.state.as_str()), (before, "requested"));
}

/// The fenced block after `<!-- by-hand:NAME -->` in README.md, its lines joined.
fn readme_block(name: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let marker = format!("<!-- by-hand:{name} -->");
    let after = readme
        .split_once(&marker)
        .unwrap_or_else(|| panic!("README.md has no {marker}"))
        .1;
    let body = after
        .split_once("```sh\n")
        .and_then(|(_, b)| b.split_once("\n```"))
        .unwrap_or_else(|| panic!("no sh block after {marker}"))
        .0;
    body.to_string()
}

/// A free port on 127.0.0.1 (bound, then released for the node to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

struct Killed(Vec<Child>);
impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// README.md's by-hand walk, run as written: `init` both nodes, `serve` each (as its own
/// process, as in its own terminal), then the walk — peers, request as alice, promise and state
/// as bob at the other node, accept as alice — with bash, on the binaries under test. The
/// commitment is then read back at both nodes: accepted, bob the obligor.
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_walk_runs_as_written() {
    let (acme_port, globex_port) = (free_port(), free_port());
    let ports = |s: String| {
        s.replace("127.0.0.1:7443", &format!("127.0.0.1:{acme_port}"))
            .replace("127.0.0.1:7543", &format!("127.0.0.1:{globex_port}"))
    };
    let tmp = tempfile::tempdir().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    accord_tests::ensure_fresh_bins();
    let bash = |script: String| {
        Command::new("timeout")
            .args(["300", "bash", "-eu", "-c", &script])
            .current_dir(tmp.path())
            .env("PATH", &path)
            .output()
            .expect("bash runs")
    };
    let out = bash(ports(readme_block("init")));
    assert!(
        out.status.success(),
        "init block: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut servers = Killed(Vec::new());
    for line in ports(readme_block("serve"))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let mut child = Command::new("bash")
            .args(["-c", &format!("exec {line}")])
            .current_dir(tmp.path())
            .env("PATH", &path)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let first = first_line(&mut child, Duration::from_secs(60)).unwrap();
        servers.0.push(child);
        let addr = first
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("{line}: first line {first:?}"));
        let dir = if line.contains("acme/") {
            "acme"
        } else {
            "globex"
        };
        let ca = std::fs::read(tmp.path().join(dir).join("tls/ca.pem")).unwrap();
        wait_serving(tls_channel(addr.parse().unwrap(), &ca, None).await.unwrap())
            .await
            .unwrap();
    }

    let out = bash(ports(readme_block("walk")));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "walk: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every declaration printed `applied`: request, promise, state, accept.
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("outcome:")).count(),
        4,
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .filter(|l| l.starts_with("outcome:"))
            .all(|l| l.ends_with("applied")),
        "{stdout}"
    );

    // Read back at both nodes with the operators' tokens: one truth.
    for (dir, port) in [("acme", acme_port), ("globex", globex_port)] {
        let ca = std::fs::read(tmp.path().join(dir).join("tls/ca.pem")).unwrap();
        let token = std::fs::read_to_string(tmp.path().join(dir).join("admin.token")).unwrap();
        let addr = format!("127.0.0.1:{port}").parse().unwrap();
        let c = eventually(Duration::from_secs(60), || {
            let ca = ca.clone();
            let token = token.clone();
            async move {
                let ch = tls_channel(addr, &ca, None).await.ok()?;
                let c = accord_tests::work_client(ch, &token)
                    .get_commitment(GetCommitmentRequest {
                        commitment_id: "deal-1".into(),
                    })
                    .await
                    .ok()?
                    .into_inner();
                (c.state == "accepted").then_some(c)
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert_eq!(who(&c.obligee), "acme/alice", "{dir}");
        assert_eq!(who(&c.obligor), "globex/bob", "{dir}");
        assert!(c.terminal);
    }
}
