//! The witness's durable state in RocksDB. Every write is synced (WAL fsync) before it returns,
//! as c2sp.org/tlog-witness requires ("The witness MUST persist the new checkpoint before
//! responding").
//!
//! **Group commit.** Checkpoints of different origins that arrive together are written in one
//! synced `WriteBatch` ([`Store::write_checkpoints`]); the queue that groups them, and keeps each
//! origin's lock until its write returned, is [`crate::commit`] (issue 14, issue 32 item 3).
//!
//! Column families:
//! - `checkpoints`: origin → the latest co-signed checkpoint ([`Latest`], versioned binary).
//! - `logs`: origin → the log's verifier keys, one vkey per line. Removing a log deletes only
//!   this entry; its checkpoint stays, so re-adding the log cannot roll it back.

use std::path::Path;

use accord_proto::merkle::Hash;
use rocksdb::{ColumnFamilyDescriptor, DB, IteratorMode, Options, WriteBatch, WriteOptions};

use crate::error::Error;

const CF_CHECKPOINTS: &str = "checkpoints";
const CF_LOGS: &str = "logs";
const LATEST_VERSION: u8 = 1;

/// The latest checkpoint the witness co-signed for an origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latest {
    /// The tree size.
    pub size: u64,
    /// The root hash.
    pub root: Hash,
    /// The checkpoint body (note text: origin, size, root, extensions), ending in a newline.
    pub body: String,
    /// The signed note as the log submitted it.
    pub note: String,
    /// The witness's cosignature line on `body`, ending in a newline.
    pub cosignature: String,
    /// The cosignature's timestamp.
    pub timestamp: u64,
}

impl Latest {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            1 + 8 + 32 + 8 + 12 + self.body.len() + self.note.len() + self.cosignature.len(),
        );
        out.push(LATEST_VERSION);
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&self.root);
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        for s in [&self.body, &self.note, &self.cosignature] {
            // Bodies are bounded by the request limit, far below 4 GiB.
            out.extend_from_slice(&u32::try_from(s.len()).unwrap_or(u32::MAX).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        out
    }

    fn decode(key: &str, bytes: &[u8]) -> Result<Latest, Error> {
        let corrupt = |reason| Error::CorruptState {
            key: key.to_owned(),
            reason,
        };
        let mut r = Reader(bytes);
        if r.take(1) != Some(&[LATEST_VERSION][..]) {
            return Err(corrupt("unknown record version"));
        }
        let size = r.u64().ok_or(corrupt("truncated size"))?;
        let root: Hash = r
            .take(32)
            .and_then(|b| b.try_into().ok())
            .ok_or(corrupt("truncated root"))?;
        let timestamp = r.u64().ok_or(corrupt("truncated timestamp"))?;
        let mut text = || -> Result<String, Error> {
            let len = r
                .take(4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_be_bytes)
                .ok_or(corrupt("truncated length"))?;
            let bytes = r.take(len as usize).ok_or(corrupt("truncated text"))?;
            String::from_utf8(bytes.to_vec()).map_err(|_| corrupt("text is not UTF-8"))
        };
        let (body, note, cosignature) = (text()?, text()?, text()?);
        if !r.0.is_empty() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(Latest {
            size,
            root,
            body,
            note,
            cosignature,
            timestamp,
        })
    }
}

/// A cursor over a stored record.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_be_bytes)
    }
}

/// The RocksDB store.
pub(crate) struct Store {
    db: DB,
}

