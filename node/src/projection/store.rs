//! The persisted projection (issue 15, item 1): the Work projection's derived state lives in
//! RocksDB column families, written by the ledger's writer in the SAME synced `WriteBatch` as the
//! records that change it, together with the watermark (`meta` key [`WATERMARK`]: one past the
//! sequence of the last record the stored state reflects). So the stored state and the ledger
//! never disagree: after a crash both are as of the last synced batch, and start-up replays only
//! the records after the watermark (none, unless the store predates the projection CFs).
//!
//! | cf | key | value |
//! |---|---|---|
//! | `pj_commitments` | commitment id | [`Stored`] (postcard): the kernel's commitment, the claim whose promise is due, its due time |
//! | `pj_history` | id ‖ 0 ‖ seq (u64 BE) | `HistoryEntry` (protobuf) |
//! | `pj_readers` | id ‖ 0 ‖ "org/name" | empty: the party had a role on it |
//! | `pj_acted` | record id ‖ seq (u64 BE) | the acting record's id |
//! | `pj_attention` | "org/name" ‖ 0 ‖ seq (u64 BE) ‖ n (u32 BE) | [`StoredAttention`] (postcard) |
//! | `pj_runs` | run id | [`StoredRun`] (JSON): the run |
//! | `pj_run_children` | parent run id ‖ 0 ‖ child run id | empty: the child names the parent (`child_count`) |
//! | `pj_due` | due ms (u64 BE) ‖ id | empty: the deadline index the Work service clock reads |
//! | `pj_timed` | ms (u64 BE) ‖ id | empty: a time at which the commitment's summary changes without a record ([`super::timed`]; watches read it) |
//! | `pj_envelopes` | seq (u64 BE) | the balances an envelope/tick record looked up ([`super::restart`]) |
//! | `pj_orgs` | organisation | empty: a foreign organisation authored a record here |
//! | `pj_journal` | watermark (u64 BE) | what a batch changed, for standbys ([`super::journal`]; PostgreSQL only) |
//!
//! Reads go through a bounded cache of commitments ([`Cache`], `projection.cache_commitments`)
//! and read misses from `pj_commitments`; list reads page through the column families in key
//! order. Another sub-projection plugs in by declaring its column families in [`CFS`] (or its own
//! list passed to the ledger's open), pushing its writes into the [`Writes`] sink while it
//! applies a record, and reading its column families on demand.

use crate::error::Error;
use crate::ledger::{Batch, Store};
use accord_kernel as k;
use accord_proto::pb::work::v1::HistoryEntry;
use accord_proto::signing::RecordId;
use prost::Message;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub use super::cache::Cache;

/// Commitments (id → [`Stored`]).
pub const COMMITMENTS: &str = "pj_commitments";
/// Per-commitment history.
pub const HISTORY: &str = "pj_history";
/// Who had a role on a commitment.
pub const READERS: &str = "pj_readers";
/// Acted-upon records.
pub const ACTED: &str = "pj_acted";
/// Attention lists.
pub const ATTENTION: &str = "pj_attention";
/// Runs.
pub const RUNS: &str = "pj_runs";
/// Which runs name which parent.
pub const RUN_CHILDREN: &str = "pj_run_children";
/// The deadline index.
pub const DUE: &str = "pj_due";
/// The time index: when a commitment's summary changes by time alone ([`super::timed`]).
pub const TIMED: &str = "pj_timed";
/// Records of commitments homed elsewhere waiting for their home's order (issue 26, item 3):
/// record id → (its ledger sequence, the kernel record); an empty value once the home's
/// decision applied it.
pub const PENDING: &str = "pj_pending";
/// The projection's column families, created by the ledger's store at open.
pub const CFS: &[&str] = &[
    COMMITMENTS,
    HISTORY,
    READERS,
    ACTED,
    ATTENTION,
    RUNS,
    RUN_CHILDREN,
    DUE,
    TIMED,
    PENDING,
    super::restart::ENVELOPES,
    super::restart::ORGS,
    super::journal::JOURNAL,
];
/// `meta` key: one past the sequence of the last record the stored projection reflects.
pub const WATERMARK: &str = "projection.watermark";
/// `meta` key: the stored layout's version; a store without it (or with another) is rebuilt by a
/// full replay at start-up.
pub const LAYOUT: &str = "projection.layout";
/// The current layout version (4: `Commitment.home`, issue 26, and the pending records of
/// commitments homed elsewhere; 5: `content_changes` in `Commitment` and `AnswerMark`, issue
/// 29; 6: the time index `pj_timed`, issue 27, which a replay fills; 7: `Stored::claims_due`,
/// issue 29; 8: an item's work phase and the items a deferral holds, for the summary category,
/// issue 29).
pub const LAYOUT_VERSION: &[u8] = b"8";

