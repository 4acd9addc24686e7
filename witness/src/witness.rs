//! The witness proper: add-checkpoint as c2sp.org/tlog-witness specifies it, the latest state per
//! origin, and the set of known logs. Transports (HTTP, gRPC) and in-process callers (e.g. a
//! benchmark) all go through [`Witness`].
//!
//! **Atomicity.** Per origin, the check against the held checkpoint and the synced store of the new
//! one are one step (c2sp.org/tlog-witness, "add-checkpoint": "checking the old size against the
//! latest checkpoint and persisting the new checkpoint must be performed atomically"). Each origin
//! has a FIFO async mutex over its cached [`Latest`]; the holder compares and cosigns on its own
//! task, then hands the guard with the cosigned checkpoint to the group commit
//! ([`crate::commit`]), which writes RocksDB with `sync` and only then updates the cache and
//! releases the lock, so the step runs to completion even if the caller goes away mid-request.
//!
//! **Fairness.** See [`Limits`]: a flood for one origin fills that origin's queue and then gets
//! 429 / `RESOURCE_EXHAUSTED`, leaving the rest of the witness-wide budget to other origins.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use accord_proto::checkpoint::{Checkpoint, Cosigner};
use accord_proto::merkle::{self, EMPTY_ROOT, Hash};
use accord_proto::note::{Note, Verifier};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use tokio::sync::{Mutex, Semaphore};
use tracing::{info, instrument, warn};

use crate::clock::Clock;
use crate::commit::{Committer, Pending};
use crate::error::{Error, LimitScope};
use crate::logs::LogConfig;
use crate::request::AddCheckpoint;
use crate::store::{Latest, Store};

/// Admission limits for add-checkpoint.
///
/// - `max_in_flight`: add-checkpoint requests being processed witness-wide (parsing, signature
///   checks, queueing, storing). Beyond it: 503 / `RESOURCE_EXHAUSTED`.
/// - `max_queued_per_origin`: requests for one origin that passed the signature check and are
///   waiting for, or holding, that origin's lock. Beyond it: 429 / `RESOURCE_EXHAUSTED`. Only
///   checkpoints signed by the log count here, so nobody but the log can fill its queue, and one
///   origin can hold at most this many of the `max_in_flight` slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Witness-wide in-flight add-checkpoint requests.
    pub max_in_flight: usize,
    /// Per-origin queued-or-running requests.
    pub max_queued_per_origin: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_in_flight: 256,
            max_queued_per_origin: 16,
        }
    }
}

/// What [`Witness::open`] needs.
pub struct WitnessOptions {
    /// The RocksDB directory.
    pub data_dir: PathBuf,
    /// The witness's cosigning keys (Ed25519 type 0x04 and/or ML-DSA-44 type 0x06; at least
    /// one). add-checkpoint answers with one cosignature line per key, in this order.
    pub cosigners: Vec<Cosigner>,
    /// Logs to add (or whose keys to replace) at start.
    pub logs: Vec<LogConfig>,
    /// Admission limits.
    pub limits: Limits,
    /// The cosignature time source.
    pub clock: Arc<dyn Clock>,
}

/// A successful add-checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosigned {
    /// The log origin.
    pub origin: String,
    /// The co-signed tree size.
    pub size: u64,
    /// The co-signed root.
    pub root: Hash,
    /// The cosignature timestamp.
    pub timestamp: u64,
    /// The response body: the cosignature lines, one per witness key, each
    /// `— <name> <base64>\n`.
    pub cosignatures: String,
}

/// A known log and the size the witness holds for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogStatus {
    /// The log.
    pub log: LogConfig,
    /// The held size (0 if none).
    pub size: u64,
}

/// Per-origin state. Kept after a log is removed, so re-adding it cannot roll it back.
struct Slot {
    latest: Arc<Mutex<Option<Latest>>>,
    /// Mirrors the held size for lock-free listing.
    size: Arc<AtomicU64>,
    queue: Arc<Semaphore>,
}