impl Store {
    /// Opens (or creates) the store in `dir`.
    pub(crate) fn open(dir: &Path) -> Result<Store, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let cfs = [CF_CHECKPOINTS, CF_LOGS]
            .into_iter()
            .map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
        let db = DB::open_cf_descriptors(&opts, dir, cfs)?;
        Ok(Store { db })
    }

    fn cf(&self, name: &'static str) -> Result<&rocksdb::ColumnFamily, Error> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| Error::Internal(format!("column family {name} is missing")))
    }

    fn synced() -> WriteOptions {
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        wo
    }

    fn scan(&self, cf: &'static str) -> Result<Vec<(String, Vec<u8>)>, Error> {
        let mut out = Vec::new();
        for item in self.db.iterator_cf(self.cf(cf)?, IteratorMode::Start) {
            let (k, v) = item?;
            let key = String::from_utf8(k.into_vec()).map_err(|_| Error::CorruptState {
                key: String::new(),
                reason: "key is not UTF-8",
            })?;
            out.push((key, v.into_vec()));
        }
        Ok(out)
    }

    /// Every stored checkpoint, by origin.
    pub(crate) fn load_checkpoints(&self) -> Result<Vec<(String, Latest)>, Error> {
        self.scan(CF_CHECKPOINTS)?
            .into_iter()
            .map(|(origin, v)| Latest::decode(&origin, &v).map(|l| (origin, l)))
            .collect()
    }

    /// Every known log and its vkeys.
    pub(crate) fn load_logs(&self) -> Result<Vec<(String, Vec<String>)>, Error> {
        self.scan(CF_LOGS)?
            .into_iter()
            .map(|(origin, v)| {
                let text = String::from_utf8(v).map_err(|_| Error::CorruptState {
                    key: origin.clone(),
                    reason: "vkeys are not UTF-8",
                })?;
                let keys = text.lines().map(str::to_owned).collect();
                Ok((origin, keys))
            })
            .collect()
    }

    /// Stores the latest checkpoint of `origin`, synced, alone.
    #[cfg(test)]
    pub(crate) fn put_checkpoint(&self, origin: &str, latest: &Latest) -> Result<(), Error> {
        self.db.put_cf_opt(
            self.cf(CF_CHECKPOINTS)?,
            origin.as_bytes(),
            latest.encode(),
            &Self::synced(),
        )?;
        Ok(())
    }

    /// Stores the latest checkpoints of several origins (each origin at most once), encoded
    /// ([`Latest::encode`]), in one synced write.
    pub(crate) fn write_checkpoints(&self, items: &[(&str, Vec<u8>)]) -> Result<(), Error> {
        let cf = self.cf(CF_CHECKPOINTS)?;
        let mut batch = WriteBatch::default();
        for (origin, value) in items {
            batch.put_cf(cf, origin.as_bytes(), value);
        }
        self.db.write_opt(batch, &Self::synced())?;
        Ok(())
    }

    /// Stores a log's vkeys, synced.
    pub(crate) fn put_log(&self, origin: &str, vkeys: &[String]) -> Result<(), Error> {
        self.db.put_cf_opt(
            self.cf(CF_LOGS)?,
            origin.as_bytes(),
            vkeys.join("\n").as_bytes(),
            &Self::synced(),
        )?;
        Ok(())
    }

    /// Forgets a log's keys (not its checkpoint), synced.
    pub(crate) fn delete_log(&self, origin: &str) -> Result<(), Error> {
        self.db
            .delete_cf_opt(self.cf(CF_LOGS)?, origin.as_bytes(), &Self::synced())?;
        Ok(())
    }

    /// Flushes memtables to SST files (on shutdown; the synced WAL already made writes durable).
    pub(crate) fn flush(&self) -> Result<(), Error> {
        self.db.flush_wal(true)?;
        for cf in [CF_CHECKPOINTS, CF_LOGS] {
            self.db.flush_cf(self.cf(cf)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_round_trips_and_rejects_damage() {
        let l = Latest {
            size: 7,
            root: [9; 32],
            body: "o\n7\nCQkJ\n".into(),
            note: "o\n7\nCQkJ\n\n— o sig\n".into(),
            cosignature: "— w sig\n".into(),
            timestamp: 1_700_000_000,
        };
        let enc = l.encode();
        assert_eq!(Latest::decode("o", &enc).unwrap(), l);
        assert!(Latest::decode("o", &enc[..enc.len() - 1]).is_err());
        let mut bad = enc.clone();
        bad[0] = 2;
        assert!(Latest::decode("o", &bad).is_err());
        let mut long = enc;
        long.push(0);
        assert!(Latest::decode("o", &long).is_err());
    }

    #[test]
    fn store_persists_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let l = Latest {
            size: 1,
            root: [1; 32],
            body: "b\n".into(),
            note: "n\n".into(),
            cosignature: "c\n".into(),
            timestamp: 3,
        };
        {
            let s = Store::open(dir.path()).unwrap();
            s.put_log("a", &["k1".into(), "k2".into()]).unwrap();
            s.put_log("b", &["k3".into()]).unwrap();
            s.put_checkpoint("a", &l).unwrap();
            s.delete_log("b").unwrap();
            s.flush().unwrap();
        }
        let s = Store::open(dir.path()).unwrap();
        assert_eq!(
            s.load_logs().unwrap(),
            vec![("a".to_owned(), vec!["k1".to_owned(), "k2".to_owned()])]
        );
        assert_eq!(s.load_checkpoints().unwrap(), vec![("a".to_owned(), l)]);
    }
}
