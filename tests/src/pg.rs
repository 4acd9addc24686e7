//! A PostgreSQL server for one test (issue 31): `initdb` and `pg_ctl` from Debian's packages
//! (`scripts/ensure-deps.sh` installs `postgresql`) in a temporary directory, on a free port on
//! 127.0.0.1, with password authentication; stopped and removed on drop. Missing programs are
//! an error naming the fix, never a skipped test. Run as root, the server runs as the
//! `postgres` user (PostgreSQL refuses to run as root).

use anyhow::{Context, Result, anyhow, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The user the tests connect as, and its password.
pub const USER: &str = "accord";
const PASSWORD: &str = "accord-test-password";

/// A running PostgreSQL server in a temporary directory.
pub struct TestPostgres {
    bin: PathBuf,
    data: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// A file holding the password (`[storage] password_file`).
    pub password_file: PathBuf,
    as_postgres: bool,
    _tmp: tempfile::TempDir,
}

/// The directory of `initdb` and `pg_ctl`: on PATH, else Debian's newest
/// `/usr/lib/postgresql/N/bin`.
fn server_bin() -> Result<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
        .collect();
    found.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(d) = found.pop() {
        return Ok(d);
    }
    for d in std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if d.join("initdb").is_file() && d.join("pg_ctl").is_file() {
            return Ok(d);
        }
    }
    bail!(
        "PostgreSQL's server programs (initdb, pg_ctl) are not installed: run \
         scripts/ensure-deps.sh (it installs Debian's postgresql)"
    )
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A port free on 127.0.0.1 now (the server binds it right after).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl TestPostgres {
    /// A temporary directory (owned by `postgres` when we are root) with the password file; no
    /// server yet.
    fn prepare() -> Result<TestPostgres> {
        let bin = server_bin()?;
        let tmp = tempfile::tempdir()?;
        let as_postgres = is_root();
        let password_file = tmp.path().join("password");
        std::fs::write(&password_file, format!("{PASSWORD}\n"))?;
        if as_postgres {
            let st = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(tmp.path())
                .status()?;
            if !st.success() {
                bail!("chown of {} to postgres failed", tmp.path().display());
            }
        }
        Ok(TestPostgres {
            bin,
            data: tmp.path().join("data"),
            port: 0,
            password_file,
            as_postgres,
            _tmp: tmp,
        })
    }

    /// initdb, then start on a free port; returns once it accepts connections (`pg_isready`).
    pub fn start() -> Result<TestPostgres> {
        let mut pg = TestPostgres::prepare()?;
        let pwfile = pg.password_file.display().to_string();
        pg.run(
            "initdb",
            &[
                "-D",
                &pg.data.display().to_string(),
                "-U",
                USER,
                "--auth=scram-sha-256",
                &format!("--pwfile={pwfile}"),
                "--no-sync",
            ],
        )?;
        pg.launch()?;
        Ok(pg)
    }

    /// Starts the server of `self.data` on a free port and waits until it accepts connections.
    fn launch(&mut self) -> Result<()> {
        // The port may be taken between finding it and the server binding it: try a few.
        let mut last = anyhow!("not started");
        for _ in 0..5 {
            self.port = free_port()?;
            let opts = format!(
                "-c listen_addresses=127.0.0.1 -p {} -k {}",
                self.port,
                self.socket_dir().display()
            );
            let log = self.socket_dir().join("server.log").display().to_string();
            let data = self.data.display().to_string();
            match self.run("pg_ctl", &["-D", &data, "-l", &log, "-o", &opts, "start"]) {
                Ok(()) => return self.wait_ready(),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// A streaming replica of this server (`pg_basebackup -R`), made its synchronous standby:
    /// from the return on, this server acknowledges a commit only once the replica has flushed
    /// it (`synchronous_commit = on`, `synchronous_standby_names`), so promoting the replica
    /// loses no committed transaction.
    pub fn synchronous_replica(&self) -> Result<TestPostgres> {
        const NAME: &str = "accord_replica";
        let mut r = TestPostgres::prepare()?;
        let conninfo = format!(
            "host=127.0.0.1 port={} user={USER} password={PASSWORD} application_name={NAME}",
            self.port
        );
        let data = r.data.display().to_string();
        r.run(
            "pg_basebackup",
            &["-D", &data, "-R", "-X", "stream", "-d", &conninfo],
        )?;
        // Written by us, so the replica connects with the password and its name whatever
        // pg_basebackup recorded (the last setting in the file wins).
        let mut auto = std::fs::OpenOptions::new()
            .append(true)
            .open(r.data.join("postgresql.auto.conf"))?;
        std::io::Write::write_all(
            &mut auto,
            format!("\nprimary_conninfo = '{conninfo}'\n").as_bytes(),
        )?;
        r.launch()?;
        self.query(&format!(
            "ALTER SYSTEM SET synchronous_standby_names = '{NAME}'"
        ))?;
        self.query("SELECT pg_reload_conf()")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let state = self.query(&format!(
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = '{NAME}'"
            ))?;
            if state == "sync" {
                return Ok(r);
            }
            if Instant::now() > deadline {
                bail!("the replica is not a synchronous standby after 30 s: {state:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server at once (`pg_ctl stop -m immediate`: no checkpoint, connections cut),
    /// as when its machine is lost.
    pub fn kill(&self) -> Result<()> {
        let data = self.data.display().to_string();
        self.run("pg_ctl", &["-D", &data, "-m", "immediate", "stop"])
    }

    /// Promotes a replica to a primary (`pg_ctl promote`, waiting until it accepts writes).
    pub fn promote(&self) -> Result<()> {
        let data = self.data.display().to_string();
        self.run("pg_ctl", &["-D", &data, "-w", "promote"])
    }

    fn socket_dir(&self) -> &Path {
        self._tmp.path()
    }

    /// Runs one of the server's programs (as `postgres` when we are root).
    fn run(&self, program: &str, args: &[&str]) -> Result<()> {
        let path = self.bin.join(program);
        let out = if self.as_postgres {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&path)
                .args(args)
                .output()
        } else {
            Command::new(&path).args(args).output()
        }
        .with_context(|| format!("run {}", path.display()))?;
        if !out.status.success() {
            bail!(
                "{program} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// Polls `pg_isready` until the server accepts connections.
    fn wait_ready(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let ready = self.bin.join("pg_isready");
        loop {
            let st = Command::new(&ready)
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()?;
            if st.success() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("PostgreSQL on port {} not ready after 30 s", self.port);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The URL a node's `[storage] url` names (no password: that is in [`Self::password_file`]).
    pub fn url(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// A URL naming this server and `replica`, for whichever of them accepts writes
    /// (`target_session_attrs=read-write`): after a promotion the node reconnects to the new
    /// primary.
    pub fn url_with(&self, replica: &TestPostgres) -> String {
        format!(
            "postgres://{USER}@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.port, replica.port
        )
    }

    /// The `[storage]` section of a node on this server, its lease `lease_ms` long.
    pub fn storage_section(&self, lease_ms: u64) -> String {
        self.storage_section_at(&self.url(), lease_ms)
    }

    /// The `[storage]` section of a node on `url` (with this server's password file).
    pub fn storage_section_at(&self, url: &str, lease_ms: u64) -> String {
        format!(
            "\n[storage]\nbackend = \"postgres\"\nurl = \"{url}\"\npassword_file = \"{}\"\nlease_ms = {lease_ms}\n",
            self.password_file.display()
        )
    }

    /// The answer of `psql -tAc sql` (one value), as the test's independent look at the tables.
    pub fn query(&self, sql: &str) -> Result<String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
            .args(["-d", "postgres", "-tAc", sql])
            .env("PGPASSWORD", PASSWORD)
            .output()?;
        if !out.status.success() {
            bail!("psql: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        // Already stopped when the test killed it: the error is expected.
        let _ = self.kill();
    }
}

/// Another instance of a node on the same database (issue 31): the same config — node key,
/// parties, `[storage]` — on another ephemeral port. It binds its port at once and answers there
/// as a standby until it takes the writer's lease, then serves. Killed on drop.
pub struct Instance {
    child: std::process::Child,
    /// Its gRPC address.
    pub addr: std::net::SocketAddr,
    dir: PathBuf,
}

impl Instance {
    /// Starts `accord-node serve` on a copy of `node`'s config (same directory, so its relative
    /// paths name the same files) listening on `127.0.0.1:0`.
    pub fn start(node: &crate::TestNode) -> Result<Instance> {
        Instance::start_at(node, "127.0.0.1:0")
    }

    /// [`Instance::start`] listening on `listen` (an instance restarted on its own address, as
    /// its supervisor would).
    pub fn start_at(node: &crate::TestNode, listen: &str) -> Result<Instance> {
        let text = std::fs::read_to_string(node.dir.join("accord.toml"))?;
        let text = text
            .lines()
            .map(|l| match l.starts_with("listen = ") {
                true => format!("listen = \"{listen}\""),
                false => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n";
        // One file per start: two instances may be started one after the other.
        static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(2);
        let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cfg = node.dir.join(format!("accord-instance-{n}.toml"));
        std::fs::write(&cfg, text)?;
        let mut child = Command::new(crate::bin("accord-node"))
            .args(["serve", "--config"])
            .arg(&cfg)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()?;
        let line = crate::first_line(&mut child, Duration::from_secs(60))?;
        let addr = line
            .strip_prefix("listening ")
            .ok_or_else(|| anyhow!("unexpected first line {line:?}"))?
            .parse()?;
        Ok(Instance {
            child,
            addr,
            dir: node.dir.clone(),
        })
    }

    /// A channel to it (a standby answers on it at once: health NOT_SERVING, calls refused
    /// `not_writer`).
    pub async fn channel(&self) -> Result<tonic::transport::Channel> {
        crate::tls_channel(
            self.addr,
            &std::fs::read(self.dir.join("tls/ca.pem"))?,
            None,
        )
        .await
    }

    /// A WorkService client presenting the operator token, once the instance serves as the
    /// writer ([`crate::wait_serving`]).
    pub async fn work(&self) -> Result<crate::WorkClient> {
        let token = std::fs::read_to_string(self.dir.join("admin.token"))?;
        let ch = self.channel().await?;
        crate::wait_serving(ch.clone()).await?;
        Ok(crate::work_client(ch, token.trim()))
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
