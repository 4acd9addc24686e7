//! Test harness for end-to-end scenarios: real `accord-node` and `accord-witness` processes on
//! ephemeral ports (`127.0.0.1:0`), each in its own temporary directory that is removed — and
//! its process killed — when the handle is dropped.
//!
//! Readiness is observed, never slept for: a process prints `listening ...` as its first stdout
//! line once its port is bound, and a gRPC health check over TLS answers once it serves.
#![forbid(unsafe_code)]

use anyhow::{Context, Result, anyhow};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

pub mod envelopes;
mod inproc;
pub mod metrics;
pub mod pg;
pub mod records;
pub use inproc::InProc;

/// The directory holding the workspace's binaries (next to the test executable's `deps/`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().expect("deps dir");
    if dir.ends_with("deps") {
        dir.parent().expect("target dir").to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// Path of a workspace binary, built from the current sources: `scripts/test.sh` builds them
/// before the tests run, and a plain `cargo test` rebuilds them here once per test process
/// when any is missing or older than a source file ([`ensure_fresh_bins`]), so an end-to-end
/// test never runs a stale binary.
pub fn bin(name: &str) -> PathBuf {
    ensure_fresh_bins();
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} not built: run `cargo build --workspace --bins` (scripts/test.sh does)",
        p.display()
    );
    p
}

/// The binaries the end-to-end tests spawn.
const BINS: [&str; 3] = ["accord-node", "accord-witness", "accordctl"];

/// The newest modification time among the sources the binaries are built from: `.rs` and
/// `.proto` files of `proto/`, `node/`, `witness/` and `tools/` outside their `tests/` dirs.
fn newest_source() -> std::time::SystemTime {
    fn walk(dir: &Path, newest: &mut std::time::SystemTime) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if !matches!(
                    e.file_name().to_str(),
                    Some("target" | "tests" | "benches" | "examples")
                ) {
                    walk(&p, newest);
                }
            } else if p.extension().is_some_and(|x| x == "rs" || x == "proto")
                && let Ok(m) = e.metadata().and_then(|m| m.modified())
            {
                *newest = (*newest).max(m);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut newest = std::time::SystemTime::UNIX_EPOCH;
    for d in ["proto", "node", "witness", "tools"] {
        walk(&root.join(d), &mut newest);
    }
    newest
}

/// The binaries that are missing or older than the newest source.
fn stale_bins() -> Vec<&'static str> {
    let newest = newest_source();
    BINS.iter()
        .filter(|b| {
            std::fs::metadata(bin_dir().join(b))
                .and_then(|m| m.modified())
                .map_or(true, |t| t < newest)
        })
        .copied()
        .collect()
}

/// Makes sure the binaries the tests spawn were built from the current sources: if any is
/// missing or older than a source file, runs `cargo build` for them (in the profile of this
/// test executable) once per test process; cargo's fingerprints then decide what to rebuild.
/// Fails the test when the build fails.
pub fn ensure_fresh_bins() {
    static FRESH: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let r = FRESH.get_or_init(|| {
        if stale_bins().is_empty() {
            return Ok(());
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
            // Exactly scripts/test.sh's build, so features resolve the same and nothing is
            // rebuilt twice.
            .args(["build", "--workspace", "--bins"]);
        // `cargo test` runs this process with the test crate's own `CARGO_PKG_*`,
        // `CARGO_MANIFEST_*`… in its environment. Build scripts that declare
        // `rerun-if-env-changed` on those names (ring's does) would see them changed from the
        // last plain `cargo build` and rebuild the whole TLS stack and everything above it —
        // twice, since the next plain build changes them back.
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("CARGO_PKG_")
                || k.starts_with("CARGO_MANIFEST_")
                || k.starts_with("CARGO_BIN_")
                || matches!(
                    k.as_ref(),
                    "CARGO_CRATE_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                        | "CARGO_TARGET_TMPDIR"
                        | "CARGO_RUSTC_CURRENT_DIR"
                        | "OUT_DIR"
                )
            {
                cmd.env_remove(k.as_ref());
            }
        }
        if bin_dir().ends_with("release") {
            cmd.arg("--release");
        }
        let st = cmd
            .status()
            .map_err(|e| format!("cannot run cargo build: {e}"))?;
        if st.success() {
            Ok(())
        } else {
            Err(format!("cargo build of the test binaries failed: {st}"))
        }
    });
    if let Err(e) = r {
        panic!("{e}");
    }
}

