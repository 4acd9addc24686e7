//! The outbox: records queued durably per peer, in ledger order (DESIGN.md, "Federation":
//! "Delivery is durable and retried per peer").
//!
//! `outbox` keys are `peer ‖ 0x00 ‖ outbox sequence (u64 BE)`; values are [`Item`]s. Only the
//! router appends (one task), and only the peer's sender removes from the head, so a per-peer
//! counter in memory (rebuilt by one scan at start-up) gives the next sequence and the depth.

use super::db;
use crate::error::Error;
use crate::ledger::Batch as WriteBatch;
use crate::ledger::Store;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

const CF: &str = "outbox";

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
}

/// The per-peer queues.
pub struct Outbox {
    store: Arc<Store>,
    queues: Mutex<HashMap<String, Queue>>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").finish()
    }
}

fn item_key(peer: &str, seq: u64) -> Vec<u8> {
    db::key(&[peer.as_bytes(), &seq.to_be_bytes()])
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
    /// Opens the outbox, counting what is queued.
    pub fn open(store: Arc<Store>) -> Result<Outbox, Error> {
        let mut queues: HashMap<String, Queue> = HashMap::new();
        store.scan_extra(CF, b"", |k, _| {
            if let Some((peer, seq)) = split_key(k) {
                let q = queues.entry(peer).or_default();
                q.depth += 1;
                q.next = q.next.max(seq + 1);
            }
            true
        })?;
        Ok(Outbox {
            store,
            queues: Mutex::new(queues),
        })
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
        db::scan(&self.store, CF, &db::prefix(&[peer.as_bytes()]), n)?
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

    /// After removing `n` items of `peer`.
    pub fn removed(&self, peer: &str, n: u64) {
        if let Ok(mut qs) = self.queues.lock()
            && let Some(q) = qs.get_mut(peer)
        {
            q.depth = q.depth.saturating_sub(n);
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
        db::write(&self.store, batch, true)?;
        if let Ok(mut qs) = self.queues.lock()
            && let Some(q) = qs.get_mut(peer)
        {
            q.depth = 0;
        }
        Ok(())
    }
}
