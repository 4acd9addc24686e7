//! Prometheus metrics of real processes: start a node or witness with `metrics_listen` on an
//! ephemeral port, read the address it prints, scrape `GET /metrics` (raw text or parsed with
//! `prometheus-parse`). Shared by `tests/tests/metrics.rs` and `tests/tests/operator_alerts.rs`.

use crate::{TestNode, bin, wait_serving};
use anyhow::{Context, Result, anyhow};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A process started by [`serve`]; killed on drop.
pub struct Served(Child);

impl Served {
    /// The process (to signal or wait for it).
    pub fn child(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin serve --config cfg`; returns the process and its first two stdout lines
/// (`listening ...`, `metrics ADDR`), read as they are printed (no sleeps).
pub fn serve(bin_name: &str, cfg: &Path) -> Result<(Served, String, SocketAddr)> {
    let mut child = Command::new(bin(bin_name))
        .args(["serve", "--config"])
        .arg(cfg)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().context("stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        for _ in 0..2 {
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            let _ = tx.send(line.trim().to_string());
        }
        let mut sink = String::new();
        while r.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
            sink.clear();
        }
    });
    let proc = Served(child);
    let first = rx.recv_timeout(Duration::from_secs(60))?;
    let second = rx.recv_timeout(Duration::from_secs(60))?;
    let metrics = second
        .strip_prefix("metrics ")
        .ok_or_else(|| anyhow!("expected `metrics ADDR` as the second line, got {second:?}"))?
        .parse()?;
    Ok((proc, first, metrics))
}

/// Starts an initialised [`TestNode`]'s process with metrics on ([`metrics_on`] in its config);
/// sets its gRPC address and waits until it serves. Returns the process and the metrics address.
pub async fn serve_node(node: &mut TestNode) -> Result<(Served, SocketAddr)> {
    let (p, first, metrics) = serve("accord-node", &node.dir.join("accord.toml"))?;
    node.addr = first
        .strip_prefix("listening ")
        .ok_or_else(|| anyhow!("unexpected first line {first:?}"))?
        .parse()?;
    wait_serving(node.channel().await?).await?;
    Ok((p, metrics))
}

/// Turns metrics on, on an ephemeral port, in the config text `init` wrote (a node's or a
/// witness's: each has its commented `metrics_listen` line).
pub fn metrics_on(text: &mut String) {
    for commented in [
        "# metrics_listen = \"127.0.0.1:9464\"",
        "# metrics_listen = \"127.0.0.1:9465\"",
    ] {
        *text = text.replace(commented, "metrics_listen = \"127.0.0.1:0\"");
    }
    assert!(
        text.contains("\nmetrics_listen = "),
        "init's config has the metrics line"
    );
}

/// A witness serving with metrics on, trusting `node`'s log ([`serve_witness_of`]).
pub struct WitnessOf {
    /// The process (killed on drop).
    pub proc: Served,
    /// Its vkey (as `accord-witness init` printed it).
    pub vkey: String,
    /// Its gRPC address (`host:port`).
    pub grpc: String,
    /// Its metrics address.
    pub metrics: SocketAddr,
}

/// Initialises a witness named `w.example` in `dir` (ephemeral ports, metrics on) that
/// co-signs `node`'s log, and starts it.
pub fn serve_witness_of(node: &TestNode, dir: &Path) -> Result<WitnessOf> {
    let vkey = crate::witness_init(dir, "w.example")?;
    let cfg = dir.join("witness.toml");
    let mut text = std::fs::read_to_string(&cfg)?;
    metrics_on(&mut text);
    text.push_str(&format!(
        "\n[[logs]]\norigin = \"{}\"\nvkeys = [\"{}\"]\n",
        node.origin(),
        node.vkey()
    ));
    std::fs::write(&cfg, text)?;
    let (proc, first, metrics) = serve("accord-witness", &cfg)?;
    let grpc = first
        .split_whitespace()
        .find_map(|p| p.strip_prefix("grpc="))
        .ok_or_else(|| anyhow!("no grpc= in {first:?}"))?
        .to_string();
    Ok(WitnessOf {
        proc,
        vkey,
        grpc,
        metrics,
    })
}

/// `GET /metrics` over plain HTTP/1.1: the Prometheus text, after checking the status and the
/// content type.
pub fn scrape_text(addr: SocketAddr) -> Result<String> {
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("no HTTP header end"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(anyhow!("scrape answered {head:?}"));
    }
    if !head
        .to_lowercase()
        .contains("content-type: text/plain; version=0.0.4")
    {
        return Err(anyhow!("not the Prometheus text format: {head}"));
    }
    Ok(body.to_string())
}

/// `GET /metrics`, parsed with `prometheus-parse`.
pub fn scrape(addr: SocketAddr) -> Result<prometheus_parse::Scrape> {
    let body = scrape_text(addr)?;
    let lines = body.lines().map(|l| Ok(l.to_string()));
    Ok(prometheus_parse::Scrape::parse(lines)?)
}

/// The value of the sample `name` whose labels include `labels` (None when absent).
pub fn value(s: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    use prometheus_parse::Value;
    s.samples
        .iter()
        .filter(|x| x.metric == name)
        .find(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .and_then(|x| match &x.value {
            // A histogram's `_sum` and `_count` lines are untyped samples of their own.
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(*v),
            _ => None,
        })
}

/// Every series name in a Prometheus text exposition, as a query names it: each sample line's
/// metric name (a histogram's `_bucket`, `_sum` and `_count` included).
pub fn series_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}
