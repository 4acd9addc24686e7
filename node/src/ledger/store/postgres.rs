//! The PostgreSQL engine (issue 31): every family in one table `accord_kv (cf, k, v)`, primary
//! key `(cf, k)` (bytea compares bytewise, as RocksDB's keys do), and the writer's lease in
//! `accord_lease`, one row with an epoch (the fencing token).
//!
//! - A [`Batch`] is one SERIALIZABLE transaction, retried on a serialization failure (the
//!   operations are data, so a retry is the same write): the lease check, then the range
//!   deletes, the deletes and the upserts (each one statement over arrays). A group commit —
//!   records, ids, tree nodes, the projection's writes and the watermark — is therefore one
//!   transaction, and the writer publishes it only after `COMMIT` returned.
//! - Fencing: every transaction first runs `UPDATE accord_lease ... WHERE epoch = <ours>` and
//!   requires one row. An instance that took the lease after ours bumped the epoch, so a writer
//!   that paused or lost its connection can no longer commit ([`Error::NotWriter`]); the row
//!   update also makes the takeover and our commit conflict, so one of them is ordered first.
//! - SQL that CockroachDB and YugabyteDB also run: tables with primary keys, `ON CONFLICT`,
//!   `UPDATE ... RETURNING`, `unnest` of array parameters, keyset pagination on `bytea`; no
//!   advisory locks, `LISTEN/NOTIFY`, temporary tables or stored procedures.
//!
//! The node's code is synchronous where it reads the store (as with RocksDB), so the engine runs
//! its own small tokio runtime for the driver and blocks the caller on a spawned task.
//! The lease lives in [`lease`], the reads and the write transaction's entry in [`kv`].

mod kv;
mod lease;

use super::pg_write::Statements;
use crate::error::Error;
use lease::take;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;
use tokio_postgres::{Client, NoTls, Statement};

/// One page of a scan: `(key, value)` rows in order.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// How to reach the database and hold the lease (`[storage]` with `backend = "postgres"`).
#[derive(Clone)]
pub struct PgOptions {
    /// `postgres://user@host:port/database` (no password: that is `password`).
    pub url: String,
    /// Read from `[storage] password_file`.
    pub password: Option<String>,
    /// How long a taken or renewed lease lasts, ms; renewed every third of it.
    pub lease_ms: u64,
    /// This instance's name in the lease row (logs and the `not_writer` status name it).
    pub holder: String,
    /// While waiting for the lease: who holds it, and when to give up.
    pub waiting: Waiting,
}

/// What an instance waiting for the writer's lease reports and obeys (a standby, issue 31).
#[derive(Clone, Default)]
pub struct Waiting {
    /// Set to the lease row's holder each time the instance finds the lease taken.
    pub holder: Option<Arc<tokio::sync::watch::Sender<String>>>,
    /// Cancelled to stop waiting (the instance is shutting down): the open fails `unavailable`.
    pub stop: Option<tokio_util::sync::CancellationToken>,
}

impl std::fmt::Debug for PgOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgOptions")
            .field("url", &self.url)
            .field("lease_ms", &self.lease_ms)
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

/// Transactions retried on a serialization failure before the write fails.
const RETRIES: usize = 16;

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS accord_kv (cf TEXT NOT NULL, k BYTEA NOT NULL, v BYTEA NOT NULL, \
     PRIMARY KEY (cf, k))",
    "CREATE TABLE IF NOT EXISTS accord_lease (id INT PRIMARY KEY, epoch BIGINT NOT NULL, \
     holder TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL)",
    "INSERT INTO accord_lease (id, epoch, holder, expires_at) VALUES (1, 0, '', now()) \
     ON CONFLICT (id) DO NOTHING",
];

struct Reads {
    client: Client,
    get: Statement,
    multi: Statement,
    scan: Statement,
    rev: Statement,
    rev_before: Statement,
}

/// The store's PostgreSQL engine.
pub struct Pg {
    rt: Option<tokio::runtime::Runtime>,
    /// The reading connection; a follower replaces it when it broke ([`Pg::reconnect_reads`]).
    reads: std::sync::RwLock<Arc<Reads>>,
    /// A follower's options, to reconnect with (`None` for the writer, which stops instead).
    follows: Option<PgOptions>,
    write: Arc<tokio::sync::Mutex<Client>>,
    /// The write transaction's statements, prepared on `write`.
    statements: Arc<Statements>,
    epoch: u64,
    holder: String,
    /// Cleared when a renewal found the epoch changed: another instance is the writer.
    held: Arc<AtomicBool>,
    /// Fault injection: renewals stop, as in a paused process ([`Pg::pause_renewal`]).
    paused: Arc<AtomicBool>,
    released: AtomicBool,
    renewals: Arc<AtomicU64>,
    /// Cancelled once this instance no longer holds the lease: a renewal found the epoch
    /// changed, or none succeeded within the lease's length by this process's own clock
    /// (counted from when the last successful renewal was sent, so it ends no later than the
    /// database's expiry). The node stops on it ([`Pg::lease_lost`]).
    lost: tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg")
            .field("holder", &self.holder)
            .field("epoch", &self.epoch)
            .finish()
    }
}

