//! Issue 28 item 4, what operators look at: the Prometheus alerting rules
//! (`deploy/prometheus/alerts.yml`) pass `promtool check rules` and their unit tests
//! (`alerts.test.yml`: each alert fires when it should and not otherwise), the example Prometheus
//! config passes `promtool check config`, every query of the Grafana dashboard
//! (`deploy/grafana/accord.json`) is PromQL that promtool parses and each alert's series has a
//! panel, and every series these files name is one that a real node or witness serves on
//! `/metrics` — scraped from a node with a live witness, a dead witness, an unreachable peer and
//! a refused call, so that every labelled family has a sample.

use accord_proto::pb::federation::v1::{DeliverRequest, federation_service_client};
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1::DeclareRequest;
use accord_tests::metrics::{
    WitnessOf, metrics_on, scrape, scrape_text, series_names, serve_node, serve_witness_of, value,
};
use accord_tests::{TestNode, eventually, run_bin};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn deploy(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(p)
}

fn read(p: &str) -> String {
    std::fs::read_to_string(deploy(p)).unwrap_or_else(|e| panic!("deploy/{p}: {e}"))
}

/// Runs `promtool ARGS`; fails the test with promtool's output unless it succeeds.
fn promtool(args: &[&str]) {
    let out = Command::new("promtool")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}): install Debian's `prometheus` package (scripts/ensure-deps.sh does)")
        });
    assert!(
        out.status.success(),
        "promtool {} failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every `accord_*` identifier in `text` (series names; alert names are CamelCase).
fn accord_names(text: &str) -> BTreeSet<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("accord_") {
        if text[..i].chars().next_back().is_some_and(ident) {
            continue;
        }
        let end = text[i..].find(|c| !ident(c)).map_or(text.len(), |n| i + n);
        out.insert(text[i..end].to_string());
    }
    out
}

/// The alerting rules: (alert name, expression).
fn alerts() -> Vec<(String, String)> {
    let doc: serde_yaml::Value = serde_yaml::from_str(&read("prometheus/alerts.yml")).unwrap();
    let mut out = Vec::new();
    for g in doc["groups"].as_sequence().expect("groups") {
        for r in g["rules"].as_sequence().expect("rules") {
            out.push((
                r["alert"].as_str().expect("alert name").to_string(),
                r["expr"].as_str().expect("expr").to_string(),
            ));
        }
    }
    out
}

/// The dashboard's panels: (title, query expressions).
fn panels() -> Vec<(String, Vec<String>)> {
    let dash: serde_json::Value = serde_json::from_str(&read("grafana/accord.json"))
        .expect("deploy/grafana/accord.json is JSON");
    dash["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .map(|p| {
            let title = p["title"].as_str().expect("panel title").to_string();
            let exprs: Vec<String> = p["targets"]
                .as_array()
                .unwrap_or_else(|| panic!("panel {title:?} has no targets"))
                .iter()
                .map(|t| t["expr"].as_str().expect("target expr").to_string())
                .collect();
            assert!(!exprs.is_empty(), "panel {title:?} has no query");
            (title, exprs)
        })
        .collect()
}

#[test]
fn rules_pass_promtool_and_their_unit_tests() {
    for f in ["alerts.yml", "alerts.test.yml", "prometheus.yml"] {
        assert!(
            deploy("prometheus").join(f).exists(),
            "deploy/prometheus/{f}"
        );
    }
    let dir = deploy("prometheus");
    let dir = dir.to_str().unwrap();
    promtool(&["check", "rules", &format!("{dir}/alerts.yml")]);
    promtool(&["test", "rules", &format!("{dir}/alerts.test.yml")]);
    promtool(&["check", "config", &format!("{dir}/prometheus.yml")]);
    // The unit tests exercise every alert.
    let tests = read("prometheus/alerts.test.yml");
    for (alert, _) in alerts() {
        assert!(
            tests.contains(&format!("alertname: {alert}\n")),
            "alerts.test.yml has no test of {alert}"
        );
    }
}

#[test]
fn dashboard_queries_parse_and_every_alert_has_a_panel() {
    let panels = panels();
    // promtool parses every query as a recording rule's expression (the dashboard's variable
    // `$instance` becomes a regex matching all).
    let rules: Vec<serde_json::Value> = panels
        .iter()
        .enumerate()
        .flat_map(|(i, (_, exprs))| {
            exprs.iter().enumerate().map(move |(j, e)| {
                serde_json::json!({
                    "record": format!("dashboard:panel_{i}_{j}"),
                    "expr": e.replace("$instance", ".*"),
                })
            })
        })
        .collect();
    let file = serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]});
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("dashboard-queries.yml");
    std::fs::write(&path, serde_yaml::to_string(&file).unwrap()).unwrap();
    promtool(&["check", "rules", path.to_str().unwrap()]);

    // A panel per concern: each alert's series are shown by some panel.
    for (alert, expr) in alerts() {
        let series = accord_names(&expr);
        if series.is_empty() {
            continue; // AccordTargetDown: Prometheus's own `up`.
        }
        assert!(
            panels
                .iter()
                .any(|(_, exprs)| exprs.iter().any(|e| !accord_names(e).is_disjoint(&series))),
            "no dashboard panel shows {series:?} (alert {alert})"
        );
    }
}