struct Entry {
    /// `None` once the log was removed (the slot stays).
    log: Option<Arc<LogConfig>>,
    slot: Arc<Slot>,
}

/// A witness: its key, its store and its logs.
pub struct Witness {
    pub(crate) cosigners: Arc<Vec<Cosigner>>,
    /// SHA-256(origin) → origin, for the monitoring endpoint (c2sp.org/tlog-witness "Monitor
    /// Retrieval Mechanism"); every origin with a slot is here.
    by_hash: RwLock<std::collections::HashMap<Hash, String>>,
    store: Arc<Store>,
    /// The synced writes of add-checkpoint, grouped across origins.
    committer: Arc<Committer>,
    clock: Arc<dyn Clock>,
    limits: Limits,
    pub(crate) global: Arc<Semaphore>,
    entries: RwLock<BTreeMap<String, Entry>>,
    /// Serialises admin changes so the store and the in-memory map change in the same order.
    admin: Mutex<()>,
    /// Prometheus metrics (served on `metrics_listen`).
    metrics: crate::metrics::Metrics,
}

impl std::fmt::Debug for Witness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Witness")
            .field("cosigners", &self.cosigners)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

fn lock_poisoned() -> Error {
    Error::Internal("witness state lock poisoned".to_owned())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("blocking task failed: {e}")))?
}

impl Witness {
    /// Opens the store (blocking I/O: call it from a blocking context or before serving), writes
    /// the configured logs into it, and loads every known log and held checkpoint.
    pub fn open(opts: WitnessOptions) -> Result<Witness, Error> {
        if opts.limits.max_in_flight == 0 || opts.limits.max_queued_per_origin == 0 {
            return Err(Error::config("limits", "limits must be at least 1"));
        }
        if opts.cosigners.is_empty() {
            return Err(Error::config(
                "key_file",
                "a witness needs at least one key",
            ));
        }
        let store = Store::open(&opts.data_dir)?;
        for log in &opts.logs {
            store.put_log(log.origin(), &log.vkeys())?;
        }
        let new_slot = |latest: Option<Latest>| {
            Arc::new(Slot {
                size: Arc::new(AtomicU64::new(latest.as_ref().map_or(0, |l| l.size))),
                latest: Arc::new(Mutex::new(latest)),
                queue: Arc::new(Semaphore::new(opts.limits.max_queued_per_origin)),
            })
        };
        let mut entries = BTreeMap::new();
        for (origin, latest) in store.load_checkpoints()? {
            let slot = new_slot(Some(latest));
            entries.insert(origin, Entry { log: None, slot });
        }
        for (origin, vkeys) in store.load_logs()? {
            let log = LogConfig::new(&origin, &vkeys).map_err(|_| Error::CorruptState {
                key: origin.clone(),
                reason: "stored log keys do not parse",
            })?;
            entries
                .entry(origin)
                .or_insert_with(|| Entry {
                    log: None,
                    slot: new_slot(None),
                })
                .log = Some(Arc::new(log));
        }
        let by_hash = entries
            .keys()
            .map(|o| (origin_hash(o), o.clone()))
            .collect();
        let store = Arc::new(store);
        let metrics = crate::metrics::Metrics::new();
        Ok(Witness {
            cosigners: Arc::new(opts.cosigners),
            by_hash: RwLock::new(by_hash),
            committer: Arc::new(Committer::new(store.clone(), metrics.checkpoint_writes())),
            store,
            clock: opts.clock,
            global: Arc::new(Semaphore::new(opts.limits.max_in_flight)),
            limits: opts.limits,
            entries: RwLock::new(entries),
            admin: Mutex::new(()),
            metrics,
        })
    }

    /// The witness's metrics.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// The witness's first cosigner public key; `to_vkey()` is what logs configure.
    pub fn verifier(&self) -> Verifier {
        self.cosigners[0].verifier()
    }

    /// All the witness's cosigner public keys, in the order of its cosignature lines.
    pub fn verifiers(&self) -> Vec<Verifier> {
        self.cosigners.iter().map(Cosigner::verifier).collect()
    }

