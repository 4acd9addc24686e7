//! The envelope driver: one task per node that writes what the envelopes owe — the
//! coordinator's next lifecycle record ([`ke::Envelope::due`]) and this organisation's vote —
//! and, unless `envelopes.external_ticks` is set, the scheduler's tick every
//! `envelopes.tick_interval_seconds` (seed 003, "Timeout").
//!
//! What is owed is derived from the published envelope state alone, never remembered, so a
//! node that crashed between two records rebuilds its envelopes from the ledger at start and
//! drives them on (issue 13, "Crash recovery"). The driver is the only writer of these records
//! and writes one at a time; the ledger publishes a record's effect before `append` returns,
//! so the next scan already sees it.
//!
//! Every record is authored by `<org>/envelope-service` and signed with the node key; its kernel
//! form is converted from the signed wire record like a submitted record's.

use crate::envelopes::{ENVELOPE_SERVICE, Owed, RecordDue, owed};
use crate::error::Error;
use accord_kernel::envelope::Phase;
use accord_proto::pb::envelope::v1 as epb;
use accord_proto::pb::record::v1 as pb;
use accord_proto::pb::record::v1::record::Operation as Op;
use accord_proto::signing::{self, RecordId};
use prost::Message;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the driver works with: narrow handles, not the whole node (issue 10: no module cycle
/// between `node.rs` and `envelopes`). Built by `Node::envelope_driver`.
#[derive(Clone)]
pub struct Driver {
    /// This organisation.
    pub name: String,
    /// The node's clock.
    pub clock: crate::clock::Clock,
    /// The node key (envelope-service records are signed with it).
    pub signer: accord_proto::note::Signer,
    /// The ledger the records are appended to.
    pub ledger: crate::ledger::Ledger<accord_kernel::Record>,
    /// Derived state (the envelopes).
    pub projection: Arc<std::sync::RwLock<crate::projection::Projection>>,
    /// `[envelopes]` settings.
    pub config: crate::config::EnvelopesConfig,
    /// This organisation's keys: a staged record of its party must be signed by one.
    pub keys: Keys,
}

/// This organisation's verification keys (as `Submit` checks a party's signed record).
#[derive(Clone)]
pub struct Keys {
    /// The node key (signs for any party of the organisation).
    pub node: accord_proto::note::Verifier,
    /// Each party's own keys.
    pub parties: std::collections::HashMap<String, Vec<accord_proto::note::Verifier>>,
}

impl Driver {
    fn name(&self) -> &str {
        &self.name
    }
}

/// Signs and appends a record of `<org>/envelope-service`.
async fn append(
    node: &Driver,
    entity: String,
    basis: &[RecordId],
    items: Vec<String>,
    op: Op,
) -> Result<(RecordId, crate::ledger::AppendResult), Error> {
    let record = pb::Record {
        author: Some(pb::PartyRef {
            organisation: node.name().to_string(),
            name: ENVELOPE_SERVICE.to_string(),
        }),
        declared_at_unix_ms: node.clock.now_ms(),
        commitment_id: entity,
        basis: basis.iter().map(|b| b.to_vec().into()).collect(),
        items,
        nonce: Default::default(),
        operation: Some(op),
    };
    let signed = signing::sign_record(&node.signer, &record);
    let id = signing::record_id(&signed.payload_type, &signed.payload);
    let input = crate::convert::record_from_pb(id, &record)?;
    let r = node
        .ledger
        .append(crate::ledger::Append {
            id,
            signed,
            input,
            at: None,
        })
        .await?;
    Ok((id, r))
}

/// Writes one owed record. The record's entity (`commitment_id`) is the envelope.
pub async fn write(node: &Driver, o: &Owed) -> Result<crate::ledger::AppendResult, Error> {
    let op = crate::convert::envelope::envelope_op(&o.op);
    append(node, o.op.envelope.clone(), &o.basis, Vec::new(), op)
        .await
        .map(|(_, r)| r)
}

/// Writes a tick (seed 003's `kind: system` event) checked against every envelope this node
/// coordinates that is PREPARING, and every envelope it follows that holds a commitment here
/// (issue 27: a following participant ends its holds by the timeout, on its own ticks);
/// nothing is written when there is none (an idle node's ledger does not grow with ticks).
/// Returns the record and the envelopes it lists.
pub async fn tick(
    node: &Driver,
    tick_id: &str,
    instant_time: i64,
) -> Result<Option<(RecordId, Vec<String>)>, Error> {
    let open: Vec<String> = {
        let p = node
            .projection
            .read()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?;
        let envs = &p.envelopes;
        envs.open()
            .filter(|e| {
                envs.coordinates(e) && e.phase == Phase::Preparing
                    || !envs.coordinates(e) && envs.holding(&e.id)
            })
            .map(|e| e.id.clone())
            .collect()
    };
    tick_listing(node, tick_id, instant_time, open).await
}

/// Writes the operator's release of `envelope`'s holds here (`AdminService.ReleaseHold`): a
/// tick at [`RELEASE_INSTANT`](crate::envelopes::RELEASE_INSTANT) naming it, so the release
/// is a record like every other envelope event (a restart re-applies it). `None` when the
/// envelope holds nothing here and is not a PREPARING envelope this node coordinates.
pub async fn release(
    node: &Driver,
    envelope: &str,
) -> Result<Option<(RecordId, Vec<String>)>, Error> {
    let releasable = {
        let p = node
            .projection
            .read()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?;
        let envs = &p.envelopes;
        envs.holding(envelope)
            || envs
                .get(envelope)
                .is_some_and(|e| envs.coordinates(e) && e.phase == Phase::Preparing)
    };
    if !releasable {
        return Ok(None);
    }
    let tick_id = format!("release-{}", node.clock.now_ms());
    tick_listing(
        node,
        &tick_id,
        crate::envelopes::RELEASE_INSTANT,
        vec![envelope.to_string()],
    )
    .await
}

async fn tick_listing(
    node: &Driver,
    tick_id: &str,
    instant_time: i64,
    open: Vec<String>,
) -> Result<Option<(RecordId, Vec<String>)>, Error> {
    crate::ident::id(tick_id).map_err(|r| Error::invalid("tick_id", r))?;
    if open.is_empty() {
        return Ok(None);
    }
    let op = Op::Tick(epb::Tick {
        tick_id: tick_id.to_string(),
        instant_time,
    });
    let (id, _) = append(node, tick_id.to_string(), &[], open.clone(), op).await?;
    Ok(Some((id, open)))
}

/// The prepare check of an envelope's staged records at this participant (issue 13 item 7b):
/// each record decodes, is authored by a party of the participant that carries it, and — for
/// this organisation's own — is signed by that party's key or the node key (as `Submit`
/// checks); then the whole sequence is applied by the kernel to this node's copies of the
/// commitments, without keeping the result. `Err` is the NACK's reason (`code: detail`).
fn validate_staged(
    p: &crate::projection::Projection,
    keys: &Keys,
    env: &accord_kernel::envelope::Envelope,
    now: i64,
) -> Result<(), String> {
    use accord_kernel as k;
    let org = p.envelopes.org();
    let access = p
        .envelopes
        .access()
        .ok_or_else(|| "internal: no access recorded at prepare".to_string())?;
    let mut local: std::collections::HashMap<String, k::Commitment> = Default::default();
    for (participant, commitment, id, bytes) in crate::envelopes::records(env) {
        // A commitment the coordinator may not read is answered like an unknown one, before
        // anything about the record is checked (issue 27: the vote reveals nothing).
        if !local.contains_key(commitment) {
            let c = p
                .get(commitment)
                .filter(|c| k::may_read(c, access, &env.coordinator))
                .ok_or_else(|| crate::envelopes::NACK_NOT_FOUND.to_string())?;
            local.insert(commitment.to_string(), (*c).clone());
        }
        let signed = pb::SignedRecord::decode(bytes)
            .map_err(|_| "malformed: a staged record does not decode".to_string())?;
        let record = pb::Record::decode(signed.payload.as_ref())
            .map_err(|_| "malformed: a staged record's payload does not decode".to_string())?;
        let author = record.author.clone().unwrap_or_default();
        if author.organisation != participant {
            return Err(format!(
                "wrong_role: a record staged by {participant:?} is authored by {:?}",
                author.organisation
            ));
        }
        if participant == org && !signed_by_own_key(keys, &author.name, &signed) {
            return Err(format!(
                "bad_signature: the record staged for {org}/{} is not signed by its key",
                author.name
            ));
        }
        let kr =
            crate::convert::record_from_pb(*id, &record).map_err(|e| format!("malformed: {e}"))?;
        // A hold only on a commitment the record's author may act on: one with a role on it
        // (as the sequence so far leaves it), never because of its organisation (issue 27).
        if kr.commitment != commitment {
            return Err("malformed: a staged record is about another commitment".to_string());
        }
        let Some(c) = local.get(commitment) else {
            return Err(crate::envelopes::NACK_NOT_FOUND.to_string());
        };
        if !k::parties_with_role(c).contains(&kr.author) {
            return Err(format!(
                "wrong_role: the staged record's author {} has no role on {commitment:?}",
                kr.author
            ));
        }
        let applied = k::apply_with(&local, &kr, access, now)
            .map_err(|r| format!("{}: {}", r.code, r.detail))?;
        if let Some(next) = applied.next {
            local.insert(next.id.clone(), next);
        }
    }
    Ok(())
}

/// Whether one of `signed`'s signatures verifies with the node key or a key of `party`.
fn signed_by_own_key(keys: &Keys, party: &str, signed: &pb::SignedRecord) -> bool {
    let party_keys = keys.parties.get(party).map(Vec::as_slice).unwrap_or(&[]);
    signed.signatures.iter().any(|sig| {
        std::iter::once(&keys.node)
            .chain(party_keys)
            .any(|k| signing::verify(k, &signed.payload_type, &signed.payload, sig).is_ok())
    })
}

/// Writes one staged record (the envelope COMMITTED here): the pre-signed record, as signed.
async fn write_staged(
    node: &Driver,
    due: &RecordDue,
) -> Result<crate::ledger::AppendResult, Error> {
    let signed = pb::SignedRecord::decode(due.signed.as_slice())
        .map_err(|_| Error::Internal("a staged record does not decode".into()))?;
    let record = pb::Record::decode(signed.payload.as_ref())
        .map_err(|_| Error::Internal("a staged record does not decode".into()))?;
    let input = crate::convert::record_from_pb(due.record, &record)?;
    node.ledger
        .append(crate::ledger::Append {
            id: due.record,
            signed,
            input,
            at: None,
        })
        .await
}

/// Writes everything owed now, each at most once per process once written (`tried`): a record
/// the kernel refused is not retried in a loop (a restart tries once more); one that could not
/// be written is tried again on the next wake.
async fn drive(node: &Driver, tried: &mut HashSet<(String, &'static str, String)>) {
    let now = node.clock.now_ms();
    let (owed, due) = match node.projection.read() {
        Ok(p) => (
            owed(&p.envelopes, &|env| {
                validate_staged(&p, &node.keys, env, now)
            }),
            p.envelopes.records_due(),
        ),
        Err(_) => return,
    };
    for d in due {
        let key = (d.envelope.clone(), "staged_record", hex::encode(d.record));
        if !tried.insert(key.clone()) {
            continue;
        }
        match write_staged(node, &d).await {
            Ok(r) => tracing::info!(
                envelope = %d.envelope,
                record = %hex::encode(d.record),
                sequence = r.sequence,
                applied = r.outcome.applied,
                rejection = %r.outcome.rejection_code,
                "envelope staged record written"
            ),
            Err(e) => {
                tried.remove(&key);
                tracing::warn!(envelope = %d.envelope, error = %e, "staged record not written")
            }
        }
    }
    for o in owed {
        let key = (
            o.op.envelope.clone(),
            o.op.step.wire_name(),
            o.basis.first().map(hex::encode).unwrap_or_default(),
        );
        if !tried.insert(key.clone()) {
            continue;
        }
        match write(node, &o).await {
            Ok(r) => tracing::info!(
                envelope = %o.op.envelope,
                step = o.op.step.wire_name(),
                event = %o.op.event,
                sequence = r.sequence,
                applied = r.outcome.applied,
                "envelope record"
            ),
            Err(e) => {
                // Not written (the ledger was busy or stopping): tried again on the next wake.
                tried.remove(&key);
                tracing::warn!(envelope = %o.op.envelope, error = %e, "envelope record not written")
            }
        }
    }
}

/// Runs until `shutdown`: drives on every ledger change, ticks on the configured interval.
pub async fn run(node: Driver, shutdown: CancellationToken) {
    let mut len = node.ledger.watch_len();
    let mut tried = HashSet::new();
    let cfg = node.config.clone();
    let every = Duration::from_secs(cfg.tick_interval_seconds.max(1));
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        drive(&node, &mut tried).await;
        tokio::select! {
            _ = shutdown.cancelled() => return,
            r = len.changed() => if r.is_err() { return },
            _ = ticker.tick(), if !cfg.external_ticks => {
                let now = node.clock.now_ms();
                match tick(&node, &format!("tick-{now}"), now).await {
                    Ok(Some((_, open))) => tracing::debug!(open = open.len(), "envelope tick"),
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "envelope tick not written"),
                }
            }
        }
    }
}
