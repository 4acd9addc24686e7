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

use crate::envelopes::{ENVELOPE_SERVICE, Owed, owed};
use crate::error::Error;
use accord_kernel::envelope::Phase;
use accord_proto::pb::envelope::v1 as epb;
use accord_proto::pb::record::v1 as pb;
use accord_proto::pb::record::v1::record::Operation as Op;
use accord_proto::signing::{self, RECORD_PAYLOAD_TYPE, RecordId};
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
    let id = signing::record_id(RECORD_PAYLOAD_TYPE, &signed.payload);
    let input = crate::convert::record_from_pb(id, &record)?;
    let r = node
        .ledger
        .append(crate::ledger::Append { id, signed, input })
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
/// coordinates that is PREPARING; nothing is written when none is (an idle node's ledger does
/// not grow with ticks). Returns the record and the envelopes it lists.
pub async fn tick(
    node: &Driver,
    tick_id: &str,
    instant_time: i64,
) -> Result<Option<(RecordId, Vec<String>)>, Error> {
    crate::ident::id(tick_id).map_err(|r| Error::invalid("tick_id", r))?;
    let open: Vec<String> = {
        let p = node
            .projection
            .read()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?;
        p.envelopes
            .open()
            .filter(|e| p.envelopes.coordinates(e) && e.phase == Phase::Preparing)
            .map(|e| e.id.clone())
            .collect()
    };
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

/// Writes everything owed now, each at most once per process once written (`tried`): a record
/// the kernel refused is not retried in a loop (a restart tries once more); one that could not
/// be written is tried again on the next wake.
async fn drive(node: &Driver, tried: &mut HashSet<(String, &'static str, String)>) {
    let owed = match node.projection.read() {
        Ok(p) => owed(&p.envelopes),
        Err(_) => return,
    };
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