    fn known(&self, origin: &str) -> Result<(Arc<LogConfig>, Arc<Slot>), Error> {
        let entries = self.entries.read().map_err(|_| lock_poisoned())?;
        match entries.get(origin) {
            Some(Entry {
                log: Some(log),
                slot,
            }) => Ok((log.clone(), slot.clone())),
            _ => Err(Error::UnknownOrigin {
                origin: origin.to_owned(),
            }),
        }
    }

    /// add-checkpoint (c2sp.org/tlog-witness): verifies the log's signature, the old size and
    /// the consistency proof against the held checkpoint, stores the new checkpoint (synced) and
    /// returns the cosignature line. Errors are in the order the spec lists them: 404, 403, 400,
    /// 409, 422.
    pub async fn add_checkpoint(&self, req: AddCheckpoint) -> Result<Cosigned, Error> {
        let r = self.add_checkpoint_counted(req).await;
        self.metrics.add_checkpoint(&r);
        r
    }

    #[instrument(name = "add_checkpoint", skip_all, fields(origin = tracing::field::Empty, old_size = req.old_size, size = tracing::field::Empty))]
    async fn add_checkpoint_counted(&self, req: AddCheckpoint) -> Result<Cosigned, Error> {
        let global = self
            .global
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::Overloaded {
                scope: LimitScope::Global,
            })?;
        let note = Note::parse(req.checkpoint.as_bytes())
            .map_err(|e| Error::malformed(format!("checkpoint note: {e}")))?;
        let cp = Checkpoint::parse(note.text())
            .map_err(|e| Error::malformed(format!("checkpoint: {e}")))?;
        let span = tracing::Span::current();
        span.record("origin", cp.origin.as_str());
        span.record("size", cp.size);
        let (log, slot) = self.known(&cp.origin)?;
        // c2sp.org/signed-note semantics: unknown keys are ignored, a known key whose signature
        // fails rejects the note, and at least one known key must have signed.
        note.verify(log.verifiers())
            .map_err(|source| Error::Untrusted {
                origin: cp.origin.clone(),
                source,
            })?;
        if req.old_size > cp.size {
            return Err(Error::OldSizeTooLarge {
                old_size: req.old_size,
                size: cp.size,
            });
        }
        let queued = slot
            .queue
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::Overloaded {
                scope: LimitScope::Origin,
            })?;
        let held = slot.latest.clone().lock_owned().await;
        // No await between here and the hand-over to the committer: once the lock is held, the
        // step completes whether or not the caller stays.
        let result = match self.check_and_cosign(&held, &req, &cp, note.text()) {
            Ok((latest, cosigned)) => {
                let pending = Pending {
                    origin: cp.origin,
                    latest,
                    held,
                    size: slot.size.clone(),
                    permits: vec![global, queued],
                };
                self.committer.commit(pending).await.map(|()| cosigned)
            }
            Err(e) => Err(e),
        };
        match &result {
            Ok(c) => info!(timestamp = c.timestamp, "co-signed"),
            Err(e @ Error::Inconsistent { .. }) => {
                warn!(error = %e, "refused: possible log misbehaviour")
            }
            Err(e) => info!(error = %e, "refused"),
        }
        result
    }

    /// The first half of the atomic step, under the origin's lock: the old size and the
    /// consistency proof against the held checkpoint (409, 422), then the cosignature(s) of the
    /// new one. The second half, the synced write, is the committer's.
    fn check_and_cosign(
        &self,
        held: &Option<Latest>,
        req: &AddCheckpoint,
        cp: &Checkpoint,
        body: &str,
    ) -> Result<(Latest, Cosigned), Error> {
        let (held_size, held_root) = held.as_ref().map_or((0, EMPTY_ROOT), |l| (l.size, l.root));
        if req.old_size != held_size {
            return Err(Error::SizeMismatch {
                old_size: req.old_size,
                held: held_size,
            });
        }
        check_consistency(held_size, &held_root, cp, &req.proof)?;
        let timestamp = self.clock.now();
        let mut cosignature = String::new();
        for c in self.cosigners.iter() {
            let line = c
                .cosign(body, timestamp)
                .map_err(|e| Error::Internal(format!("cosigning failed: {e}")))?;
            cosignature.push_str(&line.to_line());
        }
        let cosigned = Cosigned {
            origin: cp.origin.clone(),
            size: cp.size,
            root: cp.root,
            timestamp,
            cosignatures: cosignature.clone(),
        };
        let latest = Latest {
            size: cp.size,
            root: cp.root,
            body: body.to_owned(),
            note: req.checkpoint.clone(),
            cosignature,
            timestamp,
        };
        Ok((latest, cosigned))
    }

    /// The latest checkpoint held for `origin` (also after the log was removed). Unknown origins
    /// without state are [`Error::UnknownOrigin`].
    pub async fn latest(&self, origin: &str) -> Result<Option<Latest>, Error> {
        let slot = {
            let entries = self.entries.read().map_err(|_| lock_poisoned())?;
            entries
                .get(origin)
                .map(|e| e.slot.clone())
                .ok_or_else(|| Error::UnknownOrigin {
                    origin: origin.to_owned(),
                })?
        };
        let latest = slot.latest.lock().await;
        Ok(latest.clone())
    }

    /// The monitoring view of the log whose origin hashes to `hash` (c2sp.org/tlog-witness
    /// "Monitor Retrieval Mechanism"): the latest checkpoint the witness co-signed, with the log
    /// signature(s) it verified and its own cosignature line(s). [`Error::UnknownOrigin`] if it
    /// never co-signed a checkpoint for that log.
    pub async fn monitoring_checkpoint(&self, hash: &Hash) -> Result<String, Error> {
        let not_found = || Error::UnknownOrigin {
            origin: format!("(origin hash {})", hex::encode(hash)),
        };
        let origin = self
            .by_hash
            .read()
            .map_err(|_| lock_poisoned())?
            .get(hash)
            .cloned()
            .ok_or_else(not_found)?;
        let log = self.log(&origin)?;
        let latest = self.latest(&origin).await?.ok_or_else(not_found)?;
        cosigned_note(&origin, log.as_deref(), &latest)
    }

    /// The log's current configuration (`None` once removed).
    pub(crate) fn log(&self, origin: &str) -> Result<Option<Arc<LogConfig>>, Error> {
        let entries = self.entries.read().map_err(|_| lock_poisoned())?;
        Ok(entries.get(origin).and_then(|e| e.log.clone()))
    }

    /// Adds a log, or replaces its keys; persisted (synced) before it returns.
    #[instrument(skip_all, fields(origin = log.origin()))]
    pub async fn add_log(&self, log: LogConfig) -> Result<(), Error> {
        let _admin = self.admin.lock().await;
        let store = self.store.clone();
        let (origin, vkeys) = (log.origin().to_owned(), log.vkeys());
        blocking(move || store.put_log(&origin, &vkeys)).await?;
        let mut entries = self.entries.write().map_err(|_| lock_poisoned())?;
        let max = self.limits.max_queued_per_origin;
        let origin = log.origin().to_owned();
        self.by_hash
            .write()
            .map_err(|_| lock_poisoned())?
            .insert(origin_hash(&origin), origin.clone());
        entries
            .entry(origin)
            .or_insert_with(|| Entry {
                log: None,
                slot: Arc::new(Slot {
                    latest: Arc::new(Mutex::new(None)),
                    size: Arc::new(AtomicU64::new(0)),
                    queue: Arc::new(Semaphore::new(max)),
                }),
            })
            .log = Some(Arc::new(log));
        info!("log added");
        Ok(())
    }

    /// Removes a log (persisted, synced). Its held checkpoint is kept, so re-adding the log later
    /// continues from it and cannot roll it back.
    #[instrument(skip(self))]
    pub async fn remove_log(&self, origin: &str) -> Result<(), Error> {
        let _admin = self.admin.lock().await;
        self.known(origin)?;
        let store = self.store.clone();
        let o = origin.to_owned();
        blocking(move || store.delete_log(&o)).await?;
        let mut entries = self.entries.write().map_err(|_| lock_poisoned())?;
        if let Some(e) = entries.get_mut(origin) {
            e.log = None;
        }
        info!("log removed");
        Ok(())
    }

    /// The known logs, by origin, with the size held for each.
    pub fn list_logs(&self) -> Result<Vec<LogStatus>, Error> {
        let entries = self.entries.read().map_err(|_| lock_poisoned())?;
        Ok(entries
            .values()
            .filter_map(|e| {
                e.log.as_ref().map(|log| LogStatus {
                    log: (**log).clone(),
                    size: e.slot.size.load(Ordering::SeqCst),
                })
            })
            .collect())
    }

    /// Flushes RocksDB (every write is already synced; this just leaves tidy SST files).
    pub fn flush(&self) -> Result<(), Error> {
        self.store.flush()
    }
}

