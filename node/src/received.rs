//! `received` (seed 000, "Durability states": "The request was validated; no durability promise;
//! not kept, only in the response"): the records that passed the door (`Submit`, `SubmitBatch`,
//! `Declare`, a run's or the embedded API's records: signatures verified, payload decoded, author
//! bound) and wait in the ledger writer's queue for their synced write. Held in memory only, from
//! the hand-over to the writer until the append answered (synced, or failed): `GetDurability`
//! answers `received` for such a record, and a restart forgets it, as the seed says.

use accord_proto::signing::RecordId;
use prost::bytes::Bytes;
use std::collections::HashMap;
use std::sync::Mutex;

/// The records between the door and their synced write.
#[derive(Debug, Default)]
pub struct Received {
    /// Per record: its signed payload (for the reader's visibility check) and how many appends
    /// of it are under way (a client may submit the same record twice at once).
    held: Mutex<HashMap<RecordId, (Bytes, usize)>>,
}

/// Holds records as received until dropped (when their append answered, or was abandoned).
#[must_use = "the records are received only while the guard lives"]
#[derive(Debug)]
pub struct Held<'a> {
    set: &'a Received,
    ids: Vec<RecordId>,
}

impl Received {
    /// Marks `records` (id, signed payload) received until the guard drops.
    pub fn hold<'a>(&'a self, records: impl IntoIterator<Item = (RecordId, Bytes)>) -> Held<'a> {
        let mut ids = Vec::new();
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        for (id, payload) in records {
            held.entry(id).or_insert((payload, 0)).1 += 1;
            ids.push(id);
        }
        Held { set: self, ids }
    }

    /// The signed payload of a received record, while its append is under way.
    pub fn get(&self, id: &RecordId) -> Option<Bytes> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get(id).map(|(payload, _)| payload.clone())
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut held = self.set.held.lock().unwrap_or_else(|p| p.into_inner());
        for id in &self.ids {
            if let Some(e) = held.get_mut(id) {
                e.1 -= 1;
                if e.1 == 0 {
                    held.remove(id);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_only_while_held() {
        let r = Received::default();
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let first = r.hold([(a, Bytes::from_static(b"a")), (b, Bytes::from_static(b"b"))]);
        // The same record submitted again while the first append is under way.
        let again = r.hold([(a, Bytes::from_static(b"a"))]);
        assert_eq!(r.get(&a).as_deref(), Some(&b"a"[..]));
        drop(first);
        assert_eq!(
            r.get(&a).as_deref(),
            Some(&b"a"[..]),
            "still held by the second"
        );
        assert_eq!(r.get(&b), None);
        drop(again);
        assert_eq!(r.get(&a), None);
    }
}
