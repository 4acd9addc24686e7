//! The stored projection against the replay's (issue 15, item 2: "compares both with what is
//! stored"). The audit replays every record through the node's own projection machine into a
//! scratch store ([`Scratch`]: the same column families, written by the same code, outside the
//! audited data dir), then compares the two column family by column family:
//!
//! * every key either side holds must be in the other with an equal value (commitments compared
//!   as decoded values without their deadline-index time, which depends on the batch the record
//!   was committed in, not on the records); this covers the time index (`pj_timed`, a function
//!   of each commitment alone), the run-children index and the records waiting for their home's
//!   order (`pj_pending`) as well as the commitments, histories, readers, attention lists, runs,
//!   envelopes and organisations;
//! * the deadline index (`pj_due`) is checked against the stored commitments instead: each due
//!   commitment has exactly its entry, and no entry names anything else;
//! * the watermark must cover every record.
//!
//! Each difference is placed at a ledger sequence: the one in its key (history, attention,
//! acted-upon, envelope index), else the last record of its commitment (its state after that
//! record is what differs), else the last record. The first one is reported.

use crate::error::Error;
use crate::ledger::{Batch, Machine, Store};
use crate::projection::restart::{ENVELOPES, ORGS};
use crate::projection::store::{self as ps, Stored};
use std::path::PathBuf;
use std::sync::Arc;

/// A scratch store for the replay's projection, deleted when dropped.
pub(super) struct Scratch {
    pub store: Arc<Store>,
    dir: PathBuf,
}