/// The checkpoint `latest` as a signed note carrying the log's signature(s) and the witness's
/// cosignature line(s). The log's signatures are those of the submitted note by a key the log
/// is configured with (or, for a removed log, named as its origin); other lines in the submitted
/// note (e.g. other witnesses') are left out.
pub(crate) fn cosigned_note(
    origin: &str,
    log: Option<&LogConfig>,
    latest: &Latest,
) -> Result<String, Error> {
    let corrupt = |reason| Error::CorruptState {
        key: origin.to_owned(),
        reason,
    };
    let submitted = Note::parse(latest.note.as_bytes()).map_err(|_| corrupt("stored note"))?;
    let mut out = Note::new(&latest.body).map_err(|_| corrupt("stored body"))?;
    for sig in submitted.signatures() {
        let by_log = match log {
            Some(log) => log
                .verifiers()
                .iter()
                .any(|v| v.name() == sig.name && v.key_id() == sig.key_id),
            None => sig.name == origin,
        };
        if by_log {
            out.add_signature(sig.clone())
                .map_err(|_| corrupt("stored note"))?;
        }
    }
    for line in latest.cosignature.lines() {
        let sig = accord_proto::note::NoteSignature::parse_line(line)
            .map_err(|_| corrupt("stored cosignature"))?;
        out.add_signature(sig)
            .map_err(|_| corrupt("stored cosignature"))?;
    }
    Ok(out.to_string())
}

