//! The ledger machine around the projection: a working copy the writer thread applies to, and
//! the shared projection reads see, updated only once a batch is synced.

use super::Projection;
use crate::ledger::{Machine, Outcome};
use accord_kernel as k;
use accord_proto::pb::record::v1::Record as PbRecord;
use accord_proto::pb::work::v1::LedgerEntry;
use accord_proto::signing::RecordId;
use prost::Message;
use std::sync::{Arc, RwLock};

/// The ledger machine. The writer thread applies each record of a group commit to `working`
/// (owned by the writer, so the batch sees its own earlier records); the ledger calls
/// [`Machine::publish`] only after the batch's synced write returned, and only then does
/// `published` — what every read, visibility check and the Work service clock use — show
/// the batch. A failed write publishes nothing (the writer stops; a restart replays the disk).
/// Access is shared ([`WorkMachine::access_handle`]) so that federation can add peer
/// organisations at run time.
pub struct WorkMachine {
    working: Projection,
    published: Arc<RwLock<Projection>>,
    access: Arc<RwLock<k::Access>>,
}

impl WorkMachine {
    /// A machine publishing into `published` (which should be empty: the machine's working copy
    /// starts empty and replays the ledger).
    pub fn new(published: Arc<RwLock<Projection>>, access: k::Access) -> Self {
        Self {
            working: Projection::default(),
            published,
            access: Arc::new(RwLock::new(access)),
        }
    }

    /// The commit envelopes (seed 003) the working copy starts with: this organisation and its
    /// declared envelope types ([`crate::envelopes`]).
    pub fn with_envelopes(mut self, envelopes: crate::envelopes::Envelopes) -> Self {
        self.working.envelopes = envelopes;
        self
    }

    /// The Access the kernel is given, shared.
    pub fn access_handle(&self) -> Arc<RwLock<k::Access>> {
        self.access.clone()
    }
}

impl Machine for WorkMachine {
    type Input = k::Record;

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

    fn publish(&mut self) {
        match self.published.write() {
            Ok(mut p) => self.working.publish_into(&mut p),
            Err(_) => tracing::error!("projection lock poisoned; not published"),
        }
    }

    fn restore(&mut self, entry: &LedgerEntry) {
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
        let outcome =
            self.working
                .apply(entry.sequence, &record, &access, entry.recorded_at_unix_ms);
        if Some(&outcome) != entry.outcome.as_ref() {
            tracing::error!(
                seq = entry.sequence,
                "replay reached a different outcome than recorded"
            );
        }
    }
}