fn pg(e: tokio_postgres::Error) -> Error {
    // The server's own message ("db error" alone says nothing).
    match e.as_db_error() {
        Some(d) => Error::Storage(format!("postgres: {} ({})", d.message(), d.code().code())),
        None => Error::Storage(format!("postgres: {e}")),
    }
}

fn retryable(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    )
}

async fn connect(o: &PgOptions) -> Result<Client, Error> {
    let mut cfg: tokio_postgres::Config = o
        .url
        .parse()
        .map_err(|e| Error::Storage(format!("storage.url: {e}")))?;
    if let Some(p) = &o.password {
        cfg.password(p.as_bytes());
    }
    cfg.connect_timeout(Duration::from_secs(10));
    let (client, conn) = cfg.connect(NoTls).await.map_err(pg)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::warn!(error = %e, "postgres connection ended");
        }
    });
    Ok(client)
}

/// Connects the writing and the reading client, creating the tables if missing.
async fn connected(o: &PgOptions) -> Result<(Reads, Client), Error> {
    let write = connect(o).await?;
    for s in SCHEMA {
        // Two instances creating the tables at once: one of them may fail; the next
        // statement finds them.
        if let Err(e) = write.batch_execute(s).await {
            tracing::debug!(error = %e, "schema statement retried");
            write.batch_execute(s).await.map_err(pg)?;
        }
    }
    Ok((reads(o).await?, write))
}

/// Connects the reading client and prepares its statements.
async fn reads(o: &PgOptions) -> Result<Reads, Error> {
    let client = connect(o).await?;
    let reads = Reads {
        get: client
            .prepare("SELECT v FROM accord_kv WHERE cf = $1 AND k = $2")
            .await
            .map_err(pg)?,
        multi: client
            .prepare("SELECT k, v FROM accord_kv WHERE cf = $1 AND k = ANY($2)")
            .await
            .map_err(pg)?,
        scan: client
            .prepare(
                "SELECT k, v FROM accord_kv WHERE cf = $1 AND k >= $2 \
                 AND ($3::BYTEA IS NULL OR k < $3) ORDER BY k LIMIT $4",
            )
            .await
            .map_err(pg)?,
        rev: client
            .prepare(
                "SELECT k, v FROM accord_kv WHERE cf = $1 AND k <= $2 \
                 ORDER BY k DESC LIMIT $3",
            )
            .await
            .map_err(pg)?,
        rev_before: client
            .prepare(
                "SELECT k, v FROM accord_kv WHERE cf = $1 AND k < $2 \
                 ORDER BY k DESC LIMIT $3",
            )
            .await
            .map_err(pg)?,
        client,
    };
    Ok(reads)
}