/// What `pj_commitments` holds for one commitment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    /// The kernel's derived state.
    pub commitment: k::Commitment,
    /// The claim whose produced promise record the Work service party has yet to write.
    #[serde(default)]
    pub promise_due: Option<RecordId>,
    /// Its key in the deadline index (`pj_due`), if the Work service party has work on it.
    #[serde(default)]
    pub due_ms: Option<i64>,
    /// The claims runs of this organisation owe the commitment (`RunEffect::ExecutionClaim`),
    /// each written by the node's clock as an `observation` of the run's executor resting on
    /// the run record, and dropped once that observation is in the ledger (issue 29).
    #[serde(default)]
    pub claims_due: Vec<OwedClaim>,
}

/// An execution claim a run owes its commitment (kept until written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwedClaim {
    /// The run record it rests on.
    pub record: RecordId,
    /// The run's executor: the observation's author.
    pub executor: k::Party,
    /// The execution claimed; `None` for a heartbeat.
    pub execution: Option<k::ExecutionReport>,
    /// The run's heartbeat interval.
    pub heartbeat_interval_ms: i64,
    /// The run ended.
    pub left_cleanly: bool,
}

/// One attention entry as stored (the recipient and sequence are in the key).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredAttention {
    /// The commitment.
    pub commitment: String,
    /// The record that raised it.
    pub record: RecordId,
    /// Its author.
    pub from: k::Party,
    /// When it was recorded.
    pub at: i64,
    /// About what.
    pub about: k::Notification,
}

/// One run as stored (defined beside the runs, which the projection owns: `runs` does not
/// depend on `projection`).
pub use crate::runs::StoredRun;

/// `pj_run_children` key.
pub fn run_child_key(parent: &str, child: &str) -> Vec<u8> {
    let mut k = prefix(parent);
    k.extend_from_slice(child.as_bytes());
    k
}

/// Default bound of the run cache (`projection.cache_runs`).
pub const DEFAULT_RUN_CACHE: usize = 1024;

/// The writes a (sub-)projection adds to the ledger's batch while it applies records; turned
/// into the batch by [`Writes::into_batch`] just before the synced write.
#[derive(Debug, Default)]
pub struct Writes(Vec<Write>);