/// Reads the first stdout line (`listening ...`) of a child, with a timeout.
pub fn first_line(child: &mut Child, timeout: Duration) -> Result<String> {
    let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut line = String::new();
        let _ = r.read_line(&mut line);
        let _ = tx.send(line);
        // Keep draining so the child never blocks on a full pipe.
        let mut sink = String::new();
        while r.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
            sink.clear();
        }
    });
    let line = rx
        .recv_timeout(timeout)
        .context("process did not print its listening line in time")?;
    if line.is_empty() {
        return Err(anyhow!("process exited before listening"));
    }
    Ok(line.trim().to_string())
}

/// A TLS channel to a server whose CA is `ca_pem`, optionally with a client identity.
pub async fn tls_channel(
    addr: SocketAddr,
    ca_pem: &[u8],
    identity: Option<(Vec<u8>, Vec<u8>)>,
) -> Result<Channel> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name("localhost");
    if let Some((c, k)) = identity {
        tls = tls.identity(Identity::from_pem(c, k));
    }
    Ok(Endpoint::from_shared(format!("https://{addr}"))?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .connect()
        .await?)
}

/// Waits until the gRPC health service reports SERVING. A server that answers NOT_SERVING — an
/// instance on PostgreSQL that is a standby until it takes the writer's lease (issue 31) — is
/// asked again every 20 ms for up to 60 s, and a check refused by the standby's closing
/// connection ([`closed_under`]) is sent again; any other answer or error ends the wait at once.
pub async fn wait_serving(ch: Channel) -> Result<()> {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    let mut c = HealthClient::new(ch);
    let started = std::time::Instant::now();
    loop {
        let r = match c
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
        {
            Ok(r) => r.into_inner(),
            // An instance on PostgreSQL answers as a standby until it holds the lease, then
            // closes the standby's connections (HTTP/2 GOAWAY): a check sent on one as it
            // closes is refused unprocessed, and the next check reconnects to the node.
            Err(e) if closed_under(&e) && started.elapsed() < Duration::from_secs(60) => {
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match r.status() {
            ServingStatus::Serving => return Ok(()),
            ServingStatus::NotServing if started.elapsed() < Duration::from_secs(60) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            s => return Err(anyhow!("health: {s:?}")),
        }
    }
}

/// Whether a call failed because the server closed its connection under it, as a standby's
/// server does at the instance's switch to the writer: an HTTP/2 GOAWAY refused the call, or
/// the connection closed before it was answered (hyper's "operation was canceled: connection
/// closed"). Only for calls that may be sent again (a health check, an idempotent submit).
pub fn closed_under(e: &tonic::Status) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h2) = s.downcast_ref::<h2::Error>() {
            return h2.is_go_away();
        }
        // Not a canceled hyper error: its source may still be the h2 GOAWAY.
        if let Some(h) = s.downcast_ref::<hyper::Error>()
            && h.is_canceled()
        {
            return true;
        }
        source = s.source();
    }
    false
}

/// A running `accord-node` process in a temporary directory.
pub struct TestNode {
    /// The organisation name.
    pub name: String,
    /// The node directory (from `accord-node init`).
    pub dir: PathBuf,
    /// The bound gRPC address.
    pub addr: SocketAddr,
    child: Option<Child>,
    /// When started in this process ([`TestNodeBuilder::start_with_clock`]).
    inproc: Option<InProc>,
    _tmp: Option<tempfile::TempDir>,
}

/// An edit of a node's config text, given the node directory.
type ConfigEdit = Box<dyn FnOnce(&mut String, &Path)>;

/// Builds a [`TestNode`].
pub struct TestNodeBuilder {
    name: String,
    parties: Vec<String>,
    edits: Vec<ConfigEdit>,
}

