//! The Work projection: the ledger's [`Machine`]. It feeds every record, in ledger order, to the
//! Work kernel and keeps the derived state of every commitment for reads. Records are the truth:
//! at start-up the ledger replays them all through [`Machine::restore`], which reaches the same
//! states and outcomes (the kernel is deterministic and gets the recorded time).

use crate::config::{Config, parse_party};
use crate::error::Error;
use crate::ledger::{Machine, Outcome};
use accord_kernel as k;
use accord_proto::pb::record::v1::Record as PbRecord;
use accord_proto::pb::work::v1::{self as pb, HistoryEntry, LedgerEntry};
use accord_proto::signing::RecordId;
use prost::Message;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

/// The name of the Work service party inside the node's organisation.
pub const WORK_SERVICE: &str = "work-service";

/// Derived state of every commitment, with each commitment's history (applied and rejected).
#[derive(Debug, Default)]
pub struct Projection {
    commitments: HashMap<String, k::Commitment>,
    history: HashMap<String, Vec<HistoryEntry>>,
    /// Commitments that are not closed: the only ones the Work service party's clock looks at.
    open: BTreeSet<String>,
    /// Record id -> the applied `acted_upon` records about it (durability "acted upon").
    acted_upon: HashMap<RecordId, Vec<RecordId>>,
    /// Commitment id -> every party that held a role on it after some applied record
    /// ([`k::parties_with_role`]): who may read it (issue 8). A party keeps reading a
    /// commitment it had a role on (it has seen it; its records are in it).
    readers: HashMap<String, BTreeSet<k::Party>>,
    /// The runs (seed 002), kept apart from the commitments ([`crate::runs`]).
    pub runs: crate::runs::Runs,
}

impl Projection {
    /// One commitment's derived state.
    pub fn get(&self, id: &str) -> Option<&k::Commitment> {
        self.commitments.get(id)
    }

    /// Ids of commitments that are not closed.
    pub fn open_ids(&self) -> impl Iterator<Item = &String> {
        self.open.iter()
    }