/// SHA-256 of an origin: the `<origin hash>` of the monitoring endpoint.
pub fn origin_hash(origin: &str) -> Hash {
    use sha2::Digest as _;
    sha2::Sha256::digest(origin.as_bytes()).into()
}

/// The 422 checks of c2sp.org/tlog-witness: the proof from the held size must verify (RFC 9162
/// §2.1.4.2), must be empty from size 0; the same size must have the same root; an empty tree
/// must have the root SHA-256("").
fn check_consistency(
    held_size: u64,
    held_root: &Hash,
    cp: &Checkpoint,
    proof: &[Hash],
) -> Result<(), Error> {
    let inconsistent = |reason: String| Error::Inconsistent { reason };
    if held_size == 0 && !proof.is_empty() {
        return Err(inconsistent(
            "the consistency proof from size 0 must be empty".into(),
        ));
    }
    if cp.size == 0 && cp.root != EMPTY_ROOT {
        return Err(inconsistent(
            "a size-0 checkpoint must have the empty root SHA-256(\"\")".into(),
        ));
    }
    if held_size == cp.size && held_root != &cp.root {
        return Err(inconsistent(format!(
            "the witness holds size {held_size} with root {}, not {}",
            B64.encode(held_root),
            B64.encode(cp.root)
        )));
    }
    merkle::verify_consistency(held_size, cp.size, proof, held_root, &cp.root)
        .map_err(|e| inconsistent(e.to_string()))
}

#[cfg(test)]
#[path = "witness_tests.rs"]
mod tests;
