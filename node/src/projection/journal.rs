//! The change journal (issue 31, item 2): what each group commit changed, written by the writer
//! in the same transaction as the batch (on PostgreSQL only: RocksDB has no second instance to
//! tell), so that a standby following the writer knows which cached commitments and runs to
//! drop and which ids its watches' change feed carries, without applying records itself.
//!
//! | cf | key | value |
//! |---|---|---|
//! | `pj_journal` | the batch's watermark (u64 BE) | [`Entry`] (postcard) |
//!
//! Entries are contiguous: each names the watermark it starts from. The writer keeps the last
//! [`KEEP`] batches (pruned every [`PRUNE_EVERY`]); a follower that fell further behind (cut off
//! from the database for minutes) finds a gap, drops its caches and ends its watches with
//! `watch_lagged` — what a watch does when it falls behind the feed on the writer.

use super::store;
use crate::error::Error;
use crate::ledger::{Batch, Store};
use serde::{Deserialize, Serialize};

/// The journal's column family.
pub const JOURNAL: &str = "pj_journal";
/// Batches kept (at full load, about a thousand batches a second: a quarter of a minute; a
/// follower reads it every `storage.follow_ms`).
pub const KEEP: u64 = 16_384;
/// The writer prunes once per this many batches.
pub const PRUNE_EVERY: u64 = 256;

/// What one group commit changed.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The watermark the batch started from (the previous entry's key).
    pub from: u64,
    /// Commitments whose stored state changed.
    pub changed: Vec<String>,
    /// The ids the change feed carried (summary changed, or a reader gained).
    pub feed: Vec<String>,
    /// Runs whose stored state changed.
    pub runs: Vec<String>,
    /// Whether envelope or tick records were applied (the follower re-reads the index).
    pub envelopes: bool,
}

fn key(watermark: u64) -> [u8; 8] {
    watermark.to_be_bytes()
}

/// The writer's side: one entry per persisted batch, and the pruning.
#[derive(Debug, Default)]
pub struct Writer {
    /// The watermark the next entry starts from; `None` until the machine opened.
    from: Option<u64>,
    batches: u64,
}

impl Writer {
    /// Starts at the opened watermark.
    pub fn open(&mut self, watermark: u64) {
        self.from = Some(watermark);
    }

    /// Adds `entry` (its `from` filled in) for the batch ending at `to` to `batch`.
    pub fn write(
        &mut self,
        st: &Store,
        batch: &mut Batch,
        to: u64,
        mut entry: Entry,
    ) -> Result<(), Error> {
        let Some(from) = self.from else {
            return Ok(());
        };
        // A batch of no records (the publication at start-up) moves no watermark.
        if to == from {
            return Ok(());
        }
        entry.from = from;
        st.put_extra(batch, JOURNAL, &key(to), &store::encode(&entry))?;
        self.from = Some(to);
        self.batches += 1;
        if self.batches.is_multiple_of(PRUNE_EVERY) && to > KEEP {
            st.delete_range_extra(batch, JOURNAL, &key(0), &key(to - KEEP))?;
        }
        Ok(())
    }
}

/// What the batches after watermark `from` up to `to` (inclusive) changed, in order; `None`
/// when the journal no longer holds all of them (a gap: pruned, or written before it existed).
pub fn read(st: &Store, from: u64, to: u64) -> Result<Option<Vec<Entry>>, Error> {
    let mut out: Vec<Entry> = Vec::new();
    let mut at = from;
    let mut gap = false;
    let mut failed = None;
    let start = key(from.saturating_add(1));
    st.scan_extra(JOURNAL, &start, |k, v| {
        let Ok(b) = <[u8; 8]>::try_from(k) else {
            failed = Some(Error::Storage("corrupt pj_journal key".into()));
            return false;
        };
        let end = u64::from_be_bytes(b);
        if end > to {
            return false;
        }
        match store::decode::<Entry>("journal entry", v) {
            Ok(e) if e.from == at => {
                at = end;
                out.push(e);
                true
            }
            Ok(_) => {
                gap = true;
                false
            }
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    // A batch that changed nothing derived (a duplicate) writes no entry, but then it moved no
    // watermark either: reaching `to` means nothing is missing.
    Ok((!gap && at == to).then_some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let st = Store::open(dir.path(), &[JOURNAL]).unwrap();
        (dir, st)
    }

    fn changed(ids: &[&str]) -> Entry {
        Entry {
            changed: ids.iter().map(|s| s.to_string()).collect(),
            ..Entry::default()
        }
    }

    /// Batches [0,3) [3,5) [5,9): a follower at 3 reads the last two, in order, each naming
    /// where it starts; one at 0 reads all three; nothing past the watermark asked for.
    #[test]
    fn a_follower_reads_the_batches_after_its_position_in_order() {
        let (_d, st) = store();
        let mut w = Writer::default();
        w.open(0);
        for (to, ids) in [(3, ["a"]), (5, ["b"]), (9, ["c"])] {
            let mut b = Batch::default();
            w.write(&st, &mut b, to, changed(&ids)).unwrap();
            st.write(b, true).unwrap();
        }
        let got = read(&st, 3, 9).unwrap().expect("contiguous");
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].from, got[0].changed.as_slice()),
            (3, &["b".to_string()][..])
        );
        assert_eq!(
            (got[1].from, got[1].changed.as_slice()),
            (5, &["c".to_string()][..])
        );
        assert_eq!(read(&st, 0, 5).unwrap().expect("contiguous").len(), 2);
        assert_eq!(read(&st, 9, 9).unwrap(), Some(vec![]));
    }

    /// A journal that starts after the follower's position (pruned, or written only from a
    /// later open) is a gap: `None`, never a partial list.
    #[test]
    fn a_journal_missing_the_followers_batches_is_a_gap() {
        let (_d, st) = store();
        let mut w = Writer::default();
        w.open(4);
        let mut b = Batch::default();
        w.write(&st, &mut b, 6, changed(&["x"])).unwrap();
        st.write(b, true).unwrap();
        assert_eq!(read(&st, 2, 6).unwrap(), None);
        assert_eq!(read(&st, 4, 6).unwrap().map(|e| e.len()), Some(1));
        // The watermark moved past the journal's last entry: also a gap.
        assert_eq!(read(&st, 4, 8).unwrap(), None);
    }

    /// The writer keeps the last KEEP batches: after pruning, a follower far behind finds a gap
    /// and one within KEEP reads on.
    #[test]
    fn the_writer_prunes_all_but_the_last_batches() {
        let (_d, st) = store();
        let mut w = Writer::default();
        w.open(0);
        let n = KEEP + 2 * PRUNE_EVERY;
        let mut b = Batch::default();
        for to in 1..=n {
            w.write(&st, &mut b, to, changed(&["a"])).unwrap();
            if to % 1024 == 0 {
                st.write(std::mem::take(&mut b), true).unwrap();
            }
        }
        st.write(b, true).unwrap();
        assert_eq!(read(&st, 0, n).unwrap(), None, "pruned");
        let recent = n - KEEP + PRUNE_EVERY;
        assert_eq!(
            read(&st, recent, n).unwrap().map(|e| e.len() as u64),
            Some(n - recent)
        );
    }
}
