//! The loop of `WatchCommitments` (issue 27, item 3): one scan, then only what changed.
//!
//! - **Start.** The watch subscribes to the projection's change feed
//!   ([`crate::projection::feed`]) and then scans the commitments the caller may read, one chunk
//!   at a time as the client takes them (`change: "initial"`); nothing of the scan is held
//!   beyond one chunk.
//! - **Records.** Each published batch names the commitments whose summary it changed (or that
//!   gained a reader). The watch keeps those it has not sent yet in a bounded set of dirty ids
//!   and, as the client takes messages, sends each one's summary as it is then (`"changed"`),
//!   if the caller may read it and it passes the filter. An id already dirty coalesces: its
//!   latest summary is sent once. An id the scan has not reached yet is left to the scan.
//! - **Time.** On each Work service tick the watch reads the time index
//!   ([`crate::projection::timed`]) for the commitments whose summary changed by time alone
//!   since its last tick (O(those), never all commitments) and marks them dirty too.
//! - **Bounds.** At most `limits.watch_pending` dirty ids: one more closes the stream
//!   RESOURCE_EXHAUSTED, `accord-reason: watch_lagged` (the client lists again); so does a feed
//!   the watch fell a whole ring behind on. The feed is drained whatever the client does, so the
//!   ledger writer never waits on a watch, and a slow client costs at most the dirty set, one
//!   chunk and the stream's channel.

use super::Filter;
use crate::error::Error;
use crate::node::Node;
use crate::services::visibility::Visibility;
use accord_proto::pb::work::v1 as pb;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

/// Commitments read per chunk of the initial scan (fewer than a list page: a chunk waits in
/// memory for a slow client).
const WATCH_CHUNK: usize = 64;

type Tx = mpsc::Sender<Result<pb::CommitmentSummary, tonic::Status>>;

/// The ids with unsent changes, in the order they changed, each once.
#[derive(Debug)]
pub struct Dirty {
    order: VecDeque<String>,
    set: HashSet<String>,
    bound: usize,
}

impl Dirty {
    /// An empty set holding at most `bound` ids.
    pub fn new(bound: usize) -> Dirty {
        Dirty {
            order: VecDeque::new(),
            set: HashSet::new(),
            bound: bound.max(1),
        }
    }

    /// Marks `id` dirty; an id already dirty coalesces. Err: one id more than the bound.
    pub fn add(&mut self, id: &str) -> Result<(), Error> {
        if self.set.contains(id) {
            return Ok(());
        }
        if self.set.len() >= self.bound {
            return Err(lagged(format!(
                "more than {} commitments changed that the client has not taken (limits.watch_pending)",
                self.bound
            )));
        }
        self.set.insert(id.to_string());
        self.order.push_back(id.to_string());
        Ok(())
    }

    /// The oldest dirty id, no longer dirty.
    pub fn pop(&mut self) -> Option<String> {
        let id = self.order.pop_front()?;
        self.set.remove(&id);
        Some(id)
    }

    /// How many ids are dirty.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

fn lagged(why: String) -> Error {
    Error::WatchLagged(format!(
        "{why}; the stream is closed: list again (ListCommitments) and watch anew"
    ))
}

fn poisoned() -> Error {
    Error::Internal("projection lock poisoned".into())
}

/// Where the initial scan is: `Some(last id read)` until it is done.
struct Scan {
    after: Option<String>,
    chunk: VecDeque<pb::CommitmentSummary>,
}

impl Scan {
    /// Whether the scan has yet to read `id` (a change to it is the scan's to send).
    fn ahead(&self, id: &str) -> bool {
        self.after.as_deref().is_some_and(|a| id > a)
    }

