//! Accord nodes for the demo and the benchmarks: `accord-node init` into a temporary directory,
//! then either [`accord_node::run`] on `127.0.0.1:0` inside this process, or `accord-node serve`
//! as a child process (the benchmarks' default, so that client and server costs are not mixed in
//! one runtime — issue 14). Stopped (gracefully) on drop.

use accord_daemon::layout;
use accord_node::config::Config;
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

/// A node running inside this process, or as a child process.
pub struct InProcNode {
    /// Organisation name.
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Bound address.
    pub addr: SocketAddr,
    /// The metrics listener's address (child processes whose config sets `metrics_listen`).
    pub metrics_addr: Option<SocketAddr>,
    /// The name its TLS certificate must carry ("localhost" for the nodes started here).
    pub server_name: String,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), accord_node::Error>>>,
    child: Option<std::process::Child>,
}

/// Where a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// `accord_node::run` on this process's runtime.
    InProcess,
    /// `accord-node serve` (the binary beside `accordctl`) as a child process.
    Child,
}

impl InProcNode {
    /// A node already running at `url` (`https://HOST:PORT`), not started or stopped here. Its
    /// node directory `dir` (as `accord-node init` wrote it) gives the organisation name
    /// (`accord.toml`), the CA to trust, the operator token and the party keys; `server_name` is
    /// the name its TLS certificate carries.
    pub fn running(dir: &std::path::Path, url: &str, server_name: &str) -> Result<InProcNode> {
        use std::net::ToSocketAddrs;
        let cfg = Config::load(&dir.join(layout::node::CONFIG))
            .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        let hostport = url
            .strip_prefix("https://")
            .with_context(|| format!("{url}: a node URL is https://HOST:PORT"))?
            .trim_end_matches('/');
        let addr = hostport
            .to_socket_addrs()
            .with_context(|| format!("{url}: cannot resolve {hostport}"))?
            .next()
            .with_context(|| format!("{url}: {hostport} has no address"))?;
        Ok(InProcNode {
            name: cfg.name,
            dir: dir.to_path_buf(),
            addr,
            metrics_addr: None,
            server_name: server_name.to_string(),
            shutdown: CancellationToken::new(),
            task: None,
            child: None,
        })
    }
}

impl InProcNode {
    /// Initialises `name` under `root` with `parties`, lets `edit` change the config text, and
    /// starts it in this process or in a child process.
    pub async fn start_placed(
        root: &std::path::Path,
        name: &str,
        parties: &[&str],
        edit: impl FnOnce(&mut String),
        placement: Placement,
    ) -> Result<InProcNode> {
        init_node(root, name, parties)?;
        match placement {
            Placement::InProcess => Self::start_initialised(root, name, edit).await,
            Placement::Child => Self::start_child(root, name, edit).await,
        }
    }