impl TestNodeBuilder {
    /// Adds a party (key and token under `parties/`).
    pub fn party(mut self, p: &str) -> Self {
        self.parties.push(p.into());
        self
    }

    /// Edits the generated config text before the first start (given the node dir).
    pub fn config(mut self, f: impl FnOnce(&mut String, &Path) + 'static) -> Self {
        self.edits.push(Box::new(f));
        self
    }

    /// Runs `accord-node init`, applies the edits and starts the node.
    pub async fn start(self) -> Result<TestNode> {
        let mut n = self.init()?;
        n.spawn().await?;
        Ok(n)
    }

    /// Runs `accord-node init` and applies the edits, without starting the node (so that its
    /// keys can be given to witnesses or peers first; then [`TestNode::spawn`]).
    pub fn init(self) -> Result<TestNode> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join(&self.name);
        let mut cmd = Command::new(bin("accord-node"));
        cmd.args(["init", "--dir"]).arg(&dir).args([
            "--name",
            &self.name,
            "--listen",
            "127.0.0.1:0",
        ]);
        for p in &self.parties {
            cmd.args(["--party", p]);
        }
        let out = cmd.output()?;
        if !out.status.success() {
            return Err(anyhow!(
                "init failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let cfg = dir.join("accord.toml");
        let mut text = std::fs::read_to_string(&cfg)?;
        for e in self.edits {
            e(&mut text, &dir);
        }
        std::fs::write(&cfg, text)?;
        Ok(TestNode {
            name: self.name,
            dir,
            addr: "127.0.0.1:0".parse()?,
            child: None,
            inproc: None,
            _tmp: Some(tmp),
        })
    }
}

impl TestNode {
    /// A builder for a node of organisation `name`.
    pub fn builder(name: &str) -> TestNodeBuilder {
        TestNodeBuilder {
            name: name.into(),
            parties: Vec::new(),
            edits: Vec::new(),
        }
    }

    /// Starts the process (after `init`, or again after a stop), pinning the port it got first so
    /// that peers configured with it still reach it after a restart.
    pub async fn spawn(&mut self) -> Result<()> {
        self.spawn_limited(None).await
    }

    /// [`TestNode::spawn`] with the process's file-size limit (RLIMIT_FSIZE) set to
    /// `file_size_kib` KiB and SIGXFSZ ignored, through bash's `trap '' XFSZ; ulimit -f`: once a
    /// file the node writes (RocksDB's write-ahead log first) would grow past it, the kernel
    /// refuses the write with EFBIG — a real write fault, with no switch in the node.
    pub async fn spawn_with_file_size_limit(&mut self, file_size_kib: u64) -> Result<()> {
        self.spawn_limited(Some(file_size_kib)).await
    }

    async fn spawn_limited(&mut self, file_size_kib: Option<u64>) -> Result<()> {
        let cfg = self.dir.join("accord.toml");
        if self.addr.port() != 0 {
            let text = std::fs::read_to_string(&cfg)?;
            let text = text
                .lines()
                .map(|l| {
                    if l.starts_with("listen = ") {
                        format!("listen = \"{}\"", self.addr)
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            std::fs::write(&cfg, text + "\n")?;
        }
        let mut cmd = match file_size_kib {
            None => Command::new(bin("accord-node")),
            Some(kib) => {
                // bash: its `ulimit -f` counts 1024-byte blocks (dash counts 512). An ignored
                // signal stays ignored across exec, so the write fails with EFBIG instead of
                // the process being killed by SIGXFSZ.
                let mut c = Command::new("bash");
                c.arg("-c")
                    .arg(format!(
                        "trap '' XFSZ; ulimit -f {kib} && exec \"$0\" \"$@\""
                    ))
                    .arg(bin("accord-node"));
                c
            }
        };
        let mut child = cmd
            .args(["serve", "--config"])
            .arg(&cfg)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let line = first_line(&mut child, Duration::from_secs(60))?;
        let addr = line
            .strip_prefix("listening ")
            .ok_or_else(|| anyhow!("unexpected first line {line:?}"))?;
        self.addr = addr.parse()?;
        self.child = Some(child);
        wait_serving(self.channel().await?).await?;
        Ok(())
    }

    /// Trusts the witnesses of `entries` ([`TestWitness::node_config_entry`]) with `k` of them
    /// required for a checkpoint to be witnessed (the config `init` wrote has none and `k = 0`).
    pub fn trust_witnesses(&self, k: usize, entries: &[String]) -> Result<()> {
        self.edit_config(|t| {
            *t = t.replace(
                "[witnesses]\n# A record is witnessed once a checkpoint that includes it has k valid cosignatures.\nk = 0",
                &format!("[witnesses]\nk = {k}"),
            );
            for e in entries {
                t.push_str(e);
            }
        })
    }

    /// Restarts the process on a new ephemeral port (`127.0.0.1:0` again), for restarts that
    /// no peer needs to find at the old address: re-binding the old port can race with another
    /// test's listener taking it meanwhile.
    pub async fn respawn_on_new_port(&mut self) -> Result<()> {
        self.kill9();
        self.addr = "127.0.0.1:0".parse()?;
        self.edit_config(|t| {
            *t = t
                .lines()
                .map(|l| {
                    if l.starts_with("listen = ") {
                        "listen = \"127.0.0.1:0\"".to_string()
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n";
        })?;
        self.spawn().await
    }

    /// Edits the config file (e.g. between `init` and `spawn`, or before a restart).
    pub fn edit_config(&self, f: impl FnOnce(&mut String)) -> Result<()> {
        let cfg = self.dir.join("accord.toml");
        let mut text = std::fs::read_to_string(&cfg)?;
        f(&mut text);
        std::fs::write(&cfg, text)?;
        Ok(())
    }

    /// The log origin (`<name>.accord/log`).
    pub fn origin(&self) -> String {
        format!("{}.accord/log", self.name)
    }

    /// A TLS channel to the node (trusting its CA).
    pub async fn channel(&self) -> Result<Channel> {
        tls_channel(
            self.addr,
            &std::fs::read(self.dir.join("tls/ca.pem"))?,
            None,
        )
        .await
    }

    /// The node's CA certificate (PEM).
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("tls/ca.pem")).expect("ca.pem")
    }

    /// A party's secret key text.
    pub fn party_skey(&self, party: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("parties/{party}.skey"))).expect("party skey")
    }

    /// A party's bearer token.
    pub fn party_token(&self, party: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("parties/{party}.token")))
            .expect("party token")
    }

    /// `accordctl`'s flags to reach this node as party `p`: `--node`, `--ca` and the party's
    /// `--token-file`.
    pub fn cli_party(&self, p: &str) -> Vec<String> {
        vec![
            "--node".into(),
            format!("https://{}", self.addr),
            "--ca".into(),
            self.dir.join("tls/ca.pem").display().to_string(),
            "--token-file".into(),
            self.dir
                .join(format!("parties/{p}.token"))
                .display()
                .to_string(),
        ]
    }

    /// The operator token.
    pub fn admin_token(&self) -> String {
        std::fs::read_to_string(self.dir.join("admin.token")).expect("admin token")
    }

    /// The node's vkey.
    pub fn vkey(&self) -> String {
        std::fs::read_to_string(self.dir.join("keys/node.vkey"))
            .expect("node vkey")
            .trim()
            .to_string()
    }

    /// The node process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL: no chance to flush anything.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits (polling) for the process to exit on its own within `timeout`; its exit status,
    /// or an error naming the wait if it is still running.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        let started = std::time::Instant::now();
        loop {
            let Some(c) = self.child.as_mut() else {
                return Err(anyhow!("the node is not running"));
            };
            if let Some(st) = c.try_wait()? {
                self.child = None;
                return Ok(st);
            }
            if started.elapsed() > timeout {
                return Err(anyhow!("still running after {timeout:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM and wait for a graceful exit; returns whether it exited successfully.
    pub fn terminate(&mut self) -> Result<bool> {
        let Some(mut c) = self.child.take() else {
            return Ok(true);
        };
        let st = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()?;
        if !st.success() {
            return Err(anyhow!("kill -TERM failed"));
        }
        Ok(c.wait()?.success())
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A running `accord-witness` process in a temporary directory.
pub struct TestWitness {
    /// The witness name (its cosigner key name).
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// gRPC (TLS) address.
    pub grpc: SocketAddr,
    /// C2SP HTTP address.
    pub http: SocketAddr,
    child: Option<Child>,
    _tmp: tempfile::TempDir,
}

impl TestWitness {
    /// `accord-witness init`, configured to witness the log `origin` with `vkey`, then started.
    pub async fn start(name: &str, origin: &str, vkey: &str) -> Result<TestWitness> {
        Self::start_with(name, origin, vkey, |_| {}).await
    }

    /// [`TestWitness::start`], with `edit` applied to the config text before the first start.
    pub async fn start_with(
        name: &str,
        origin: &str,
        vkey: &str,
        edit: impl FnOnce(&mut String),
    ) -> Result<TestWitness> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("witness");
        witness_init(&dir, name)?;
        let cfg = dir.join("witness.toml");
        let mut text = std::fs::read_to_string(&cfg)?;
        text.push_str(&format!(
            "\n[[logs]]\norigin = \"{origin}\"\nvkeys = [\"{vkey}\"]\n"
        ));
        edit(&mut text);
        std::fs::write(&cfg, text)?;
        let mut w = TestWitness {
            name: name.into(),
            dir,
            grpc: "127.0.0.1:0".parse()?,
            http: "127.0.0.1:0".parse()?,
            child: None,
            _tmp: tmp,
        };
        w.spawn().await?;
        Ok(w)
    }

    /// Starts (or restarts) the process, keeping the ports it got the first time.
    pub async fn spawn(&mut self) -> Result<()> {
        let cfg = self.dir.join("witness.toml");
        if self.grpc.port() != 0 {
            let text = std::fs::read_to_string(&cfg)?;
            let (g, h) = (self.grpc, self.http);
            let mut section = String::new();
            let text = text
                .lines()
                .map(|l| {
                    if l.starts_with('[') {
                        section = l.to_string();
                    }
                    match (section.as_str(), l.starts_with("listen = ")) {
                        ("[grpc]", true) => format!("listen = \"{g}\""),
                        ("[http]", true) => format!("listen = \"{h}\""),
                        _ => l.to_string(),
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            std::fs::write(&cfg, text + "\n")?;
        }
        let mut child = Command::new(bin("accord-witness"))
            .args(["serve", "--config"])
            .arg(&cfg)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let line = first_line(&mut child, Duration::from_secs(60))?;
        let rest = line
            .strip_prefix("listening ")
            .ok_or_else(|| anyhow!("unexpected first line {line:?}"))?;
        for part in rest.split_whitespace() {
            if let Some(a) = part.strip_prefix("grpc=") {
                self.grpc = a.parse()?;
            } else if let Some(a) = part.strip_prefix("http=") {
                self.http = a.parse()?;
            }
        }
        self.child = Some(child);
        wait_serving(self.channel().await?).await?;
        Ok(())
    }

    /// Restarts the process on new ephemeral ports (for restarts no node needs to find at the
    /// old addresses).
    pub async fn respawn_on_new_ports(&mut self) -> Result<()> {
        self.kill9();
        self.grpc = "127.0.0.1:0".parse()?;
        self.http = "127.0.0.1:0".parse()?;
        let cfg = self.dir.join("witness.toml");
        let text = std::fs::read_to_string(&cfg)?;
        let text = text
            .lines()
            .map(|l| {
                if l.starts_with("listen = ") {
                    "listen = \"127.0.0.1:0\"".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(&cfg, text + "\n")?;
        self.spawn().await
    }

    /// The witness process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// A TLS channel to the witness's gRPC listener.
    pub async fn channel(&self) -> Result<Channel> {
        tls_channel(
            self.grpc,
            &std::fs::read(self.dir.join("tls/ca.pem"))?,
            None,
        )
        .await
    }

    /// The cosigner vkey.
    pub fn vkey(&self) -> String {
        std::fs::read_to_string(self.dir.join("witness.vkey"))
            .expect("witness vkey")
            .trim()
            .to_string()
    }

    /// The node config lines that add this witness to a node's policy.
    pub fn node_config_entry(&self) -> String {
        format!(
            "\n[[witnesses.list]]\nvkey = \"{}\"\nendpoint = \"https://{}\"\nca = \"{}\"\n",
            self.vkey(),
            self.grpc,
            self.dir.join("tls/ca.pem").display()
        )
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for TestWitness {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `accord-witness init` of a witness named `name` in `dir`, on ephemeral ports; returns the
/// cosigner vkey it prints. The one place a test initialises a witness.
pub fn witness_init(dir: &Path, name: &str) -> Result<String> {
    let out = Command::new(bin("accord-witness"))
        .args(["init", "--dir"])
        .arg(dir)
        .args([
            "--name",
            name,
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "accord-witness init: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

/// Runs a workspace binary to completion, returning (exit code, stdout, stderr).
pub fn run_bin(name: &str, args: &[&str], stdin: Option<&str>) -> Result<(i32, String, String)> {
    use std::io::Write;
    let mut child = Command::new(bin(name))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// One try of an [`eventually`] condition: `Some(v)` (or `Ok(Some(v))`) holds, `None` (or
/// `Ok(None)`) is "not yet" and is tried again, and an `Err` is a failure that no wait mends —
/// the wait ends at once with it as the cause.
pub trait Attempt<T> {
    fn attempt(self) -> Result<Option<T>>;
}

impl<T> Attempt<T> for Option<T> {
    fn attempt(self) -> Result<Option<T>> {
        Ok(self)
    }
}

impl<T, E: Into<anyhow::Error>> Attempt<T> for std::result::Result<Option<T>, E> {
    fn attempt(self) -> Result<Option<T>> {
        self.map_err(Into::into)
    }
}

/// Polls `f` until it holds, or fails after `timeout`. For conditions that advance in the
/// background (checkpoints, witnessing, delivery): the wait ends as soon as it holds. A
/// closure returning `Result<Option<T>, E>` fails the wait at once on `Err`, with the error
/// as the cause (a PERMISSION_DENIED is not a timeout); only `Ok(None)` is retried. Use
/// [`not_yet`] where an error code does mean "not yet".
pub async fn eventually<T, A, F, Fut>(timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = A>,
    A: Attempt<T>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut delay = Duration::from_millis(20);
    loop {
        match f().await.attempt() {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => return Err(e.context("failed while waiting (not retried)")),
        }
        if tokio::time::Instant::now() > deadline {
            return Err(anyhow!("condition not reached within {timeout:?}"));
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(250));
    }
}

/// A gRPC answer inside an [`eventually`] condition where the listed codes mean "not yet"
/// (`Ok(None)`), e.g. NOT_FOUND for a commitment that has not arrived or UNAVAILABLE while a
/// process restarts; any other error is kept, and fails the wait with its cause.
pub fn not_yet<T>(
    r: std::result::Result<tonic::Response<T>, tonic::Status>,
    codes: &[tonic::Code],
) -> std::result::Result<Option<T>, tonic::Status> {
    match r {
        Ok(r) => Ok(Some(r.into_inner())),
        Err(s) if codes.contains(&s.code()) => Ok(None),
        Err(s) => Err(s),
    }
}

/// Config lines for quick federation retries in tests (append to a node's config).
pub const FAST_FEDERATION: &str = "\n[federation]\nretry_base_ms = 50\nretry_max_ms = 1000\nbreaker_failures = 3\nreceipt_poll_ms = 200\n";

/// Federation helpers: peers are added at run time through AdminService (ports are ephemeral).
impl TestNode {
    /// An AdminService request carrying the operator token.
    pub fn admin_request<T>(&self, t: T) -> tonic::Request<T> {
        with_token(t, &self.admin_token())
    }

    /// An AdminService client.
    pub async fn admin(
        &self,
    ) -> Result<accord_proto::pb::admin::v1::admin_service_client::AdminServiceClient<Channel>>
    {
        Ok(
            accord_proto::pb::admin::v1::admin_service_client::AdminServiceClient::new(
                self.channel().await?,
            ),
        )
    }

    /// Every key that signs this organisation's records and envelopes: the node key and the
    /// keys of the parties created by `init`.
    pub fn org_vkeys(&self) -> Vec<String> {
        let mut keys = vec![self.vkey()];
        if let Ok(dir) = std::fs::read_dir(self.dir.join("parties")) {
            for e in dir.flatten() {
                if e.path().extension().is_some_and(|x| x == "skey") {
                    let text = std::fs::read_to_string(e.path()).expect("party skey");
                    let s = accord_proto::note::Signer::from_skey(text.trim())
                        .expect("party skey parses");
                    keys.push(s.verifier().to_vkey());
                }
            }
        }
        keys
    }

    /// This node as another node's peer: its name, endpoint, keys and CA.
    pub fn as_peer(&self) -> accord_proto::pb::admin::v1::Peer {
        use accord_proto::pb::admin::v1 as admin;
        admin::Peer {
            name: self.name.clone(),
            endpoint: format!("https://{}", self.addr),
            keys: self
                .org_vkeys()
                .into_iter()
                .map(|vkey| admin::PeerKey {
                    vkey,
                    valid_until_unix_ms: 0,
                })
                .collect(),
            tls_certificate_pem: String::from_utf8(self.ca_pem()).expect("pem"),
            enabled: true,
            pin_sha256: String::new(),
        }
    }

    /// Adds `other` as a peer of this node through AdminService.
    pub async fn add_peer(&self, other: &TestNode) -> Result<()> {
        let req = accord_proto::pb::admin::v1::AddPeerRequest {
            peer: Some(other.as_peer()),
        };
        self.admin()
            .await?
            .add_peer(self.admin_request(req))
            .await
            .map_err(|s| anyhow!("AddPeer: {s}"))?;
        Ok(())
    }

    /// AdminService.GetStatus (ledger size, quarantine size, each peer's delivery health).
    pub async fn status(&self) -> Result<accord_proto::pb::admin::v1::GetStatusResponse> {
        let req = accord_proto::pb::admin::v1::GetStatusRequest::default();
        Ok(self
            .admin()
            .await?
            .get_status(self.admin_request(req))
            .await
            .map_err(|s| anyhow!("GetStatus: {s}"))?
            .into_inner())
    }

    /// Enables or disables delivery to and from peer `name` (AdminService.SetPeerEnabled):
    /// while disabled, records for it wait in its queue and its envelopes are refused.
    pub async fn set_peer_enabled(&self, name: &str, enabled: bool) -> Result<()> {
        let req = accord_proto::pb::admin::v1::SetPeerEnabledRequest {
            name: name.into(),
            enabled,
        };
        self.admin()
            .await?
            .set_peer_enabled(self.admin_request(req))
            .await
            .map_err(|s| anyhow!("SetPeerEnabled: {s}"))?;
        Ok(())
    }

    /// A mutual-TLS channel to `other` with this node's own TLS identity (as its federation
    /// sender connects).
    pub async fn peer_channel(&self, other: &TestNode) -> Result<Channel> {
        let cert = std::fs::read(self.dir.join("tls/node.pem"))?;
        let key = std::fs::read(self.dir.join("tls/node.key"))?;
        tls_channel(other.addr, &other.ca_pem(), Some((cert, key))).await
    }
}

/// Makes two nodes peers of each other.
pub async fn federate(a: &TestNode, b: &TestNode) -> Result<()> {
    a.add_peer(b).await?;
    b.add_peer(a).await
}

/// Adds `authorization: Bearer <token>` to every call of a client (WorkService and LogService
/// reads need a credential). An empty token adds nothing; a request that already carries an
/// `authorization` entry keeps its own.
#[derive(Clone, Debug)]
pub struct Bearer(Option<tonic::metadata::AsciiMetadataValue>);

impl Bearer {
    /// The interceptor for `token` (whitespace around it is ignored, as in token files).
    pub fn new(token: &str) -> Bearer {
        Bearer((!token.trim().is_empty()).then(|| bearer(token)))
    }
}

/// The `authorization` value `Bearer <token>` (whitespace around the token is ignored, as in
/// token files): the one place a test writes it.
pub fn bearer(token: &str) -> tonic::metadata::AsciiMetadataValue {
    format!("Bearer {}", token.trim())
        .parse()
        .expect("token is ASCII metadata")
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        // A request that carries its own credential keeps it.
        if let Some(v) = &self.0
            && !req.metadata().contains_key("authorization")
        {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// A channel whose calls carry a bearer token.
pub type Authed = tonic::service::interceptor::InterceptedService<Channel, Bearer>;
/// A WorkService client whose calls carry a bearer token.
pub type WorkClient = accord_proto::pb::work::v1::work_service_client::WorkServiceClient<Authed>;
/// A LogService client whose calls carry a bearer token.
pub type LogClient = accord_proto::pb::log::v1::log_service_client::LogServiceClient<Authed>;

/// A WorkService client over `ch` presenting `token` (empty: no credential).
pub fn work_client(ch: Channel, token: &str) -> WorkClient {
    accord_proto::pb::work::v1::work_service_client::WorkServiceClient::with_interceptor(
        ch,
        Bearer::new(token),
    )
}

/// `req` with `authorization: Bearer <token>`.
pub fn with_token<T>(t: T, token: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(t);
    r.metadata_mut().insert("authorization", bearer(token));
    r
}

/// The `accord-reason` of a refused call ("" when it carries none): the one extractor.
pub fn reason(s: &tonic::Status) -> String {
    metadata_text(s, "accord-reason")
}

/// The `accord-field` of a refused call ("" when it carries none).
pub fn field(s: &tonic::Status) -> String {
    metadata_text(s, "accord-field")
}

fn metadata_text(s: &tonic::Status, key: &str) -> String {
    s.metadata()
        .get(key)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Clients that present credentials.
impl TestNode {
    /// A WorkService client presenting the operator token (reads everything).
    pub async fn work(&self) -> Result<WorkClient> {
        self.work_as(&self.admin_token()).await
    }

    /// A WorkService client presenting `token` (a party's, the operator's, or any string; empty:
    /// no credential).
    pub async fn work_as(&self, token: &str) -> Result<WorkClient> {
        Ok(work_client(self.channel().await?, token))
    }

    /// A WorkService client presenting party `p`'s token.
    pub async fn work_party(&self, p: &str) -> Result<WorkClient> {
        self.work_as(&self.party_token(p)).await
    }

    /// A LogService client presenting `token` (empty: no credential).
    pub async fn log_as(&self, token: &str) -> Result<LogClient> {
        Ok(
            accord_proto::pb::log::v1::log_service_client::LogServiceClient::with_interceptor(
                self.channel().await?,
                Bearer::new(token),
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `eventually` retries "not yet" and ends at once, with the cause, on an error.
    #[tokio::test]
    async fn eventually_fails_at_once_on_an_error_and_retries_not_yet() {
        let tries = AtomicUsize::new(0);
        let got = eventually(Duration::from_secs(30), || async {
            let n = tries.fetch_add(1, Ordering::SeqCst);
            Ok::<_, tonic::Status>((n == 2).then_some(n))
        })
        .await
        .unwrap();
        assert_eq!(got, 2, "two \"not yet\" answers were retried");

        let started = std::time::Instant::now();
        let tries = AtomicUsize::new(0);
        let err = eventually(Duration::from_secs(3), || async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err::<Option<()>, _>(tonic::Status::permission_denied("not yours"))
        })
        .await
        .unwrap_err();
        assert_eq!(tries.load(Ordering::SeqCst), 1, "an error is not retried");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(format!("{err:#}").contains("not yours"), "{err:#}");

        // `not_yet`: the listed code is retried, any other fails with its cause.
        let tries = AtomicUsize::new(0);
        let err = eventually(Duration::from_secs(3), || async {
            let status = if tries.fetch_add(1, Ordering::SeqCst) == 0 {
                tonic::Status::not_found("not yet")
            } else {
                tonic::Status::permission_denied("denied")
            };
            not_yet::<()>(Err(status), &[tonic::Code::NotFound])
        })
        .await
        .unwrap_err();
        assert_eq!(tries.load(Ordering::SeqCst), 2);
        assert!(format!("{err:#}").contains("denied"), "{err:#}");
    }
}