impl Scratch {
    /// A new, empty store in the system's temporary directory.
    pub fn new() -> Result<Scratch, Error> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("accord-verify-{}-{nanos}", std::process::id()));
        let store = Arc::new(Store::open(&dir, ps::CFS)?);
        Ok(Scratch { store, dir })
    }

    /// Writes what `machine` derived since the last call (not synced: scratch data).
    pub fn flush<M: Machine>(&self, machine: &mut M) -> Result<(), Error> {
        let mut batch = Batch::default();
        let pending = machine.persist(&self.store, &mut batch)?;
        self.store.write(batch, false)?;
        machine.publish(pending);
        Ok(())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // The store's handle may still be shared; RocksDB's files can be removed regardless.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The sequence a key of `cf` names, if it names one.
fn key_sequence(cf: &str, key: &[u8]) -> Option<u64> {
    let be = |b: &[u8]| b.try_into().ok().map(u64::from_be_bytes);
    match cf {
        ps::HISTORY | ps::ACTED => key.len().checked_sub(8).and_then(|i| be(&key[i..])),
        ps::ATTENTION => key.len().checked_sub(12).and_then(|i| be(&key[i..i + 8])),
        ENVELOPES => be(key),
        _ => None,
    }
}

/// The commitment id a key of `cf` belongs to, if any.
fn key_commitment(cf: &str, key: &[u8]) -> Option<String> {
    let id = match cf {
        ps::COMMITMENTS => key,
        ps::READERS => &key[..key.iter().position(|b| *b == 0)?],
        // `timed::key`: the time (8 bytes) ‖ the commitment id.
        ps::TIMED => key.get(8..)?,
        _ => return None,
    };
    Some(String::from_utf8_lossy(id).into_owned())
}

/// The last ledger sequence of commitment `id` in `store`'s history.
fn last_of(store: &Store, id: &str) -> Result<Option<u64>, Error> {
    let p = ps::prefix(id);
    let mut end = p.clone();
    end.extend_from_slice(&[0xff; 8]);
    let mut last = None;
    store.scan_extra_rev(ps::HISTORY, &end, |k, _| {
        if k.starts_with(&p) {
            last = key_sequence(ps::HISTORY, k);
        }
        false
    })?;
    Ok(last)
}

/// Whether two values of `cf` agree.
fn same(cf: &str, a: &[u8], b: &[u8]) -> bool {
    if cf != ps::COMMITMENTS {
        return a == b;
    }
    let strip = |v: &[u8]| {
        ps::decode::<Stored>("commitment", v).ok().map(|mut s| {
            s.due_ms = None;
            s
        })
    };
    match (strip(a), strip(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Visits every entry of `cf` in `a` and looks its key up in `b`; `f` gets each key whose value
/// differs or is missing there.
fn one_way(
    a: &Store,
    b: &Store,
    cf: &str,
    f: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut failed = None;
    a.scan_extra(cf, &[], |k, v| {
        let differs = match b.get_extra(cf, k) {
            Ok(Some(w)) => !same(cf, v, &w),
            Ok(None) => true,
            Err(e) => {
                failed = Some(e);
                return false;
            }
        };
        if differs && let Err(e) = f(k) {
            failed = Some(e);
        }
        failed.is_none()
    })?;
    failed.map_or(Ok(()), Err)
}

/// Compares the projection `stored` holds with the one the replay wrote to `replayed` over
/// `total` records: the first difference, with the sequence where it appears.
pub(super) fn compare(
    stored: &Store,
    replayed: &Store,
    total: u64,
) -> Result<Option<(u64, String)>, Error> {
    let last = total.saturating_sub(1);
    let mut first: Option<(u64, String)> = None;
    let mut note = |seq: u64, what: String| {
        if first.as_ref().is_none_or(|(s, _)| seq < *s) {
            first = Some((seq, what));
        }
    };
    let watermark = stored
        .meta(ps::WATERMARK)?
        .and_then(|v| v.try_into().ok().map(u64::from_be_bytes));
    if watermark != Some(total) {
        note(
            last,
            format!("the projection's watermark is {watermark:?}, the ledger has {total} records"),
        );
    }
    let compared = [
        ps::COMMITMENTS,
        ps::HISTORY,
        ps::READERS,
        ps::ACTED,
        ps::ATTENTION,
        ps::RUNS,
        ps::RUN_CHILDREN,
        ps::TIMED,
        ps::PENDING,
        ENVELOPES,
        ORGS,
    ];
    for cf in compared {
        for (a, b, side) in [(stored, replayed, "stored"), (replayed, stored, "replayed")] {
            one_way(a, b, cf, &mut |k| {
                let seq = match key_sequence(cf, k) {
                    Some(s) => s,
                    None => match key_commitment(cf, k) {
                        Some(id) => last_of(replayed, &id)?
                            .or(last_of(stored, &id)?)
                            .unwrap_or(last),
                        None => last,
                    },
                };
                let shown = crate::ident::truncate(&String::from_utf8_lossy(k), 80);
                note(
                    seq,
                    format!(
                        "{cf} {shown:?}: the {side} value differs or is missing on the other side"
                    ),
                );
                Ok(())
            })?;
        }
    }
    // The deadline index against the stored commitments (its times depend on batching).
    stored.scan_extra(ps::COMMITMENTS, &[], |k, v| {
        let id = String::from_utf8_lossy(k).into_owned();
        let due = ps::decode::<Stored>("commitment", v)
            .ok()
            .and_then(|s| s.due_ms);
        if let Some(d) = due
            && !matches!(stored.get_extra(ps::DUE, &ps::due_key(d, &id)), Ok(Some(_)))
        {
            let seq = last_of(stored, &id).ok().flatten().unwrap_or(last);
            note(seq, format!("pj_due has no entry for {id:?} due at {d}"));
        }
        true
    })?;
    stored.scan_extra(ps::DUE, &[], |k, _| {
        let id = String::from_utf8_lossy(k.get(8..).unwrap_or_default()).into_owned();
        let at = k
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(|b: [u8; 8]| u64::from_be_bytes(b) as i64);
        let due = stored
            .get_extra(ps::COMMITMENTS, id.as_bytes())
            .ok()
            .flatten()
            .and_then(|v| ps::decode::<Stored>("commitment", &v).ok())
            .and_then(|s| s.due_ms.map(|d| d.max(0)));
        if due != at {
            let seq = last_of(stored, &id).ok().flatten().unwrap_or(last);
            note(seq, format!("pj_due names {id:?}, which is not due then"));
        }
        true
    })?;
    Ok(first)
}
