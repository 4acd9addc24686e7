//! The outbox: records queued durably per peer, in ledger order (DESIGN.md, "Federation":
//! "Delivery is durable and retried per peer").
//!
//! `outbox` keys are `peer ‖ 0x00 ‖ outbox sequence (u64 BE)`; values are [`Item`]s. Only the
//! router appends (one task), and only the peer's sender removes from the head, so a per-peer
//! counter in memory (rebuilt by one scan at start-up) gives the next sequence and the depth.
//!
//! Bounded (issue 15, item 4): at most `federation.outbox_max` items per peer. The router offers
//! each item ([`Outbox::offer`]); when the peer's queue is full it does not queue it but marks the
//! peer *behind* from that ledger sequence (key `0x01 ‖ peer` → u64 BE, written in the router's
//! batch). From then on the router skips the peer, and [`super::backfill`] queues its records
//! from that sequence, in ledger order, as the queue drains, until it has caught up with the
//! router and hands the peer back ([`Outbox::route_guard`] serialises that hand-over with the
//! router's steps). A peer just added starts behind from sequence 0 (backfill). Nothing is
//! dropped and nothing is removed but what the peer acknowledged.

use super::db;
use crate::error::Error;
use crate::ledger::Batch as WriteBatch;
use crate::ledger::Store;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

const CF: &str = "outbox";
/// First byte of the keys of peers' "behind" cursors (item keys start with a peer name).
const BEHIND: u8 = 1;

/// One queued record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// Its ledger sequence (where the signed record is read from).
    pub ledger_seq: u64,
    /// Its id.
    #[serde(with = "db::serde_bytes::id")]
    pub record_id: [u8; 32],
    /// When it was queued (Unix ms).
    pub queued_at: i64,
}

#[derive(Default)]
struct Queue {
    next: u64,
    depth: u64,
    notify: Arc<Notify>,
    /// The first ledger sequence not yet offered to this peer while it is behind (routing to it
    /// paused at the bound, or a backfill): the router skips it, the backfill catches it up.
    behind: Option<u64>,
    /// No item of this peer below this outbox sequence is left (the sender removes from the
    /// head only): [`Outbox::peek`] seeks here instead of scanning the deleted head items again
    /// (RocksDB keeps their tombstones until compaction, so a scan from the prefix would grow
    /// with every record ever delivered: issue 14).
    head: u64,
}

/// The per-peer queues.
pub struct Outbox {
    store: Arc<Store>,
    queues: Mutex<HashMap<String, Queue>>,
    /// Most items per peer.
    max: u64,
    /// Held by the router for a whole step, and by whoever changes which peers are behind
    /// (backfill start and hand-over).
    route: Mutex<()>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").finish()
    }
}

fn item_key(peer: &str, seq: u64) -> Vec<u8> {
    db::key(&[peer.as_bytes(), &seq.to_be_bytes()])
}

fn behind_key(peer: &str) -> Vec<u8> {
    let mut k = vec![BEHIND];
    k.extend_from_slice(peer.as_bytes());
    k
}

fn split_key(k: &[u8]) -> Option<(String, u64)> {
    let (peer, rest) = k.split_at(k.iter().position(|b| *b == 0)?);
    let seq: [u8; 8] = rest.get(1..)?.try_into().ok()?;
    Some((
        String::from_utf8(peer.to_vec()).ok()?,
        u64::from_be_bytes(seq),
    ))
}