/// One write: column family, key, and the value.
type Write = (&'static str, Vec<u8>, Vec<u8>);

impl Writes {
    /// Puts `value` at `key` of column family `cf`.
    pub fn put(&mut self, cf: &'static str, key: Vec<u8>, value: Vec<u8>) {
        self.0.push((cf, key, value));
    }

    /// Moves every write into `batch`, in the order they were added.
    pub fn into_batch(self, store: &Store, batch: &mut Batch) -> Result<(), Error> {
        for (cf, key, value) in self.0 {
            store.put_extra(batch, cf, &key, &value)?;
        }
        Ok(())
    }
}

/// Key prefix of everything about commitment (or party) `id`: `id ‖ 0`.
pub fn prefix(id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(id.len() + 13);
    k.extend_from_slice(id.as_bytes());
    k.push(0);
    k
}

/// `pj_history` key.
pub fn history_key(id: &str, seq: u64) -> Vec<u8> {
    let mut k = prefix(id);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// `pj_readers` key.
pub fn reader_key(id: &str, who: &k::Party) -> Vec<u8> {
    let mut k = prefix(id);
    k.extend_from_slice(who.to_string().as_bytes());
    k
}

/// `pj_acted` key.
pub fn acted_key(on: &RecordId, seq: u64) -> Vec<u8> {
    let mut k = on.to_vec();
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// `pj_attention` key.
pub fn attention_key(who: &k::Party, seq: u64, n: u32) -> Vec<u8> {
    let mut k = prefix(&who.to_string());
    k.extend_from_slice(&seq.to_be_bytes());
    k.extend_from_slice(&n.to_be_bytes());
    k
}

/// `pj_due` key (times before the epoch sort first).
pub fn due_key(due_ms: i64, id: &str) -> Vec<u8> {
    let mut k = (due_ms.max(0) as u64).to_be_bytes().to_vec();
    k.extend_from_slice(id.as_bytes());
    k
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Storage(format!("corrupt {what}: {e}"))
}

/// Encodes a stored value compactly (postcard: field order, varints, no names; about a third of
/// the JSON it replaced). Values with fields skipped when empty (runs) use [`encode_json`].
pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    // Serializing plain data to a Vec cannot fail.
    postcard::to_allocvec(v).unwrap_or_default()
}

/// [`encode`], appended to `buf` (a buffer the caller reuses: no allocation once it is large
/// enough).
pub fn encode_into<T: Serialize>(v: &T, buf: Vec<u8>) -> Vec<u8> {
    // Extending a Vec cannot fail; on the impossible error the value is written empty, as in
    // `encode`.
    postcard::to_extend(v, buf).unwrap_or_default()
}

/// Decodes a value [`encode`] wrote (`what` names it in the error).
pub fn decode<T: for<'de> Deserialize<'de>>(what: &str, v: &[u8]) -> Result<T, Error> {
    postcard::from_bytes(v).map_err(|e| corrupt(what, e))
}

/// Encodes a stored value as JSON: for types whose serde skips fields (the kernel's runs), which
/// a format without field names cannot read back.
pub fn encode_json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// Decodes a value [`encode_json`] wrote.
pub fn decode_json<T: for<'de> Deserialize<'de>>(what: &str, v: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(v).map_err(|e| corrupt(what, e))
}

/// The stored projection: the store and the cache of commitments, shared by the writer's working
/// copy and every reader.
#[derive(Debug)]
pub struct Persisted {
    store: Arc<Store>,
    cache: Cache,
    runs: Cache<accord_kernel::run::Run>,
}

impl Persisted {
    /// The projection stored in `store`, read through a cache of `cap` commitments.
    pub fn new(store: Arc<Store>, cap: usize) -> Persisted {
        Persisted {
            store,
            cache: Cache::new(cap),
            runs: Cache::new(DEFAULT_RUN_CACHE),
        }
    }

    /// Reads runs through a cache of `cap` runs (`projection.cache_runs`).
    pub fn with_run_cache(mut self, cap: usize) -> Persisted {
        self.runs = Cache::new(cap);
        self
    }

    /// The run cache.
    pub fn run_cache(&self) -> &Cache<accord_kernel::run::Run> {
        &self.runs
    }

    /// The stored state of run `id` (from the run cache, or read and cached).
    pub fn run(&self, id: &str) -> Result<Option<Arc<accord_kernel::run::Run>>, Error> {
        let (hit, generation) = self.runs.get(id);
        if hit.is_some() {
            return Ok(hit);
        }
        match self.store.get_extra(RUNS, id.as_bytes())? {
            Some(v) => {
                let r = Arc::new(decode_json::<StoredRun>("run", &v)?.run);
                self.runs.insert_if(generation, id, r.clone());
                Ok(Some(r))
            }
            None => Ok(None),
        }
    }

    /// How many runs name `parent` as their parent (O(those), from `pj_run_children`).
    pub fn child_count(&self, parent: &str) -> Result<usize, Error> {
        let p = prefix(parent);
        let mut n = 0;
        self.store.scan_extra(RUN_CHILDREN, &p, |k, _| {
            let mine = k.starts_with(&p);
            n += usize::from(mine);
            mine
        })?;
        Ok(n)
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The cache.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The stored state of commitment `id` (from the cache, or read and cached).
    pub fn stored(&self, id: &str) -> Result<Option<Arc<Stored>>, Error> {
        let (hit, generation) = self.cache.get(id);
        if hit.is_some() {
            return Ok(hit);
        }
        match self.store.get_extra(COMMITMENTS, id.as_bytes())? {
            Some(v) => {
                let s: Arc<Stored> = Arc::new(decode("commitment", &v)?);
                self.cache.insert_if(generation, id, s.clone());
                Ok(Some(s))
            }
            None => Ok(None),
        }
    }

    /// The watermark: how many ledger records the stored projection reflects.
    pub fn watermark(&self) -> Result<u64, Error> {
        Ok(match self.store.meta(WATERMARK)? {
            Some(v) => u64::from_be_bytes(
                v.as_slice()
                    .try_into()
                    .map_err(|_| corrupt("watermark", "not 8 bytes"))?,
            ),
            None => 0,
        })
    }

    /// Whether the stored layout is the one this code writes.
    pub fn layout_current(&self) -> Result<bool, Error> {
        Ok(self.store.meta(LAYOUT)?.as_deref() == Some(LAYOUT_VERSION))
    }

    /// Visits the entries of `cf` whose key starts with `prefix`, from `from` (inclusive), while
    /// `f` returns true.
    fn scan_prefix(
        &self,
        cf: &str,
        prefix: &[u8],
        from: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, Error>,
    ) -> Result<(), Error> {
        let mut failed = None;
        self.store.scan_extra(cf, from, |k, v| {
            if !k.starts_with(prefix) {
                return false;
            }
            match f(k, v) {
                Ok(go) => go,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        })?;
        failed.map_or(Ok(()), Err)
    }

    /// The history of commitment `id`, in ledger order.
    pub fn history(&self, id: &str) -> Result<Vec<HistoryEntry>, Error> {
        let p = prefix(id);
        let mut out = Vec::new();
        self.scan_prefix(HISTORY, &p, &p, |_, v| {
            out.push(HistoryEntry::decode(v).map_err(|e| corrupt("history", e))?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// Whether `who` had a role on commitment `id`.
    pub fn had_role(&self, id: &str, who: &k::Party) -> Result<bool, Error> {
        Ok(self
            .store
            .get_extra(READERS, &reader_key(id, who))?
            .is_some())
    }

    /// The organisations of every party that ever had a role on `id` (`pj_readers`).
    pub fn past_organisations(&self, id: &str) -> Result<Vec<String>, Error> {
        let p = prefix(id);
        let mut out: Vec<String> = Vec::new();
        self.store.scan_extra(READERS, &p, |k, _| {
            let Some(rest) = k.strip_prefix(p.as_slice()) else {
                return false;
            };
            if let Some(org) = String::from_utf8_lossy(rest).split('/').next()
                && !out.iter().any(|o| o == org)
            {
                out.push(org.to_string());
            }
            true
        })?;
        Ok(out)
    }

    /// The applied `acted_upon` records naming `on`, in ledger order.
    pub fn acted_upon(&self, on: &RecordId) -> Result<Vec<RecordId>, Error> {
        let mut out = Vec::new();
        self.scan_prefix(ACTED, on, on, |_, v| {
            out.push(v.try_into().map_err(|_| corrupt("acted_upon", "id"))?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// Up to `max` entries of `who`'s attention list after `after` (exclusive), in ledger order.
    pub fn attention(
        &self,
        who: &k::Party,
        after: Option<u64>,
        max: usize,
    ) -> Result<Vec<super::Attention>, Error> {
        let p = prefix(&who.to_string());
        let mut from = p.clone();
        if let Some(s) = after {
            match s.checked_add(1) {
                Some(n) => from.extend_from_slice(&n.to_be_bytes()),
                None => return Ok(Vec::new()),
            }
        }
        let mut out = Vec::new();
        self.scan_prefix(ATTENTION, &p, &from, |key, v| {
            let seq = key
                .get(p.len()..p.len() + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
                .ok_or_else(|| corrupt("attention", "key"))?;
            let a: StoredAttention = decode("attention", v)?;
            out.push(super::Attention {
                sequence: seq,
                commitment: a.commitment,
                record: a.record,
                from: a.from,
                at: a.at,
                about: a.about,
            });
            Ok(out.len() < max)
        })?;
        Ok(out)
    }

    /// Up to `max` stored commitments after id `after` (exclusive; from the first when empty),
    /// in id order.
    pub fn commitments_after(&self, after: &str, max: usize) -> Result<Vec<Arc<Stored>>, Error> {
        let mut from = after.as_bytes().to_vec();
        if !after.is_empty() {
            from.push(0);
        }
        let mut out = Vec::new();
        let mut failed = None;
        self.store.scan_extra(COMMITMENTS, &from, |_, v| {
            match decode::<Stored>("commitment", v) {
                Ok(s) => out.push(Arc::new(s)),
                Err(e) => failed = Some(e),
            }
            failed.is_none() && out.len() < max
        })?;
        failed.map_or(Ok(out), Err)
    }

    /// The commitments in the deadline index due at or before `now`, earliest first, at most
    /// `max`: the Work service clock's work list (O(due), not O(open)).
    pub fn due(&self, now: i64, max: usize) -> Result<Vec<String>, Error> {
        let end = (now.max(0) as u64).to_be_bytes();
        let mut out = Vec::new();
        self.store.scan_extra(DUE, &[], |key, _| {
            if key.len() < 8 || key[..8] > end[..] {
                return false;
            }
            out.push(String::from_utf8_lossy(&key[8..]).into_owned());
            out.len() < max
        })?;
        Ok(out)
    }

    /// The commitments whose summary changes by time in `(after, until]`, in time order, at
    /// most `max` (the time index; a watch's tick reads only what came due since its last).
    pub fn timed(&self, after: i64, until: i64, max: usize) -> Result<Vec<(i64, String)>, Error> {
        let mut out = Vec::new();
        if until <= after {
            return Ok(out);
        }
        let from = after.saturating_add(1).max(0) as u64;
        let end = until.max(0) as u64;
        self.store
            .scan_extra(TIMED, &from.to_be_bytes(), |key, _| {
                let Some(t) = key.get(..8).and_then(|b| b.try_into().ok()) else {
                    return false;
                };
                let t = u64::from_be_bytes(t);
                if t > end {
                    return false;
                }
                out.push((t as i64, String::from_utf8_lossy(&key[8..]).into_owned()));
                out.len() < max
            })?;
        Ok(out)
    }

    /// Every record still waiting for its commitment's home (loaded once at start-up).
    pub fn pending(&self) -> Result<Vec<(u64, k::Record)>, Error> {
        let mut out = Vec::new();
        let mut failed = None;
        self.store.scan_extra(PENDING, &[], |_, v| {
            if !v.is_empty() {
                match decode_json::<(u64, k::Record)>("pending record", v) {
                    Ok(r) => out.push(r),
                    Err(e) => failed = Some(e),
                }
            }
            failed.is_none()
        })?;
        failed.map_or(Ok(out), Err)
    }
}

/// The stored projection of commitment `id` (for `ledger verify`, which compares it with a
/// replay): its commitment state and history, read from the store without a cache.
#[allow(dead_code)] // the audit's entry point (`accordctl ledger verify`)
pub fn load_commitment(
    store: &Arc<Store>,
    id: &str,
) -> Result<Option<(k::Commitment, Vec<HistoryEntry>)>, Error> {
    let p = Persisted::new(store.clone(), 2);
    let Some(s) = p.stored(id)? else {
        return Ok(None);
    };
    Ok(Some((s.commitment.clone(), p.history(id)?)))
}

/// Visits every stored commitment in id order (for `ledger verify`) while `f` returns true.
#[allow(dead_code)] // the audit's entry point (`accordctl ledger verify`)
pub fn for_each_commitment(
    store: &Store,
    mut f: impl FnMut(&k::Commitment) -> bool,
) -> Result<(), Error> {
    let mut failed = None;
    store.scan_extra(COMMITMENTS, &[], |_, v| {
        match decode::<Stored>("commitment", v) {
            Ok(s) => f(&s.commitment),
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    })?;
    failed.map_or(Ok(()), Err)
}