/// A request by alice for `candidate`, declared through the node (which signs it).
fn request(commitment: &str, candidate: (&str, &str)) -> Record {
    Record {
        commitment_id: commitment.into(),
        operation: Some(Operation::Request(rec::Request {
            candidate: Some(PartyRef {
                organisation: candidate.0.into(),
                name: candidate.1.into(),
            }),
            terms: Some(rec::Terms {
                title: "metrics".into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_series_named_is_served_by_a_node_or_a_witness() {
    let mut node = TestNode::builder("acme")
        .party("alice")
        .config(|t, _| metrics_on(t))
        .init()
        .unwrap();

    // A witness of acme's log, metrics on.
    let tmp = tempfile::tempdir().unwrap();
    let wdir = tmp.path().join("w");
    let WitnessOf {
        proc: _witness,
        vkey: wvkey,
        grpc: wgrpc,
        metrics: wmetrics,
    } = serve_witness_of(&node, &wdir).unwrap();

    // The node needs that witness (k = 1) and lists a second one nobody runs (a closed port),
    // whose cosignature failures it counts.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_addr = closed.local_addr().unwrap();
    drop(closed);
    let (code, dead_vkey, err) = run_bin(
        "accordctl",
        &["key", "generate", "--name", "dead.example", "--cosigner"],
        None,
    )
    .unwrap();
    assert_eq!(code, 0, "{err}");
    let dead_vkey = dead_vkey.lines().next().unwrap().to_string();
    let wca = wdir.join("tls/ca.pem");
    node.edit_config(|t| {
        *t = t.replace("k = 0", "k = 1");
        t.push_str(&format!(
            "\n[[witnesses.list]]\nvkey = \"{wvkey}\"\nendpoint = \"https://{wgrpc}\"\nca = \"{0}\"\n\n[[witnesses.list]]\nvkey = \"{dead_vkey}\"\nendpoint = \"https://{closed_addr}\"\nca = \"{0}\"\n",
            wca.display()
        ));
    })
    .unwrap();
    let (_node, nmetrics) = serve_node(&mut node).await.unwrap();

    // A peer that is not there (its node initialised, never started; the closed port): its
    // queue, breaker and oldest queued record are served.
    let globex = TestNode::builder("globex").party("bob").init().unwrap();
    let mut peer = globex.as_peer();
    peer.endpoint = format!("https://{closed_addr}");
    node.admin()
        .await
        .unwrap()
        .add_peer(
            node.admin_request(accord_proto::pb::admin::v1::AddPeerRequest { peer: Some(peer) }),
        )
        .await
        .unwrap();
    // A record for the peer's party (queued for it), checkpointed and witnessed here.
    let declared = node
        .work_party("alice")
        .await
        .unwrap()
        .declare(DeclareRequest {
            record: Some(request("alerts-1", ("globex", "bob"))),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(declared.outcome.unwrap().applied);
    // A refused call: Deliver without a client certificate.
    let refused =
        federation_service_client::FederationServiceClient::new(node.channel().await.unwrap())
            .deliver(DeliverRequest::default())
            .await
            .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");

    // Wait until every labelled family has had its event: witnessed by w.example (its 200
    // counted), a failure from dead.example, the refusal, the peer's queue.
    let (node_text, witness_text) = eventually(Duration::from_secs(60), || async move {
        // A scrape that fails fails the wait with its cause; a family not there yet is retried.
        let (n, w) = (scrape(nmetrics)?, scrape(wmetrics)?);
        let at_least_one = |s: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]| {
            value(s, name, labels).is_some_and(|v| v >= 1.0)
        };
        let ready = at_least_one(&n, "accord_log_witnessed_size", &[])
            && at_least_one(
                &n,
                "accord_witness_cosignature_failures_total",
                &[("witness", "dead.example")],
            )
            && at_least_one(&n, "accord_federation_refusals_total", &[])
            && at_least_one(&n, "accord_federation_queue_depth", &[("peer", "globex")])
            && at_least_one(
                &w,
                "accord_witness_add_checkpoint_total",
                &[("status", "200")],
            );
        if !ready {
            return anyhow::Ok(None);
        }
        anyhow::Ok(Some((scrape_text(nmetrics)?, scrape_text(wmetrics)?)))
    })
    .await
    .expect("the node and the witness serve every family after their events");
    let served: BTreeSet<String> = series_names(&node_text)
        .union(&series_names(&witness_text))
        .cloned()
        .collect();

    for file in [
        "prometheus/alerts.yml",
        "prometheus/alerts.test.yml",
        "grafana/accord.json",
    ] {
        let named = accord_names(&read(file));
        assert!(!named.is_empty(), "deploy/{file} names no accord_ series");
        let missing: Vec<&String> = named.difference(&served).collect();
        assert!(
            missing.is_empty(),
            "deploy/{file} names series that neither the node nor the witness serves: {missing:?}\nserved: {served:?}"
        );
    }
}