impl Outbox {
    /// Opens the outbox, counting what is queued; at most `max` items per peer.
    pub fn open(store: Arc<Store>, max: u64) -> Result<Outbox, Error> {
        let mut queues: HashMap<String, Queue> = HashMap::new();
        store.scan_extra(CF, b"", |k, v| {
            if k.first() == Some(&BEHIND) {
                let peer = String::from_utf8_lossy(&k[1..]).into_owned();
                if let Ok(b) = <[u8; 8]>::try_from(v) {
                    queues.entry(peer).or_default().behind = Some(u64::from_be_bytes(b));
                }
            } else if let Some((peer, seq)) = split_key(k) {
                let q = queues.entry(peer).or_default();
                if q.depth == 0 {
                    // Keys are in sequence order: the first one is the head.
                    q.head = seq;
                }
                q.depth += 1;
                q.next = q.next.max(seq + 1);
            }
            true
        })?;
        Ok(Outbox {
            store,
            queues: Mutex::new(queues),
            max: max.max(1),
            route: Mutex::new(()),
        })
    }

    fn queues(&self) -> Result<MutexGuard<'_, HashMap<String, Queue>>, Error> {
        self.queues
            .lock()
            .map_err(|_| Error::Internal("outbox lock".into()))
    }

    /// Serialises a router step with changes of which peers are behind.
    pub fn route_guard(&self) -> Result<MutexGuard<'_, ()>, Error> {
        self.route
            .lock()
            .map_err(|_| Error::Internal("outbox route lock".into()))
    }

    /// Most items per peer.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The router's offer of `item` for `peer` (under [`Outbox::route_guard`]), `in_batch` items
    /// for `peer` being already in this step's `batch`. Queues it and returns true; or, when the
    /// peer is behind or its queue is full, leaves it to the backfill and returns false (a full
    /// queue makes the peer behind from this item, written in `batch`).
    pub fn offer(
        &self,
        batch: &mut WriteBatch,
        peer: &str,
        item: &Item,
        in_batch: u64,
    ) -> Result<bool, Error> {
        {
            let mut qs = self.queues()?;
            let q = qs.entry(peer.to_string()).or_default();
            if q.behind.is_some() {
                return Ok(false);
            }
            if q.depth + in_batch >= self.max {
                q.behind = Some(item.ledger_seq);
                drop(qs);
                tracing::warn!(
                    peer,
                    max = self.max,
                    "outbox full: routing to the peer pauses"
                );
                self.store.put_extra(
                    batch,
                    CF,
                    &behind_key(peer),
                    &item.ledger_seq.to_be_bytes(),
                )?;
                return Ok(false);
            }
        }
        self.enqueue(batch, peer, item)?;
        Ok(true)
    }

    /// Whether `peer`'s queue holds `max` items or more.
    pub fn is_full(&self, peer: &str) -> bool {
        self.depth(peer) >= self.max
    }

    /// The ledger sequence from which `peer` is behind (routing paused or backfill running).
    pub fn behind(&self, peer: &str) -> Option<u64> {
        self.queues
            .lock()
            .ok()
            .and_then(|qs| qs.get(peer).and_then(|q| q.behind))
    }

    /// Every peer that is behind, with its sequence.
    pub fn behind_peers(&self) -> Vec<(String, u64)> {
        self.queues
            .lock()
            .map(|qs| {
                qs.iter()
                    .filter_map(|(p, q)| q.behind.map(|b| (p.clone(), b)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Makes `peer` behind from `from` (kept if it is already behind from earlier), durably.
    /// The caller holds [`Outbox::route_guard`].
    pub fn start_behind(&self, peer: &str, from: u64) -> Result<(), Error> {
        let at = self.behind(peer).map_or(from, |b| b.min(from));
        let mut batch = WriteBatch::default();
        self.store
            .put_extra(&mut batch, CF, &behind_key(peer), &at.to_be_bytes())?;
        db::write(&self.store, batch, true)?;
        self.queues()?.entry(peer.to_string()).or_default().behind = Some(at);
        Ok(())
    }

    /// Adds `peer`'s new behind cursor (`None`: caught up) to `batch`; call
    /// [`Outbox::set_behind`] once it is written.
    pub fn put_behind(
        &self,
        batch: &mut WriteBatch,
        peer: &str,
        at: Option<u64>,
    ) -> Result<(), Error> {
        match at {
            Some(s) => self
                .store
                .put_extra(batch, CF, &behind_key(peer), &s.to_be_bytes()),
            None => self.store.delete_extra(batch, CF, &behind_key(peer)),
        }
    }

    /// After [`Outbox::put_behind`]'s batch was written.
    pub fn set_behind(&self, peer: &str, at: Option<u64>) {
        if let Ok(mut qs) = self.queues.lock() {
            qs.entry(peer.to_string()).or_default().behind = at;
        }
    }

    /// Adds `item` for `peer` to `batch`; call [`Outbox::committed`] once the batch is written.
    pub fn enqueue(&self, batch: &mut WriteBatch, peer: &str, item: &Item) -> Result<(), Error> {
        let seq = {
            let mut qs = self
                .queues
                .lock()
                .map_err(|_| Error::Internal("outbox lock".into()))?;
            let q = qs.entry(peer.to_string()).or_default();
            let s = q.next;
            q.next += 1;
            s
        };
        db::put(batch, &self.store, CF, &item_key(peer, seq), item)
    }

    /// After the batch holding `n` new items for `peer` was written: counts them and wakes the
    /// peer's sender.
    pub fn committed(&self, peer: &str, n: u64) {
        if let Ok(mut qs) = self.queues.lock() {
            let q = qs.entry(peer.to_string()).or_default();
            q.depth += n;
            q.notify.notify_one();
        }
    }

    /// Up to `n` items from the head of `peer`'s queue, with their outbox sequences.
    pub fn peek(&self, peer: &str, n: usize) -> Result<Vec<(u64, Item)>, Error> {
        self.peek_from(peer, 0, n)
    }

    /// Up to `n` items of `peer`'s queue from outbox sequence `from` on (or its head, if later):
    /// what follows the envelopes already in flight (issue 14).
    pub fn peek_from(&self, peer: &str, from: u64, n: usize) -> Result<Vec<(u64, Item)>, Error> {
        let head = self
            .queues
            .lock()
            .ok()
            .and_then(|qs| qs.get(peer).map(|q| q.head))
            .unwrap_or(0)
            .max(from);
        let prefix = db::prefix(&[peer.as_bytes()]);
        db::scan_from(&self.store, CF, &prefix, &item_key(peer, head), n)?
            .into_iter()
            .map(|(k, v)| {
                let (_, seq) =
                    split_key(&k).ok_or_else(|| Error::Storage("outbox: bad key".into()))?;
                Ok((seq, db::decode::<Item>(CF, &v)?))
            })
            .collect()
    }

    /// Removes delivered items (in `batch`); call [`Outbox::removed`] after the write.
    pub fn remove(&self, batch: &mut WriteBatch, peer: &str, seqs: &[u64]) -> Result<(), Error> {
        for s in seqs {
            db::delete(batch, &self.store, CF, &item_key(peer, *s))?;
        }
        Ok(())
    }

    /// After the batch removing the items `seqs` of `peer` (from the head of its queue) was
    /// written.
    pub fn removed(&self, peer: &str, seqs: &[u64]) {
        if let Ok(mut qs) = self.queues.lock()
            && let Some(q) = qs.get_mut(peer)
        {
            q.depth = q.depth.saturating_sub(seqs.len() as u64);
            if let Some(last) = seqs.iter().max() {
                q.head = q.head.max(last.saturating_add(1));
            }
        }
    }

    /// Records queued for `peer`.
    pub fn depth(&self, peer: &str) -> u64 {
        self.queues
            .lock()
            .ok()
            .and_then(|qs| qs.get(peer).map(|q| q.depth))
            .unwrap_or(0)
    }

    /// When the oldest queued item of `peer` was queued.
    pub fn oldest(&self, peer: &str) -> Result<Option<i64>, Error> {
        Ok(self.peek(peer, 1)?.first().map(|(_, i)| i.queued_at))
    }

    /// Wakes `peer`'s sender when items are queued.
    pub fn notify(&self, peer: &str) -> Arc<Notify> {
        match self.queues.lock() {
            Ok(mut qs) => qs.entry(peer.to_string()).or_default().notify.clone(),
            Err(_) => Arc::new(Notify::new()),
        }
    }

    /// Drops everything queued for a removed peer.
    pub fn drop_peer(&self, peer: &str) -> Result<(), Error> {
        let p = db::prefix(&[peer.as_bytes()]);
        let mut end = p.clone();
        if let Some(last) = end.last_mut() {
            *last = 1;
        }
        let mut batch = WriteBatch::default();
        self.store.delete_range_extra(&mut batch, CF, &p, &end)?;
        self.store.delete_extra(&mut batch, CF, &behind_key(peer))?;
        db::write(&self.store, batch, true)?;
        if let Ok(mut qs) = self.queues.lock()
            && let Some(q) = qs.get_mut(peer)
        {
            q.depth = 0;
            q.behind = None;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(seq: u64) -> Item {
        Item {
            ledger_seq: seq,
            record_id: [seq as u8; 32],
            queued_at: 0,
        }
    }

    /// Offers `seqs` as one router step; returns which were queued.
    fn step(o: &Outbox, store: &Store, seqs: &[u64]) -> Vec<bool> {
        let _g = o.route_guard().unwrap();
        let mut batch = WriteBatch::default();
        let mut n = 0;
        let took: Vec<bool> = seqs
            .iter()
            .map(|s| {
                let t = o.offer(&mut batch, "globex", &item(*s), n).unwrap();
                n += u64::from(t);
                t
            })
            .collect();
        store.write(batch, true).unwrap();
        o.committed("globex", n);
        took
    }

    #[test]
    fn a_full_queue_makes_the_peer_behind_durably_and_keeps_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path(), db::CFS).unwrap());
        let o = Outbox::open(store.clone(), 2).unwrap();
        // Three in one step: two fit, the third makes the peer behind from sequence 12.
        assert_eq!(step(&o, &store, &[10, 11, 12]), [true, true, false]);
        assert!(o.is_full("globex"));
        assert_eq!(o.behind("globex"), Some(12));
        // Behind: later offers are left to the backfill, even once there is room.
        let head: Vec<u64> = o
            .peek("globex", 10)
            .unwrap()
            .iter()
            .map(|(s, _)| *s)
            .collect();
        let mut batch = WriteBatch::default();
        o.remove(&mut batch, "globex", &head[..1]).unwrap();
        store.write(batch, true).unwrap();
        o.removed("globex", &head[..1]);
        assert!(!o.is_full("globex"));
        // The head moved past what was removed: a peek seeks there and finds the rest.
        let rest: Vec<u64> = o
            .peek("globex", 10)
            .unwrap()
            .iter()
            .map(|(_, i)| i.ledger_seq)
            .collect();
        assert_eq!(rest, [11]);
        assert_eq!(step(&o, &store, &[13]), [false]);
        // After a restart: the queue and the behind cursor are as they were.
        drop(o);
        let o = Outbox::open(store.clone(), 2).unwrap();
        assert_eq!(o.depth("globex"), 1);
        assert_eq!(o.behind("globex"), Some(12));
        let queued: Vec<u64> = o
            .peek("globex", 10)
            .unwrap()
            .iter()
            .map(|(_, i)| i.ledger_seq)
            .collect();
        assert_eq!(queued, [11]);
        // Caught up: the router queues again.
        let mut batch = WriteBatch::default();
        o.put_behind(&mut batch, "globex", None).unwrap();
        store.write(batch, true).unwrap();
        o.set_behind("globex", None);
        assert_eq!(step(&o, &store, &[14]), [true]);
        drop(o);
        let o = Outbox::open(store, 2).unwrap();
        assert_eq!((o.depth("globex"), o.behind("globex")), (2, None));
    }
}
