//! The bounded cache the projection reads through (commitments, `projection.cache_commitments`;
//! runs, `projection.cache_runs`).

use super::store::Stored;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A bounded cache of stored values (commitments, runs): two generations of at most `cap / 2` entries each; a
/// hit in the old one moves the entry to the new one, and when the new one is full it becomes
/// the old one (approximately least-recently-used, O(1) per operation, never more than `cap`).
/// Only synced state enters it ([`Cache::insert_if`] refuses a value read before a publication).
#[derive(Debug)]
pub struct Cache<V = Stored> {
    inner: Mutex<CacheInner<V>>,
    half: usize,
    /// Where a retired generation goes to be freed: a thread of its own, so that freeing
    /// thousands of commitments holds neither the cache's lock (readers wait on it) nor the
    /// ledger writer, which publishes (issue 14: 9 % of the writer's time). `None`: the thread
    /// could not start; generations are freed in place, after the lock is released.
    retired: Option<std::sync::mpsc::Sender<Generation<V>>>,
}

type Generation<V> = HashMap<String, Arc<V>>;

#[derive(Debug)]
struct CacheInner<V> {
    hot: HashMap<String, Arc<V>>,
    cold: HashMap<String, Arc<V>>,
    /// Bumped by every publication; a read from the store inserts only if it did not change.
    generation: u64,
}

impl<V> Default for CacheInner<V> {
    fn default() -> Self {
        CacheInner {
            hot: HashMap::new(),
            cold: HashMap::new(),
            generation: 0,
        }
    }
}

impl<V> CacheInner<V> {
    /// Inserts `s`; when the hot generation is full it becomes the cold one, and the cold one
    /// it replaces is pushed to `retired` for the caller to free once the lock is released.
    fn insert(&mut self, half: usize, id: String, s: Arc<V>, retired: &mut Vec<Generation<V>>) {
        if self.hot.len() >= half && !self.hot.contains_key(&id) {
            let old = std::mem::replace(&mut self.cold, std::mem::take(&mut self.hot));
            retired.push(old);
        }
        self.cold.remove(&id);
        self.hot.insert(id, s);
    }
}

impl<V: Send + Sync + 'static> Cache<V> {
    /// A cache of at most `cap` values (at least 2).
    pub fn new(cap: usize) -> Cache<V> {
        let (tx, rx) = std::sync::mpsc::channel::<Generation<V>>();
        // Ends when the cache (the only sender) is dropped.
        let retired = std::thread::Builder::new()
            .name("cache-free".into())
            .spawn(move || {
                while let Ok(g) = rx.recv() {
                    drop(g)
                }
            })
            .ok()
            .map(|_| tx);
        Cache {
            inner: Mutex::default(),
            half: (cap / 2).max(1),
            retired,
        }
    }

    /// Frees retired generations off the caller's thread (called with the lock released).
    fn retire(&self, generations: Vec<Generation<V>>) {
        for g in generations {
            if g.is_empty() {
                continue;
            }
            match &self.retired {
                Some(tx) => {
                    // A send fails only when the thread is gone; the map is then freed here.
                    let _ = tx.send(g);
                }
                None => drop(g),
            }
        }
    }

    pub(super) fn get(&self, id: &str) -> (Option<Arc<V>>, u64) {
        let mut retired = Vec::new();
        let found = {
            let Ok(mut c) = self.inner.lock() else {
                return (None, 0);
            };
            if let Some(s) = c.hot.get(id) {
                return (Some(s.clone()), c.generation);
            }
            match c.cold.remove(id) {
                Some(s) => {
                    let half = self.half;
                    c.insert(half, id.to_string(), s.clone(), &mut retired);
                    (Some(s), c.generation)
                }
                None => (None, c.generation),
            }
        };
        self.retire(retired);
        found
    }

    pub(super) fn insert_if(&self, generation: u64, id: &str, s: Arc<V>) {
        let mut retired = Vec::new();
        if let Ok(mut c) = self.inner.lock()
            && c.generation == generation
        {
            let half = self.half;
            c.insert(half, id.to_string(), s, &mut retired);
        }
        self.retire(retired);
    }

    /// Publishes synced values: replaces (or drops) them and refuses older reads in flight.
    pub fn publish(&self, changed: impl IntoIterator<Item = (String, Option<Arc<V>>)>) {
        let mut retired = Vec::new();
        if let Ok(mut c) = self.inner.lock() {
            c.generation += 1;
            let half = self.half;
            for (id, s) in changed {
                match s {
                    Some(s) => c.insert(half, id, s, &mut retired),
                    None => {
                        c.hot.remove(&id);
                        c.cold.remove(&id);
                    }
                }
            }
        }
        self.retire(retired);
    }

    /// Drops every value and refuses older reads in flight.
    pub fn clear(&self) {
        let mut retired = Vec::new();
        if let Ok(mut c) = self.inner.lock() {
            c.generation += 1;
            retired.push(std::mem::take(&mut c.hot));
            retired.push(std::mem::take(&mut c.cold));
        }
        self.retire(retired);
    }

    /// How many values it holds.
    pub fn size(&self) -> usize {
        self.inner
            .lock()
            .map(|c| c.hot.len() + c.cold.len())
            .unwrap_or(0)
    }
}
