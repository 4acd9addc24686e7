//! The writer's lease (issue 31, item 2): one row of `accord_lease` with an epoch, taken when
//! free (released, or expired by the database's clock), renewed every third of its length,
//! released at a clean stop; the epoch is the fencing token every write transaction checks.

use super::{Pg, pg};
use crate::error::Error;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_postgres::{Client, Statement};

/// The lease is free when released (holder '') or expired, by the database's clock (one clock
/// for every instance).
pub(super) const TAKE: &str = "UPDATE accord_lease SET epoch = epoch + 1, holder = $1, \
     expires_at = now() + $2::BIGINT * INTERVAL '1 millisecond' \
     WHERE id = 1 AND (holder = '' OR expires_at < now()) RETURNING epoch";
const RENEW: &str = "UPDATE accord_lease SET expires_at = now() + $2::BIGINT * INTERVAL '1 millisecond' \
     WHERE id = 1 AND epoch = $1";
const RELEASE: &str =
    "UPDATE accord_lease SET holder = '', expires_at = now() WHERE id = 1 AND epoch = $1";
pub(super) const HOLDER: &str = "SELECT holder, epoch FROM accord_lease WHERE id = 1";

/// One attempt at the writer's lease: its new epoch, or who holds it (holder, epoch).
pub(super) async fn take(
    write: &Client,
    holder: &str,
    lease_ms: i64,
) -> Result<Result<u64, (String, i64)>, Error> {
    if let Some(row) = write
        .query_opt(TAKE, &[&holder, &lease_ms])
        .await
        .map_err(pg)?
    {
        return Ok(Ok(row.get::<_, i64>(0) as u64));
    }
    let row = write.query_one(HOLDER, &[]).await.map_err(pg)?;
    Ok(Err((row.get(0), row.get(1))))
}

impl Pg {
    /// Renews the lease every third of its length while it is ours. The lease is lost (and
    /// [`Pg::lease_lost`] fires) when a renewal finds the epoch changed, or when no renewal
    /// succeeded for the lease's length: by then the database may have let another instance
    /// take it, and this one must stop acting as the writer (issue 31, item 2).
    pub(super) fn renew_in_background(&self, lease_ms: u64) {
        let (write, held, paused, renewals, lost) = (
            self.write.clone(),
            self.held.clone(),
            self.paused.clone(),
            self.renewals.clone(),
            self.lost.clone(),
        );
        let epoch = self.epoch as i64;
        if let Some(rt) = &self.rt {
            rt.spawn(async move {
                let lease = Duration::from_millis(lease_ms);
                let every = Duration::from_millis((lease_ms / 3).max(10));
                let mut statement: Option<Statement> = None;
                // The lease was taken (or last renewed) no earlier than this.
                let mut valid_until = std::time::Instant::now() + lease;
                while held.load(Ordering::SeqCst) {
                    tokio::time::sleep(every).await;
                    if paused.load(Ordering::SeqCst) {
                        continue;
                    }
                    let sent = std::time::Instant::now();
                    let renew = async {
                        let c = write.lock().await;
                        // Prepared once (a statement sent as text is parsed on every call).
                        if statement.is_none() {
                            statement = c.prepare(RENEW).await.ok();
                        }
                        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] =
                            [&epoch, &(lease_ms as i64)];
                        match &statement {
                            Some(st) => c.execute(st, &params).await,
                            None => c.execute(RENEW, &params).await,
                        }
                    };
                    // A renewal that hangs past the lease counts as failed.
                    let left = valid_until.saturating_duration_since(sent);
                    let r = tokio::time::timeout(left.max(every), renew).await;
                    match r {
                        Ok(Ok(1)) => {
                            renewals.fetch_add(1, Ordering::Relaxed);
                            valid_until = sent + lease;
                        }
                        Ok(Ok(_)) => {
                            tracing::error!(epoch, "writer's lease lost: another instance took it");
                            held.store(false, Ordering::SeqCst);
                        }
                        Ok(Err(e)) => tracing::warn!(error = %e, "writer's lease not renewed"),
                        Err(_) => tracing::warn!("writer's lease renewal timed out"),
                    }
                    if held.load(Ordering::SeqCst) && std::time::Instant::now() >= valid_until {
                        tracing::error!(
                            epoch,
                            "writer's lease lost: not renewed within its length"
                        );
                        held.store(false, Ordering::SeqCst);
                    }
                }
                lost.cancel();
            });
        }
    }

    /// Fires once this instance no longer holds the writer's lease (it was taken by another
    /// instance, not renewed in time, or released).
    pub fn lease_lost(&self) -> tokio_util::sync::CancellationToken {
        self.lost.clone()
    }

    /// The lease's epoch this instance writes under.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether the last renewal found the lease still ours.
    pub fn holds_lease(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }

    /// Fault injection: stops renewing the lease, as a paused process would (tests only).
    #[doc(hidden)]
    pub fn pause_renewal(&self) {
        self.paused.store(true, Ordering::SeqCst);
    }

    /// Gives the lease up (at a clean stop), so the next instance need not wait for it.
    pub fn release(&self) -> Result<(), Error> {
        if self.released.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.held.store(false, Ordering::SeqCst);
        let (write, epoch) = (self.write.clone(), self.epoch as i64);
        self.run(async move {
            write
                .lock()
                .await
                .execute(RELEASE, &[&epoch])
                .await
                .map_err(pg)?;
            Ok(())
        })
    }
}
