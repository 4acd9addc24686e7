//! The projection's change feed (issue 27, item 3): after each synced batch is published, the
//! ids of the commitments whose summary it changed (or that gained a reader) go out on a tokio
//! broadcast channel, which `WatchCommitments` subscribes to instead of rescanning every
//! commitment on every change.
//!
//! The writer never waits on it: a broadcast send only writes into a ring of [`CAPACITY`]
//! batches and returns; with no subscriber it keeps nothing. A subscriber that falls a whole
//! ring behind gets `Lagged` on its next receive (it cannot know what it missed; the watch
//! closes with `watch_lagged`, README "Limits"). Each batch in the ring is freed as soon as every
//! subscriber has read it. Memory: at most `CAPACITY` batches of ids, whatever the watchers do.

use std::sync::Arc;
use tokio::sync::broadcast;

/// Batches the ring holds. A watch task drains the feed into its own bounded set of dirty ids
/// as fast as batches come, whatever its client does, so only a starved task falls this far
/// behind.
pub const CAPACITY: usize = 1024;

/// One published batch: the commitment ids it changed.
pub type Changes = Arc<[String]>;

/// The sending side, held by the published projection.
#[derive(Debug)]
pub struct Feed {
    tx: broadcast::Sender<Changes>,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            tx: broadcast::channel(CAPACITY).0,
        }
    }
}

impl Feed {
    /// A receiver of every batch published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Changes> {
        self.tx.subscribe()
    }

    /// Ends every subscriber's feed (they learn it as lagging) and starts a new one: a standby
    /// that cannot tell what changed ([`super::journal`]).
    pub fn restart(&mut self) {
        self.tx = broadcast::channel(CAPACITY).0;
    }

    /// Publishes one batch's changed ids (never blocks; nothing is kept without subscribers).
    pub fn publish(&self, ids: Vec<String>) {
        if !ids.is_empty() {
            // Err only when nobody subscribes: nothing to tell.
            let _ = self.tx.send(ids.into());
        }
    }
}