    /// The applied `acted_upon` records that name `id` (seed 000, "Durability states": acted
    /// upon — "An executor reported an Act based on this record").
    pub fn acted_upon(&self, id: &RecordId) -> &[RecordId] {
        self.acted_upon.get(id).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The history of a commitment id (also of one whose request was rejected).
    pub fn history(&self, id: &str) -> &[HistoryEntry] {
        self.history.get(id).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether `who` may read commitment `id`: it had a role on it, or Access makes it the
    /// commitment's principal or queue owner now ([`k::may_read`]). Unknown ids: false.
    pub fn may_read(&self, id: &str, access: &k::Access, who: &k::Party) -> bool {
        self.readers.get(id).is_some_and(|r| r.contains(who))
            || self
                .commitments
                .get(id)
                .is_some_and(|c| k::may_read(c, access, who))
    }

    fn put(&mut self, c: k::Commitment) {
        self.readers
            .entry(c.id.clone())
            .or_default()
            .extend(k::parties_with_role(&c));
        if c.is_closed() {
            self.open.remove(&c.id);
        } else {
            self.open.insert(c.id.clone());
        }
        self.commitments.insert(c.id.clone(), c);
    }

    /// Applies one record; returns the outcome and the kernel's effects.
    fn apply(
        &mut self,
        seq: u64,
        record: &k::Record,
        access: &k::Access,
        now: i64,
    ) -> (Outcome, Vec<k::Effect>) {
        // Run records go to the run machine (seed 002), not to the commitment kernel.
        if matches!(record.op, k::Operation::Run(_)) {
            return (self.runs.apply(record, access, now), Vec::new());
        }
        // apply_with sees every commitment: a taken reopening id is refused, and an admission
        // about a record of no known commitment is applied without derived state.
        let result = k::apply_with(&self.commitments, record, access, now);
        let (outcome, effects) = match result {
            Ok(k::Applied { next, effects }) => {
                if let Some(c) = next {
                    self.put(c);
                }
                for e in &effects {
                    if let k::Effect::StartReopening { commitment, .. } = e {
                        self.put((**commitment).clone());
                    }
                }
                if let k::Operation::ActedUpon {
                    record_id: Some(on),
                    ..
                } = &record.op
                {
                    self.acted_upon.entry(*on).or_default().push(record.id);
                }
                (
                    Outcome {
                        applied: true,
                        ..Default::default()
                    },
                    effects,
                )
            }
            Err(r) => (
                Outcome {
                    applied: false,
                    rejection_code: r.code.as_str().to_string(),
                    rejection_detail: r.detail,
                },
                Vec::new(),
            ),
        };
        self.history
            .entry(record.commitment.clone())
            .or_default()
            .push(HistoryEntry {
                record_id: record.id.to_vec().into(),
                operation: record.op.wire_name().to_string(),
                outcome: Some(outcome.clone()),
                sequence: seq,
            });
        (outcome, effects)
    }
}

/// Builds the kernel's Access from the validated config: this organisation's configured parties
/// (and its Work service party and operator), each peer organisation as a whole (its records are
/// authenticated by the peer's keys), and the authorities.
pub fn access_from_config(c: &Config) -> Result<k::Access, Error> {
    let mut a = k::Access::new(k::Party::new(&c.name, WORK_SERVICE)).with_members(
        &c.name,
        c.parties
            .iter()
            .map(|p| p.name.clone())
            .chain([WORK_SERVICE.to_string(), "operator".to_string()]),
    );
    for p in &c.peers {
        a = a.with_organisation(&p.name);
    }
    let grant = |a: k::Access,
                 field: &str,
                 list: &[String],
                 auth: k::Authority|
     -> Result<k::Access, Error> {
        let mut a = a;
        for (i, s) in list.iter().enumerate() {
            let (o, n) = parse_party(s).map_err(|r| Error::invalid(format!("{field}[{i}]"), r))?;
            a = a.with_grant(auth.clone(), k::Party::new(o, n));
        }
        Ok(a)
    };
    a = grant(
        a,
        "authorities.administrative_close",
        &c.authorities.administrative_close,
        k::Authority::AdministrativeClose,
    )?;
    a = grant(
        a,
        "authorities.principals",
        &c.authorities.principals,
        k::Authority::Principal,
    )?;
    for (i, s) in c.authorities.queue_owners.iter().enumerate() {
        // "org/name:queue" grants one queue; "org/name" alone is rejected by validation.
        let (party, queue) = s.split_once(':').unwrap_or((s.as_str(), ""));
        let (o, n) = parse_party(party)
            .map_err(|r| Error::invalid(format!("authorities.queue_owners[{i}]"), r))?;
        if !queue.is_empty() {
            a = a.with_grant(
                k::Authority::QueueOwner {
                    queue: queue.to_string(),
                },
                k::Party::new(o, n),
            );
        }
    }
    Ok(a)
}

/// The ledger machine around the shared projection. Access is shared
/// ([`WorkMachine::access_handle`]) so that federation can add peer organisations at run time.
pub struct WorkMachine {
    projection: Arc<RwLock<Projection>>,
    access: Arc<RwLock<k::Access>>,
    effects: Option<tokio::sync::mpsc::UnboundedSender<(RecordId, k::Effect)>>,
}

impl WorkMachine {
    /// A machine writing into `projection`.
    pub fn new(projection: Arc<RwLock<Projection>>, access: k::Access) -> Self {
        Self {
            projection,
            access: Arc::new(RwLock::new(access)),
            effects: None,
        }
    }

    /// The Access the kernel is given, shared.
    pub fn access_handle(&self) -> Arc<RwLock<k::Access>> {
        self.access.clone()
    }

    /// Effects of newly applied records are sent here (not those replayed at start-up).
    pub fn with_effects(
        mut self,
        tx: tokio::sync::mpsc::UnboundedSender<(RecordId, k::Effect)>,
    ) -> Self {
        self.effects = Some(tx);
        self
    }
}

impl Machine for WorkMachine {
    type Input = k::Record;

    fn apply(&mut self, seq: u64, id: &RecordId, input: &k::Record, now: i64) -> Outcome {
        let Ok(mut p) = self.projection.write() else {
            return Outcome {
                applied: false,
                rejection_code: "internal".into(),
                rejection_detail: "projection poisoned".into(),
            };
        };
        let Ok(access) = self.access.read() else {
            return Outcome {
                applied: false,
                rejection_code: "internal".into(),
                rejection_detail: "access poisoned".into(),
            };
        };
        let (outcome, effects) = p.apply(seq, input, &access, now);
        if let Some(tx) = &self.effects {
            for e in effects {
                let _ = tx.send((*id, e));
            }
        }
        outcome
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
        let Ok(mut p) = self.projection.write() else {
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
        let (outcome, _) = p.apply(entry.sequence, &record, &access, entry.recorded_at_unix_ms);
        if Some(&outcome) != entry.outcome.as_ref() {
            tracing::error!(
                seq = entry.sequence,
                "replay reached a different outcome than recorded"
            );
        }
    }
}

/// Commitment read model for `GetCommitment`.
impl Projection {
    /// The derived view of a commitment at `now`, in wire form.
    pub fn commitment(&self, id: &str, now: i64) -> Option<pb::GetCommitmentResponse> {
        let c = self.commitments.get(id)?;
        let mut v = crate::view::to_pb(c, now);
        v.history = self.history(id).to_vec();
        Some(v)
    }
}
