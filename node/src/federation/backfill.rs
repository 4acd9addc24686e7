//! Backfill (issue 15, item 4): queues, for a peer that is *behind* ([`super::outbox`]), the
//! records the router did not queue for it — every record written before the peer was added, or
//! since its queue filled up — in ledger order, at a bounded rate, without ever passing the
//! outbox bound. The records are those the router would route to the peer now (the same rule,
//! given as `destinations`: the parties of the record's commitment and the parties it names),
//! so the peer receives and admits them as any delivery. Once the peer has caught up with the
//! router's cursor, it is handed back to the router, under the route guard so that no record
//! falls between the two.
//!
//! It takes what it needs as arguments (the store, the outbox, which peers exist, the routing
//! rule and the router's cursor), not the node.

use super::outbox::{Item, Outbox};
use crate::error::Error;
use crate::ledger::{Batch, Store};
use accord_proto::pb::work::v1::LedgerEntry;
use accord_proto::signing::RecordId;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Rounds per second: each scans at most `per_second / ROUNDS` ledger entries per peer.
const ROUNDS: u64 = 10;

/// What the backfill works with.
pub struct Backfill<D, P, C> {
    /// The node's store (records are read from it).
    pub store: std::sync::Arc<Store>,
    /// The peers' queues.
    pub outbox: std::sync::Arc<dyn AsOutbox>,
    /// The peer organisations a ledger entry is routed to (the router's rule).
    pub destinations: D,
    /// Whether a peer exists (a removed one is not backfilled).
    pub exists: P,
    /// The router's cursor: every entry below it was offered by the router.
    pub router_cursor: C,
    /// Ledger entries scanned per second per peer.
    pub per_second: u64,
    /// The node's clock (queued-at times).
    pub clock: crate::clock::Clock,
}

/// The outbox, as held by whoever owns it (the federation state).
pub trait AsOutbox: Send + Sync {
    /// The outbox.
    fn outbox(&self) -> &Outbox;
}

impl AsOutbox for super::Federation {
    fn outbox(&self) -> &Outbox {
        &self.outbox
    }
}

/// The hook where a peer is added: under the route guard, adds it (`add`) and makes it behind
/// from sequence 0, so that the backfill queues every earlier record that involves its parties.
pub fn add_peer(
    outbox: &Outbox,
    peer: &str,
    add: impl FnOnce() -> Result<(), Error>,
) -> Result<(), Error> {
    let _routing = outbox.route_guard()?;
    add()?;
    outbox.start_behind(peer, 0)
}

impl<D, P, C> Backfill<D, P, C>
where
    D: Fn(&LedgerEntry) -> Vec<String> + Send + Sync + 'static,
    P: Fn(&str) -> bool + Send + Sync + 'static,
    C: Fn() -> Result<u64, Error> + Send + Sync + 'static,
{
    /// One round for `peer`, behind from `at`: queues what fits of the next entries. Returns
    /// the peer's new position (`None`: handed back to the router).
    pub fn step(&self, peer: &str, at: u64) -> Result<Option<u64>, Error> {
        let outbox = self.outbox.outbox();
        let room = outbox.max().saturating_sub(outbox.depth(peer));
        let routed = (self.router_cursor)()?;
        if at >= routed {
            return self.hand_back(peer, at);
        }
        if room == 0 {
            return Ok(Some(at));
        }
        let budget = (self.per_second / ROUNDS).max(1);
        let want = (routed - at).min(budget) as usize;
        let entries = self.store.range(at, want)?;
        let mut batch = Batch::default();
        let mut queued = 0u64;
        let mut next = at;
        let now = self.clock.now_ms();
        for e in entries.iter().filter(|e| e.sequence < routed) {
            if self.wants(peer, e) {
                if queued >= room {
                    break;
                }
                let Ok(id) = <RecordId>::try_from(e.record_id.as_ref()) else {
                    next = e.sequence + 1;
                    continue;
                };
                outbox.enqueue(
                    &mut batch,
                    peer,
                    &Item {
                        ledger_seq: e.sequence,
                        record_id: id,
                        queued_at: now,
                    },
                )?;
                queued += 1;
            }
            next = e.sequence + 1;
        }
        if next == at && entries.is_empty() {
            return Ok(Some(at));
        }
        outbox.put_behind(&mut batch, peer, Some(next))?;
        self.store.write(batch, true)?;
        outbox.set_behind(peer, Some(next));
        if queued > 0 {
            outbox.committed(peer, queued);
            tracing::debug!(peer, queued, next, "backfill queued");
        }
        Ok(Some(next))
    }

    fn wants(&self, peer: &str, e: &LedgerEntry) -> bool {
        (self.destinations)(e).iter().any(|d| d == peer)
    }

    /// Caught up with the router (as read before): under the route guard, hands the peer back
    /// if the router has not moved on meanwhile.
    fn hand_back(&self, peer: &str, at: u64) -> Result<Option<u64>, Error> {
        let outbox = self.outbox.outbox();
        let _routing = outbox.route_guard()?;
        if at < (self.router_cursor)()? {
            return Ok(Some(at));
        }
        let mut batch = Batch::default();
        outbox.put_behind(&mut batch, peer, None)?;
        self.store.write(batch, true)?;
        outbox.set_behind(peer, None);
        tracing::info!(
            peer,
            at,
            "backfill caught up: the router routes to the peer again"
        );
        Ok(None)
    }

    /// One round over every peer that is behind.
    pub fn round(&self) -> Result<(), Error> {
        for (peer, at) in self.outbox.outbox().behind_peers() {
            if !(self.exists)(&peer) {
                continue;
            }
            self.step(&peer, at)?;
        }
        Ok(())
    }

    /// Runs rounds, `ROUNDS` a second (the rate bound), until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let this = std::sync::Arc::new(self);
        let mut tick = tokio::time::interval(Duration::from_millis(1000 / ROUNDS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if this.outbox.outbox().behind_peers().is_empty() {
                continue;
            }
            let b = this.clone();
            match tokio::task::spawn_blocking(move || b.round()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "backfill round failed; retrying"),
                Err(e) => {
                    tracing::error!(error = %e, "backfill round panicked");
                    return;
                }
            }
        }
    }
}
