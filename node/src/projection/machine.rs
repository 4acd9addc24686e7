//! The ledger machine around the projection: a working copy the writer thread applies to and
//! persists into each synced batch, and the shared read side, which shows a batch only once it
//! is synced.

use super::Projection;
use super::store::{self, Persisted};
use super::working::Working;
use crate::error::Error;
use crate::ledger::{Batch, Machine, Outcome, Store};
use accord_kernel as k;
use accord_proto::pb::record::v1::Record as PbRecord;
use accord_proto::pb::work::v1::LedgerEntry;
use accord_proto::signing::RecordId;
use prost::Message;
use std::sync::{Arc, RwLock};

/// Default bound of the commitment cache (`projection.cache_commitments`): with the 64 MiB
/// block cache, a node stays under 256 MiB resident after random reads (issue 15).
pub const DEFAULT_CACHE: usize = 4_096;

/// The ledger machine. The writer thread applies each record of a group commit to `working`
/// (owned by the writer, so the batch sees its own earlier records) and adds the derived state it
/// changed to the batch's synced write ([`Machine::persist`]); the ledger calls
/// [`Machine::publish`] only after that write returned, and only then do the reads — every
/// read, visibility check and the Work service clock use `published` — show the batch. A failed
/// write publishes nothing (the writer stops; a restart resumes from the stored watermark).
/// Access is shared ([`WorkMachine::access_handle`]) so that federation can add peer
/// organisations at run time.
pub struct WorkMachine {
    working: Working,
    published: Arc<RwLock<Projection>>,
    access: Arc<RwLock<k::Access>>,
    cache: usize,
    run_cache: usize,
    /// The envelopes as readers will see them once every persisted batch is published: a
    /// batch that changed envelopes publishes a copy of it (envelope records are rare; the
    /// working copy may already be a batch further, unsynced).
    shadow: crate::envelopes::Envelopes,
    /// The change journal a standby follows (`Some` on PostgreSQL; [`super::journal`]).
    journal: Option<super::journal::Writer>,
}

/// One persisted batch's derived state, published once its synced write returned.
#[derive(Debug, Default)]
pub struct Pending {
    changed: Vec<(String, Option<Arc<store::Stored>>)>,
    /// The ids the change feed carries once the batch is published.
    feed: Vec<String>,
    runs: crate::runs::RunBatch,
    envelopes: Option<crate::envelopes::Envelopes>,
    replayed: u64,
}

impl WorkMachine {
    /// A machine publishing into `published` (which should be empty: the ledger opens the
    /// stored projection into it), caching at most [`DEFAULT_CACHE`] commitments.
    pub fn new(published: Arc<RwLock<Projection>>, access: k::Access) -> Self {
        Self {
            working: Working::default(),
            published,
            access: Arc::new(RwLock::new(access)),
            cache: DEFAULT_CACHE,
            run_cache: store::DEFAULT_RUN_CACHE,
            shadow: Default::default(),
            journal: None,
        }
    }

    /// Writes the change journal standbys follow ([`super::journal`]): on a store other
    /// instances read (PostgreSQL).
    pub fn with_journal(mut self) -> Self {
        self.journal = Some(Default::default());
        self
    }

    /// The commit envelopes (seed 003) the working copy starts with: this organisation and its
    /// declared envelope types ([`crate::envelopes`]).
    pub fn with_envelopes(mut self, envelopes: crate::envelopes::Envelopes) -> Self {
        self.working.envelopes = envelopes;
        self
    }

    /// Caches at most `n` commitments in memory (`projection.cache_commitments`).
    pub fn with_cache(mut self, n: usize) -> Self {
        self.cache = n;
        self
    }

    /// Caches at most `n` runs in memory (`projection.cache_runs`).
    pub fn with_run_cache(mut self, n: usize) -> Self {
        self.run_cache = n;
        self
    }

    /// The Access the kernel is given, shared.
    pub fn access_handle(&self) -> Arc<RwLock<k::Access>> {
        self.access.clone()
    }
}

