//! Phase 2: what to do with each record of an authenticated envelope (checks 2–6 of the module
//! doc of [`super`]), and the peer's budget for records rejected at the door.

use super::Work;
use crate::federation::FedContext;
use crate::federation::check;
use crate::federation::codes;
use crate::federation::error::FedError;
use crate::federation::peers::Peer;
use crate::federation::quarantine;
use accord_proto::pb::federation::v1::{Envelope, Signed};
use accord_proto::signing::{self, RecordId};
use prost::Message;
use std::collections::{HashMap, HashSet};

/// Triage of `env`'s records in envelope order; `proven[i]` when the log proof includes record
/// `i`, `sig_ok[i]` when the batch verification established record `i`'s signatures. Fails, before anything is written, when the records rejected at the door exceed the
/// peer's budget.
pub(super) fn records(
    cx: &FedContext,
    peer: &Peer,
    env: &Envelope,
    proven: &[bool],
    sig_ok: &[bool],
    now: i64,
) -> Result<Vec<Work>, FedError> {
    // `sig_ok`: the record signatures checked at once (one Ed25519 batch) before the peer's
    // lock; a record the batch does not establish is checked alone, for its reason code.
    let decisions = &cx.federation.decisions;

    let mut work: Vec<Work> = Vec::with_capacity(env.records.len());
    let mut coming: HashSet<RecordId> = HashSet::new();
    // Commitments whose request goes to the kernel earlier in this envelope.
    let mut creating: HashSet<String> = HashSet::new();
    let mut first: HashMap<RecordId, usize> = HashMap::new();
    let mut quarantined_here: HashMap<String, Vec<(RecordId, Vec<RecordId>)>> = HashMap::new();
    let mut door: u32 = 0;
    for (i, signed) in env.records.iter().enumerate() {
        let id = signing::record_id(&signed.payload_type, &signed.payload);
        if let Some(j) = first.get(&id) {
            work.push(Work::SameAs(*j));
            continue;
        }
        first.insert(id, i);
        if let Some(e) = decisions.entry(&id)? {
            let s = Signed::decode(e.first_receipt.as_slice())
                .map_err(|e| FedError::corrupt("receipt", e))?;
            work.push(Work::Dup(s));
            continue;
        }
        // The declaration names no sender-chosen commitment: a record rejected at the door is
        // declared under `federation:<peer>` (issue 8), at the record's own declared time.
        let verified = sig_ok.get(i).copied().unwrap_or(false);
        let checked = check::check(peer, id, signed, now, verified).map(|mut c| {
            c.at = applied_at(cx, env, i, &c, now);
            c
        });
        match checked {
            Err(r) => {
                door += 1;
                work.push(Work::Reject {
                    id,
                    code: r.rejection.code,
                    detail: r.rejection.detail,
                    declared_at: r.declared_at,
                });
            }
            Ok(c) if !proven.get(i).copied().unwrap_or(false) => {
                door += 1;
                work.push(Work::Quarantine {
                    c,
                    missing: Vec::new(),
                    code: codes::UNPROVEN,
                });
            }
            Ok(c) => {
                let here = quarantined_here
                    .get(&c.record.commitment_id)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let missing = quarantine::missing(cx, &c, &coming, &creating, None, here)?;
                if missing.is_empty() {
                    coming.insert(id);
                    if matches!(c.input.op, accord_kernel::Operation::Request(_)) {
                        creating.insert(c.record.commitment_id.clone());
                    }
                    work.push(Work::Kernel { c });
                } else {
                    quarantined_here
                        .entry(c.record.commitment_id.clone())
                        .or_default()
                        .push((id, missing.clone()));
                    work.push(Work::Quarantine {
                        c,
                        missing,
                        code: codes::MISSING_BASIS,
                    });
                }
            }
        }
    }

    // Records rejected at the door cost ledger writes: bounded per peer, checked before any.
    let budget = crate::federation::budget::take(cx.name(), peer.name(), door, now);
    if !budget {
        tracing::warn!(
            peer = peer.name(),
            records = door,
            "federation: too many rejected records; envelope not admitted"
        );
        return Err(FedError::TooManyRejections {
            peer: peer.name().to_string(),
            records: door,
            burst: crate::federation::budget::BURST,
            per_minute: crate::federation::budget::PER_MINUTE,
        });
    }
    Ok(work)
}

/// The time record `i` applies at (issue 26, item 2): the time the sender's kernel applied it
/// (`Envelope.applied_at_unix_ms`, signed with the envelope) — a peer's records are all its own
/// organisation's (`check::authorise`). Where this node is the commitment's home, and so
/// decides it for every holder, that time is trusted within `federation.clock_skew_ms` behind
/// its own clock (its transit is not held against it) and never ahead of it; a record that
/// took longer is decided at `now - clock_skew_ms`. `None` (an older sender): this node's clock.
fn applied_at(
    cx: &FedContext,
    env: &Envelope,
    i: usize,
    c: &check::Checked,
    now: i64,
) -> Option<i64> {
    let t = env.applied_at_unix_ms.get(i).copied().filter(|t| *t != 0)?;
    Some(if cx.homed_here(&c.record.commitment_id) {
        let skew = i64::try_from(cx.config.clock_skew_ms).unwrap_or(i64::MAX);
        t.clamp(now.saturating_sub(skew), now)
    } else {
        t
    })
}