    /// Reads the next chunk the caller may read, if the current one is sent.
    fn refill(&mut self, node: &Node, rules: &Visibility, filter: &Filter) -> Result<(), Error> {
        while self.chunk.is_empty() {
            let Some(after) = self.after.take() else {
                return Ok(());
            };
            let now = node.clock.now_ms();
            let mut last = None;
            // One chunk of at most WATCH_CHUNK commitments, under the lock for that chunk only.
            filter.scan(node, rules, &after, WATCH_CHUNK, |chunk| {
                last = chunk.last().map(|c| c.id.clone());
                self.chunk.extend(chunk.iter().filter_map(|c| {
                    let mut s = filter.summary(c, now)?;
                    s.change = "initial".into();
                    Some(s)
                }));
                false
            })?;
            // `scan` skips unreadable chunks until one is visible; None: nothing after `after`.
            self.after = last;
        }
        Ok(())
    }
}

/// The summary of `id` now, if the caller may read it and it passes the filter.
fn changed(
    node: &Node,
    rules: &Visibility,
    filter: &Filter,
    id: &str,
) -> Result<Option<pb::CommitmentSummary>, Error> {
    let c = {
        let p = node.projection.read().map_err(|_| poisoned())?;
        let visible = [&filter.reader, &filter.needs]
            .into_iter()
            .flatten()
            .all(|who| rules.may_read(&p, who, id));
        match p.get(id) {
            Some(c) if visible => c,
            _ => return Ok(None),
        }
    };
    Ok(filter.summary(&c, node.clock.now_ms()).map(|mut s| {
        s.change = "changed".into();
        s
    }))
}

/// The watch loop (see the module doc). Ends when the client goes away, or with an error.
pub async fn watch(node: Arc<Node>, rules: Arc<Visibility>, filter: Filter, tx: Tx) {
    if let Err(e) = run(&node, &rules, &filter, &tx).await {
        let _ = tx.send(Err(e.into())).await;
    }
}

async fn run(node: &Node, rules: &Visibility, filter: &Filter, tx: &Tx) -> Result<(), Error> {
    // Subscribed before the scan: a change published after this is on the feed, one before it
    // in the scan.
    let mut feed = node.projection.read().map_err(|_| poisoned())?.subscribe();
    let mut dirty = Dirty::new(node.config.limits.watch_pending);
    let mut scan = Scan {
        after: Some(String::new()),
        chunk: VecDeque::new(),
    };
    let mut timed_after = node.clock.now_ms();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(
        node.config.clock.tick_ms.max(1),
    ));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        scan.refill(node, rules, filter)?;
        let work = !scan.chunk.is_empty() || !dirty.is_empty();
        tokio::select! {
            // The feed first: it is drained whatever the client does.
            biased;
            r = feed.recv() => match r {
                Ok(ids) => {
                    for id in ids.iter().filter(|id| !scan.ahead(id)) {
                        dirty.add(id)?;
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    return Err(lagged(format!("{n} batches of changes were missed")));
                }
                // Only a standby restarts its feed: after a gap in the writer's journal it
                // cannot tell what changed (projection::journal).
                Err(RecvError::Closed) => {
                    return Err(lagged("the change feed restarted".into()));
                }
            },
            _ = tick.tick() => {
                let now = node.clock.now_ms();
                // Read one more than the set can take: more is lagging anyway.
                let max = dirty.bound.saturating_sub(dirty.len()).saturating_add(1);
                let due = node
                    .projection
                    .read()
                    .map_err(|_| poisoned())?
                    .timed(timed_after, now, max);
                timed_after = match due.last() {
                    Some((t, _)) if due.len() == max => *t - 1,
                    _ => now,
                };
                for (_, id) in due.iter().filter(|(_, id)| !scan.ahead(id)) {
                    dirty.add(id)?;
                }
            }
            permit = tx.reserve(), if work => {
                let Ok(permit) = permit else { return Ok(()) };
                if let Some(s) = scan.chunk.pop_front() {
                    permit.send(Ok(s));
                } else if let Some(id) = dirty.pop()
                    && let Some(s) = changed(node, rules, filter, &id)?
                {
                    permit.send(Ok(s));
                }
            }
            _ = tx.closed() => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_ids_coalesce_and_one_more_than_the_bound_is_lagged() {
        let mut d = Dirty::new(2);
        d.add("a").unwrap();
        d.add("b").unwrap();
        d.add("a").unwrap();
        assert_eq!(d.len(), 2);
        let e = d.add("c").unwrap_err();
        assert_eq!(e.reason(), "watch_lagged");
        assert_eq!(
            tonic::Status::from(e).code(),
            tonic::Code::ResourceExhausted
        );
        assert_eq!(d.pop().as_deref(), Some("a"));
        d.add("c").unwrap();
        assert_eq!(
            [d.pop(), d.pop(), d.pop()],
            [Some("b".into()), Some("c".into()), None]
        );
    }
}