impl Machine for WorkMachine {
    type Input = k::Record;
    type Pending = Pending;

    fn column_families(&self) -> &'static [&'static str] {
        store::CFS
    }

    fn open(&mut self, st: &Arc<Store>) -> Result<u64, Error> {
        let db = Arc::new(Persisted::new(st.clone(), self.cache).with_run_cache(self.run_cache));
        // A store written by another layout (or before the projection was persisted) is rebuilt
        // from the records: its projection column families are cleared and replayed from 0.
        let from = if db.layout_current()? {
            db.watermark()?
        } else {
            let mut batch = Batch::default();
            for cf in store::CFS {
                st.delete_range_extra(&mut batch, cf, &[], &[0xff; 64])?;
            }
            st.write(batch, true)?;
            0
        };
        let pending = db.pending()?;
        // What a full replay used to rebuild beside the commitments: the foreign organisations
        // Access lists and the envelopes (`restart`).
        let orgs = {
            let mut a = self
                .access
                .write()
                .map_err(|_| Error::Internal("access lock poisoned".into()))?;
            let orgs = super::restart::load_orgs(st, &mut a)?;
            super::restart::load_envelopes(st, from, &a, &mut self.working.envelopes)?;
            orgs
        };
        if let Some(j) = &mut self.journal {
            j.open(from);
        }
        self.working.open(db.clone(), from, orgs);
        self.working.load_pending(pending);
        let mut p = self
            .published
            .write()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?;
        p.db = Some(db);
        Ok(from)
    }

    fn apply(&mut self, seq: u64, _id: &RecordId, input: &k::Record, now: i64) -> Outcome {
        let Ok(access) = self.access.read() else {
            return Outcome {
                applied: false,
                rejection_code: "internal".into(),
                rejection_detail: "access poisoned".into(),
            };
        };
        self.working.apply(seq, input, &access, now)
    }

    fn persist(&mut self, st: &Store, batch: &mut Batch) -> Result<Pending, Error> {
        let (changed, feed, runs) = self.working.persist(st, batch)?;
        // What this batch changed, taken now: by the time it is published the working copy may
        // hold the next batch too.
        let envelopes = self.working.envelopes.publish_pending(&mut self.shadow);
        if let Some(j) = &mut self.journal {
            let entry = super::journal::Entry {
                from: 0,
                changed: changed.iter().map(|(id, _)| id.clone()).collect(),
                feed: feed.clone(),
                runs: runs.runs.iter().map(|(id, _)| id.clone()).collect(),
                envelopes: envelopes.is_some(),
            };
            j.write(st, batch, self.working.next(), entry)?;
        }
        Ok(Pending {
            changed,
            feed,
            runs,
            envelopes,
            replayed: self.working.replayed,
        })
    }

    fn publish(&mut self, pending: Pending) {
        let Pending {
            changed,
            feed,
            runs,
            envelopes,
            replayed,
        } = pending;
        let mut runs = runs;
        let effects = std::mem::take(&mut runs.effects);
        match self.published.write() {
            Ok(mut p) => {
                if let Some(db) = &p.db {
                    db.cache().publish(changed.iter().cloned());
                    db.run_cache().publish(
                        runs.runs
                            .iter()
                            .map(|(id, r)| (id.clone(), Some(r.clone()))),
                    );
                }
                for (id, e) in effects {
                    p.run_effects.keep(id, e);
                }
                if let Some(e) = envelopes {
                    p.envelopes = e;
                }
                p.replayed = replayed;
                // Under the lock: a watch subscribes under the read lock, so it either sees
                // this batch in its first scan or receives it on the feed (never neither).
                p.feed.publish(feed);
            }
            Err(_) => tracing::error!("projection lock poisoned; not published"),
        }
        // In the readers' cache now (or never: poisoned): later batches read them there.
        self.working.published(&changed);
        self.working.runs.published(&runs.runs);
    }

    fn open_follower(&mut self, st: &Arc<Store>) -> Result<u64, Error> {
        let db = Arc::new(Persisted::new(st.clone(), self.cache).with_run_cache(self.run_cache));
        if !db.layout_current()? {
            return Err(Error::Unavailable(
                "the writer has not yet written this store's projection".into(),
            ));
        }
        let at = db.watermark()?;
        {
            let mut a = self
                .access
                .write()
                .map_err(|_| Error::Internal("access lock poisoned".into()))?;
            super::restart::load_orgs(st, &mut a)?;
            super::restart::load_envelopes(st, at, &a, &mut self.working.envelopes)?;
        }
        let envelopes = self.working.envelopes.publish_pending(&mut self.shadow);
        let mut p = self
            .published
            .write()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?;
        p.db = Some(db);
        if let Some(e) = envelopes {
            p.envelopes = e;
        }
        Ok(at)
    }

    fn follow(&mut self, st: &Store, from: u64) -> Result<u64, Error> {
        let Some(db) = self.published.read().ok().and_then(|p| p.db.clone()) else {
            return Err(Error::Internal("follower not opened".into()));
        };
        let to = db.watermark()?;
        if to <= from {
            return Ok(from);
        }
        let entries = super::journal::read(st, from, to)?;
        let envelopes = {
            let mut a = self
                .access
                .write()
                .map_err(|_| Error::Internal("access lock poisoned".into()))?;
            super::restart::load_orgs(st, &mut a)?;
            // Only the batches that applied envelope records (all of them after a gap).
            if entries
                .as_ref()
                .is_none_or(|e| e.iter().any(|e| e.envelopes))
            {
                super::restart::load_envelopes_between(
                    st,
                    from,
                    to,
                    &a,
                    &mut self.working.envelopes,
                )?;
            }
            self.working.envelopes.publish_pending(&mut self.shadow)
        };
        let mut p = self
            .published
            .write()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?;
        if let Some(e) = envelopes {
            p.envelopes = e;
        }
        match entries {
            Some(entries) => {
                for e in entries {
                    db.cache()
                        .publish(e.changed.into_iter().map(|id| (id, None)));
                    db.run_cache()
                        .publish(e.runs.into_iter().map(|id| (id, None)));
                    p.feed.publish(e.feed);
                }
            }
            None => {
                tracing::warn!(
                    from,
                    to,
                    "the writer's change journal no longer covers what this standby missed: \
                     caches dropped, watches end lagged"
                );
                db.cache().clear();
                db.run_cache().clear();
                p.feed.restart();
            }
        }
        Ok(to)
    }

    fn restore(&mut self, entry: &LedgerEntry) {
        self.working.replayed += 1;
        let Some(signed) = &entry.record else { return };
        let converted = PbRecord::decode(signed.payload.as_ref())
            .map_err(|e| e.to_string())
            .and_then(|r| {
                let id: RecordId = entry
                    .record_id
                    .as_ref()
                    .try_into()
                    .map_err(|_| "bad id".to_string())?;
                crate::convert::record_from_pb_recorded(id, &r).map_err(|e| e.to_string())
            });
        let Ok(record) = converted else {
            tracing::error!(
                seq = entry.sequence,
                "stored record does not convert; skipped in replay"
            );
            return;
        };
        let Ok(mut access) = self.access.write() else {
            return;
        };
        // A record of another organisation is in the ledger only because federation admitted it
        // from a peer, whose organisation Access listed then (peers added at run time are not in
        // the config): list it again for the replay.
        let org = &record.author.organisation;
        if *org != access.service.organisation && !access.organisations.contains_key(org) {
            access.organisations.insert(org.clone(), k::Members::Any);
        }
        let outcome = self.working.apply(
            entry.sequence,
            &record,
            &access,
            crate::ledger::applied_at(entry),
        );
        if Some(&outcome) != entry.outcome.as_ref() {
            tracing::error!(
                seq = entry.sequence,
                "replay reached a different outcome than recorded"
            );
        }
    }
}