    /// Starts `accord-node serve` for a node initialised under `root/name`, reads the address it
    /// bound from its first line (`listening ADDR`), and waits until it answers health SERVING.
    pub async fn start_child(
        root: &std::path::Path,
        name: &str,
        edit: impl FnOnce(&mut String),
    ) -> Result<InProcNode> {
        use std::io::BufRead;
        let dir = root.join(name);
        let cfg = dir.join("accord.toml");
        let mut text = std::fs::read_to_string(&cfg)?;
        edit(&mut text);
        std::fs::write(&cfg, &text)?;
        let bin = std::env::current_exe()?.with_file_name("accord-node");
        if !bin.exists() {
            anyhow::bail!(
                "{} not found; build it first (cargo build --bins), or pass --in-process",
                bin.display()
            );
        }
        let mut child = std::process::Command::new(&bin)
            .args(["serve", "--config"])
            .arg(&cfg)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        let stdout = child.stdout.take().context("child stdout")?;
        // With `metrics_listen` set, the second line is `metrics ADDR`.
        let metrics_on = text.lines().any(|l| l.starts_with("metrics_listen"));
        let (line, metrics_line) = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            tokio::task::spawn_blocking(move || {
                let mut r = std::io::BufReader::new(stdout);
                let (mut line, mut metrics) = (String::new(), String::new());
                r.read_line(&mut line)?;
                if metrics_on {
                    r.read_line(&mut metrics)?;
                }
                std::io::Result::Ok((line, metrics))
            }),
        )
        .await
        .context("accord-node did not report its address within 60 s")???;
        let metrics_addr = match metrics_line.trim().strip_prefix("metrics ") {
            Some(a) => Some(a.parse()?),
            None => None,
        };
        let addr: SocketAddr = line
            .trim()
            .strip_prefix("listening ")
            .with_context(|| format!("unexpected first line from accord-node: {line:?}"))?
            .parse()?;
        let node = InProcNode {
            name: name.into(),
            dir,
            addr,
            metrics_addr,
            server_name: "localhost".into(),
            shutdown: CancellationToken::new(),
            task: None,
            child: Some(child),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let serving = async {
                let mut h =
                    tonic_health::pb::health_client::HealthClient::new(node.channel().await?);
                let r = h
                    .check(tonic_health::pb::HealthCheckRequest {
                        service: String::new(),
                    })
                    .await?
                    .into_inner();
                anyhow::Ok(
                    r.status() == tonic_health::pb::health_check_response::ServingStatus::Serving,
                )
            };
            if serving.await.unwrap_or(false) {
                return Ok(node);
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!("accord-node at {addr} not SERVING within 60 s");
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Starts a node already initialised under `root/name` (see [`init_node`]).
    pub async fn start_initialised(
        root: &std::path::Path,
        name: &str,
        edit: impl FnOnce(&mut String),
    ) -> Result<InProcNode> {
        let dir = root.join(name);
        let cfg = dir.join(layout::node::CONFIG);
        let mut text = std::fs::read_to_string(&cfg)?;
        edit(&mut text);
        std::fs::write(&cfg, &text)?;
        let config = Config::load(&cfg).map_err(|e| anyhow::anyhow!("{e}"))?;
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(accord_node::run(config, listener, shutdown.clone()));
        Ok(InProcNode {
            name: name.into(),
            dir,
            addr,
            metrics_addr: None,
            server_name: "localhost".into(),
            shutdown,
            task: Some(task),
            child: None,
        })
    }

    /// A TLS channel to the node.
    pub async fn channel(&self) -> Result<Channel> {
        let ca = std::fs::read(self.dir.join(layout::node::TLS_CA))?;
        accord_node::connect(
            &format!("https://{}", self.addr),
            &ca,
            None,
            &self.server_name,
        )
        .await
        .context("connect to node")
    }

    /// A WorkService client presenting the operator token (reads everything).
    pub async fn work(&self) -> Result<crate::creds::WorkClient> {
        let bearer = crate::creds::Bearer::from_file(&self.dir.join(layout::node::ADMIN_TOKEN))?;
        Ok(
            accord_proto::pb::work::v1::work_service_client::WorkServiceClient::with_interceptor(
                self.channel().await?,
                bearer,
            ),
        )
    }

    /// A party's signing key.
    pub fn party(&self, p: &str) -> Result<accord_proto::note::Signer> {
        let t = std::fs::read_to_string(self.dir.join(layout::node::party_skey(p)))?;
        Ok(accord_proto::note::Signer::from_skey(t.trim())?)
    }

    /// The child process's id (`None` for a node in this process).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Stops the node gracefully (SIGTERM for a child process) and waits for it.
    pub async fn stop(mut self) -> Result<()> {
        self.shutdown.cancel();
        if let Some(t) = self.task.take() {
            t.await?.map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        if let Some(mut child) = self.child.take() {
            std::process::Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()?;
            let status = tokio::task::spawn_blocking(move || child.wait()).await??;
            anyhow::ensure!(status.success(), "accord-node exited with {status}");
        }
        Ok(())
    }
}

impl Drop for InProcNode {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A witness running inside this process (`accord-witness init` + `run` on 127.0.0.1:0).
pub struct InProcWitness {
    /// The witness directory.
    pub dir: PathBuf,
    /// gRPC address.
    pub grpc: SocketAddr,
    /// Its cosigner vkey.
    pub vkey: String,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), accord_witness::Error>>>,
}

impl InProcWitness {
    /// Creates a witness `name` under `root` for several logs (origin, log vkey).
    pub async fn start_for(
        root: &std::path::Path,
        name: &str,
        logs: &[(&str, &str)],
    ) -> Result<InProcWitness> {
        let dir = root.join(format!("witness-{name}"));
        let made = accord_witness::init::init(&accord_witness::init::InitOptions {
            dir: dir.clone(),
            name: name.into(),
            sans: Vec::new(),
            grpc_listen: "127.0.0.1:0".into(),
            http_listen: "127.0.0.1:0".into(),
        })?;
        let mut text = std::fs::read_to_string(&made.config_path)?;
        for (origin, log_vkey) in logs {
            text.push_str(&format!(
                "\n[[logs]]\norigin = \"{origin}\"\nvkeys = [\"{log_vkey}\"]\n"
            ));
        }
        std::fs::write(&made.config_path, text)?;
        let config = accord_witness::Config::load(&made.config_path)?;
        let listeners = accord_witness::Listeners::bind(&config).await?;
        let grpc = listeners.grpc_addr()?;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(accord_witness::run(config, listeners, shutdown.clone()));
        Ok(InProcWitness {
            dir,
            grpc,
            vkey: made.vkey,
            shutdown,
            task: Some(task),
        })
    }

    /// The `[[witnesses.list]]` entry that puts this witness in a node's policy.
    pub fn node_config_entry(&self) -> String {
        format!(
            "\n[[witnesses.list]]\nvkey = \"{}\"\nendpoint = \"https://{}\"\nca = \"{}\"\n",
            self.vkey,
            self.grpc,
            self.dir.join(layout::witness::TLS_CA).display()
        )
    }

    /// Stops the witness and waits for it.
    pub async fn stop(mut self) -> Result<()> {
        self.shutdown.cancel();
        if let Some(t) = self.task.take() {
            t.await?.map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        Ok(())
    }
}

impl Drop for InProcWitness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The node's vkey and origin after `init` (to hand to witnesses before the node starts).
pub fn init_node(
    root: &std::path::Path,
    name: &str,
    parties: &[&str],
) -> Result<(PathBuf, String)> {
    let made = accord_node::init::init(&accord_node::init::InitOptions {
        dir: root.join(name),
        name: name.into(),
        parties: parties.iter().map(|p| p.to_string()).collect(),
        listen: "127.0.0.1:0".into(),
        sans: vec![],
    })?;
    Ok((made.config, made.vkey))
}

/// A request carrying the node's operator token (AdminService).
pub fn admin_request<T>(node: &InProcNode, t: T) -> Result<tonic::Request<T>> {
    let token = std::fs::read_to_string(node.dir.join(layout::node::ADMIN_TOKEN))?;
    let mut r = tonic::Request::new(t);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {}", token.trim()).parse()?);
    Ok(r)
}

/// Makes `other` a peer of `node` at runtime through AdminService: its endpoint, its node key and
/// the keys of `parties`, and its CA (mutual TLS).
pub async fn add_peer(node: &InProcNode, other: &InProcNode, parties: &[&str]) -> Result<()> {
    use accord_proto::pb::admin::v1::{self as admin, admin_service_client::AdminServiceClient};
    let mut keys = vec![
        std::fs::read_to_string(other.dir.join(layout::node::NODE_VKEY))?
            .trim()
            .to_string(),
    ];
    for p in parties {
        keys.push(other.party(p)?.verifier().to_vkey());
    }
    let peer = admin::Peer {
        name: other.name.clone(),
        endpoint: format!("https://{}", other.addr),
        keys: keys
            .into_iter()
            .map(|vkey| admin::PeerKey {
                vkey,
                valid_until_unix_ms: 0,
            })
            .collect(),
        tls_certificate_pem: std::fs::read_to_string(other.dir.join(layout::node::TLS_CA))?,
        enabled: true,
        pin_sha256: String::new(),
    };
    AdminServiceClient::new(node.channel().await?)
        .add_peer(admin_request(
            node,
            admin::AddPeerRequest { peer: Some(peer) },
        )?)
        .await
        .map_err(|s| anyhow::anyhow!("AddPeer: {}", s.message()))?;
    Ok(())
}

/// The two-organisation set-up of `bench federation` and `bench envelope`: acme (party alice)
/// and globex (party bob), started under `dir` as `placement` says with quick federation
/// retries, each waited for until it serves, then peered both ways. `b_extra` goes at the end of
/// globex's config only (its `[storage]`, for `bench federation --backend`).
pub async fn start_pair(
    dir: &std::path::Path,
    placement: Placement,
    federation_extra: &str,
    b_extra: &str,
) -> Result<(InProcNode, InProcNode)> {
    let extra = federation_extra.to_string();
    let tune = move |t: &mut String| {
        t.push_str(
            "\n[federation]\nretry_base_ms = 20\nretry_max_ms = 500\nreceipt_poll_ms = 500\n",
        );
        t.push_str(&extra);
    };
    let b_extra = b_extra.to_string();
    let tune_b = {
        let tune = tune.clone();
        move |t: &mut String| {
            tune(t);
            t.push_str(&b_extra);
        }
    };
    let na = InProcNode::start_placed(dir, "acme", &["alice"], tune, placement).await?;
    let nb = InProcNode::start_placed(dir, "globex", &["bob"], tune_b, placement).await?;
    for n in [&na, &nb] {
        // Poll until it serves (no fixed sleep stands in for readiness).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while n.channel().await.is_err() {
            if std::time::Instant::now() > deadline {
                anyhow::bail!("{} did not start", n.name);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    add_peer(&na, &nb, &["bob"]).await?;
    add_peer(&nb, &na, &["alice"]).await?;
    Ok((na, nb))
}
