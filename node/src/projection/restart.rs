//! What start-up restores beside the stored commitments, which a full replay used to rebuild
//! (issue 15, item 1: start-up replays only the records after the watermark):
//!
//! * **Envelopes** (seed 003): [`crate::envelopes::Envelopes`] stays in memory (open envelopes,
//!   their histories and this organisation's book: small). `pj_envelopes` indexes the ledger
//!   sequence of every envelope and tick record, with the opening balances
//!   [`Envelopes::apply`](crate::envelopes::Envelopes::apply) looked up while it applied the
//!   record (a budget account opens with its commitment's budget at that point of the ledger);
//!   start-up re-applies exactly those records, in ledger order, with those balances, and reaches
//!   the same envelope state as a full replay. Its cost grows with envelope records only, which is
//!   what the in-memory state grows with anyway.
//! * **Foreign organisations** (ARCHITECTURE, "Peers change at run time"): a record of another
//!   organisation is in the ledger only because federation admitted it while that organisation
//!   was a peer. Access never forgets one at run time, and a full replay listed every foreign
//!   author's organisation; `pj_orgs` keeps them, so a peer removed at run time is listed again
//!   after a restart.

use super::store::{self, Writes};
use crate::error::Error;
use crate::ledger::Store;
use accord_kernel as k;
use accord_proto::pb::record::v1::Record as PbRecord;
use accord_proto::signing::RecordId;
use prost::Message;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Envelope and tick records: ledger sequence (u64 BE) → [`EnvelopeEntry`].
pub const ENVELOPES: &str = "pj_envelopes";
/// Foreign organisations whose records the ledger holds: name → empty.
pub const ORGS: &str = "pj_orgs";

/// What `pj_envelopes` keeps for one envelope or tick record.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvelopeEntry {
    /// Each budget account the apply looked up, with the balance it found (`None`: no budget).
    pub budgets: Vec<(String, Option<u64>)>,
    /// The record is not an envelope or tick record but a staged record of an envelope
    /// (issue 13 item 7b) that reached this ledger: start-up notes it as written.
    pub staged: bool,
}

/// `pj_envelopes` key.
pub fn envelope_key(seq: u64) -> Vec<u8> {
    seq.to_be_bytes().to_vec()
}

/// Records an envelope or tick record applied at `seq`.
pub fn record_envelope(writes: &mut Writes, seq: u64, entry: &EnvelopeEntry) {
    writes.put(ENVELOPES, envelope_key(seq), store::encode(entry));
}

/// Records that `org` (not this organisation) authored a record in the ledger.
pub fn record_org(writes: &mut Writes, org: &str) {
    writes.put(ORGS, org.as_bytes().to_vec(), Vec::new());
}

/// Lists every stored foreign organisation in `access` (as a peer: `Members::Any`).
pub fn load_orgs(st: &Store, access: &mut k::Access) -> Result<Vec<String>, Error> {
    let mut orgs = Vec::new();
    st.scan_extra(ORGS, &[], |key, _| {
        orgs.push(String::from_utf8_lossy(key).into_owned());
        true
    })?;
    for o in &orgs {
        if *o != access.service.organisation {
            access
                .organisations
                .entry(o.clone())
                .or_insert(k::Members::Any);
        }
    }
    Ok(orgs)
}

/// Re-applies every indexed envelope and tick record below `watermark` to `envelopes`, in
/// ledger order, with the balances recorded for it. Returns how many it applied.
pub fn load_envelopes(
    st: &Store,
    watermark: u64,
    access: &k::Access,
    envelopes: &mut crate::envelopes::Envelopes,
) -> Result<u64, Error> {
    load_envelopes_between(st, 0, watermark, access, envelopes)
}

/// [`load_envelopes`] of the indexed records at sequences `from..watermark` only: a standby
/// following the writer (issue 31) applies each batch's envelope records so.
pub fn load_envelopes_between(
    st: &Store,
    from: u64,
    watermark: u64,
    access: &k::Access,
    envelopes: &mut crate::envelopes::Envelopes,
) -> Result<u64, Error> {
    let mut index = Vec::new();
    let mut failed = None;
    st.scan_extra(ENVELOPES, &envelope_key(from), |key, v| {
        let Ok(b) = <[u8; 8]>::try_from(key) else {
            failed = Some(Error::Storage("corrupt pj_envelopes key".into()));
            return false;
        };
        let seq = u64::from_be_bytes(b);
        if seq >= watermark {
            return false;
        }
        match store::decode::<EnvelopeEntry>("envelope index", v) {
            Ok(e) => index.push((seq, e)),
            Err(e) => failed = Some(e),
        }
        failed.is_none()
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    let mut n = 0;
    for (seq, entry) in index {
        let Some(le) = st.get(seq)? else {
            return Err(Error::Storage(format!(
                "pj_envelopes names sequence {seq}, which the ledger does not hold"
            )));
        };
        let record = decode_entry(&le)
            .map_err(|e| Error::Storage(format!("envelope record at {seq}: {e}")))?;
        if entry.staged {
            envelopes.note_written(&record.id);
            n += 1;
            continue;
        }
        let budgets: BTreeMap<String, Option<u64>> = entry.budgets.into_iter().collect();
        let outcome = envelopes.apply(
            &record,
            access,
            // The time the record was applied at when it was new (a peer's vote: its node's
            // time, issue 26), not when this ledger recorded it: else a restart — and a standby
            // following the writer — showed a peer's vote at another time than the writer did.
            crate::ledger::applied_at(&le),
            &|a: &str, _: &k::Party| budgets.get(a).copied().flatten(),
        );
        if Some(&outcome) != le.outcome.as_ref() {
            tracing::error!(
                seq,
                "envelope restore reached a different outcome than recorded"
            );
        }
        n += 1;
    }
    Ok(n)
}

/// The kernel record a stored ledger entry holds.
pub fn decode_entry(entry: &accord_proto::pb::work::v1::LedgerEntry) -> Result<k::Record, String> {
    let signed = entry.record.as_ref().ok_or("entry without a record")?;
    let id: RecordId = entry
        .record_id
        .as_ref()
        .try_into()
        .map_err(|_| "record id is not 32 bytes".to_string())?;
    let pb = PbRecord::decode(signed.payload.as_ref()).map_err(|e| e.to_string())?;
    crate::convert::record_from_pb_recorded(id, &pb).map_err(|e| e.to_string())
}