impl Pg {
    /// Connects, creates the tables if missing, and takes the writer's lease, waiting while
    /// another live instance holds it (it becomes free when released or expired).
    pub fn open(o: &PgOptions) -> Result<Pg, Error> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("postgres")
            .enable_all()
            .build()
            .map_err(|e| Error::Internal(format!("postgres runtime: {e}")))?;
        let (o, lease_ms, holder) = (o.clone(), o.lease_ms, o.holder.clone());
        let (reads, write, statements, epoch) = rt.block_on(async move {
            // The first connection's failure is the start-up's (a wrong URL or password is
            // reported at once); once connected, a standby rides out the database's own
            // failover (a promoted replica, a restart): it reconnects while it waits, naming
            // no writer meanwhile.
            let (mut reads, mut write) = connected(&o).await?;
            let lease = o.lease_ms as i64;
            let epoch = loop {
                let seen = match take(&write, &o.holder, lease).await {
                    Ok(Ok(epoch)) => break epoch,
                    Ok(Err((holder, epoch))) => {
                        tracing::info!(holder, epoch, "waiting for the writer's lease");
                        holder
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "database unreachable while waiting for the writer's lease");
                        match connected(&o).await {
                            Ok((r, w)) => (reads, write) = (r, w),
                            Err(e) => tracing::warn!(error = %e, "reconnecting to the database"),
                        }
                        format!("unknown (database unreachable: {e})")
                    }
                };
                if let Some(w) = &o.waiting.holder {
                    w.send_replace(seen);
                }
                let pause = tokio::time::sleep(Duration::from_millis((o.lease_ms / 4).max(50)));
                match &o.waiting.stop {
                    Some(stop) => tokio::select! {
                        _ = pause => {}
                        _ = stop.cancelled() => {
                            return Err(Error::Unavailable(
                                "stopped while waiting for the writer's lease".into(),
                            ));
                        }
                    },
                    None => pause.await,
                }
            };
            let statements = Statements::prepare(&write).await.map_err(pg)?;
            Ok::<_, Error>((reads, write, statements, epoch))
        })?;
        tracing::info!(epoch, holder = %holder, "writer's lease taken");
        let pg = Pg {
            rt: Some(rt),
            reads: std::sync::RwLock::new(Arc::new(reads)),
            follows: None,
            write: Arc::new(tokio::sync::Mutex::new(write)),
            statements: Arc::new(statements),
            epoch,
            holder,
            held: Arc::new(AtomicBool::new(true)),
            paused: Arc::default(),
            released: AtomicBool::new(false),
            renewals: Arc::default(),
            lost: tokio_util::sync::CancellationToken::new(),
        };
        pg.renew_in_background(lease_ms);
        Ok(pg)
    }

    /// Connects without taking the lease, to follow the writer (a standby serving reads,
    /// issue 31): reads work as the writer's; a write is refused by the fence (epoch 0 is
    /// never a lease's: the first take makes it 1), and nothing is released at drop. The
    /// tables must exist: the writer creates them.
    pub fn follow(o: &PgOptions) -> Result<Pg, Error> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("postgres-follow")
            .enable_all()
            .build()
            .map_err(|e| Error::Internal(format!("postgres runtime: {e}")))?;
        let options = o.clone();
        let (r, write, statements) = rt.block_on(async move {
            let r = reads(&options).await?;
            let write = connect(&options).await?;
            let statements = Statements::prepare(&write).await.map_err(pg)?;
            Ok::<_, Error>((r, write, statements))
        })?;
        Ok(Pg {
            rt: Some(rt),
            reads: std::sync::RwLock::new(Arc::new(r)),
            follows: Some(o.clone()),
            write: Arc::new(tokio::sync::Mutex::new(write)),
            statements: Arc::new(statements),
            epoch: 0,
            holder: o.holder.clone(),
            held: Arc::new(AtomicBool::new(false)),
            paused: Arc::default(),
            released: AtomicBool::new(true),
            renewals: Arc::default(),
            lost: tokio_util::sync::CancellationToken::new(),
        })
    }

    /// The reading connection now.
    fn reads(&self) -> Arc<Reads> {
        match self.reads.read() {
            Ok(r) => r.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// A follower whose reading connection broke (the database restarted, or its replica was
    /// promoted) connects again; the writer's does not (it stops when its lease lapses).
    pub fn reconnect_reads(&self) {
        let Some(o) = self.follows.clone() else {
            return;
        };
        if !self.reads().client.is_closed() {
            return;
        }
        match self.run(async move { reads(&o).await }) {
            Ok(r) => {
                if let Ok(mut g) = self.reads.write() {
                    *g = Arc::new(r);
                }
                tracing::info!("reconnected to the database");
            }
            Err(e) => tracing::debug!(error = %e, "reconnecting to the database"),
        }
    }

    /// Runs `f` on the engine's runtime and waits for it: callable from any thread, inside
    /// another runtime or not.
    fn run<T: Send + 'static>(
        &self,
        f: impl Future<Output = Result<T, Error>> + Send + 'static,
    ) -> Result<T, Error> {
        let rt = self
            .rt
            .as_ref()
            .ok_or_else(|| Error::Internal("postgres runtime stopped".into()))?;
        let task = rt.spawn(f);
        let wait = move || futures::executor::block_on(task);
        // On a worker of the node's (multi-thread) runtime, hand its queued tasks to another
        // thread while this one waits, so nothing the node runs is held behind a read.
        let r = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        };
        r.map_err(|e| Error::Internal(format!("postgres task: {e}")))?
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            tracing::warn!(error = %e, "writer's lease not released");
        }
        if let Some(rt) = self.rt.take() {
            // Not `drop`: that would block, which a runtime's own thread may not do.
            rt.shutdown_background();
        }
    }
}
