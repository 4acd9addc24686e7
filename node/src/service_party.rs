//! The Work service party (seed 000, "Records written by the Work service"): on each clock tick it
//! asks the kernel what is due (`due_work`: expire, implicit accept, resume, unclaim, a gate's
//! obsolete closings) and writes each as a record authored by `<org>/work-service`, signed with
//! the node key, resting on its basis. The same tick writes the records this organisation's own
//! parties owe: a run's execution claims (as the run's executor) and the promise record a claim
//! by one of its parties produced (seed 000, "Assignment": claim — "a promise record is
//! produced"; the Operations table names the candidate obligor for `promise`, so the claimant
//! authors it, not the Work service party, whose records the seed lists and closes). The records go through
//! the same ledger path as any other: the wire record is the only thing built here, and its
//! kernel form comes from [`crate::convert::record_from_pb`] like a submitted record's (issue
//! 10, item 4), so the live run and a replay convert the same bytes.
//!
//! Only the commitment's home organisation writes them (issue 26, item 1; `Commitment::home`):
//! the router federates them to every holder like any other record.
//!
//! A tick reads only the commitments whose time has come, from the deadline index the projection
//! keeps in the same synced batches as the commitments ([`crate::projection::due`]); it runs on a
//! blocking thread (the projection's lock is not held while the kernel computes what is due).

use crate::error::Error;
use crate::node::Node;
use crate::projection::WORK_SERVICE;
use accord_kernel as k;
use accord_proto::pb::record::v1 as pb;
use accord_proto::pb::record::v1::record::Operation as Op;
use accord_proto::signing;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One record the node's clock must write: its commitment, basis, items and operation, by the
/// Work service party or, for a run's owed claim, by the run's executor.
#[derive(Debug, Clone)]
pub struct Due {
    /// The author's party name; `None` = the Work service party.
    pub author: Option<String>,
    /// The commitment.
    pub commitment: String,
    /// What it rests on.
    pub basis: Vec<k::RecordId>,
    /// The items it acts on (empty = every open item).
    pub items: Vec<String>,
    /// The operation, in wire form.
    pub op: Op,
}

/// The wire operation of a due action; `None` for an operation the Work service party never
/// writes (logged, not written).
fn wire_op(op: &k::Operation) -> Option<Op> {
    Some(match op {
        k::Operation::Expire => Op::Expire(pb::Expire {}),
        k::Operation::Accept {
            evidence_ref,
            implicit,
            step_up,
        } => Op::Accept(pb::Accept {
            evidence_ref: evidence_ref.clone(),
            implicit: *implicit,
            step_up: *step_up,
        }),
        k::Operation::Resume { event } => Op::Resume(pb::Resume {
            event: event.clone(),
        }),
        k::Operation::Unclaim { reason } => Op::Unclaim(pb::Unclaim {
            reason: reason.clone(),
        }),
        k::Operation::GateDecision {
            answer,
            content_digest,
            participant,
            reason,
        } => Op::GateDecision(pb::GateDecision {
            answer: answer.to_wire(),
            content_digest: content_digest
                .map(|d| d.to_vec().into())
                .unwrap_or_default(),
            participant: participant.as_ref().map(crate::convert::party_to_pb),
            reason: reason.clone(),
        }),
        // The queue's distribution policy's pick (seed 000, "Assignment": offer — "Queue owner
        // or distribution policy").
        k::Operation::Offer { to } => Op::Offer(pb::Offer {
            to: to.as_ref().map(crate::convert::party_to_pb),
        }),
        _ => return None,
    })
}

/// The observations runs of this organisation owe `c` (issue 29; seed 000: "Execution, control
/// and liveness come from executor or external Claims"): each authored by the run's executor,
/// resting on the run record, written wherever the commitment's home is.
fn claims_for(c: &crate::projection::CommitmentRef) -> Vec<Due> {
    c.claims_due()
        .iter()
        .map(|o| Due {
            author: Some(o.executor.name.clone()),
            commitment: c.id.clone(),
            basis: vec![o.record],
            items: Vec::new(),
            op: Op::Observation(pb::Observation {
                execution: o
                    .execution
                    .unwrap_or(k::ExecutionReport::Unspecified)
                    .to_wire(),
                heartbeat_interval_ms: o.heartbeat_interval_ms,
                left_cleanly: o.left_cleanly,
                ..Default::default()
            }),
        })
        .collect()
}

/// The promise a claim by a party of organisation `org` produced and that is still to be
/// written: authored by the claimant, resting on the claim (seed 000, "Assignment").
fn promise_for(c: &k::Commitment, promise_claim: Option<k::RecordId>, org: &str) -> Option<Due> {
    let claim = c
        .claim
        .as_ref()
        .filter(|cl| Some(cl.record) == promise_claim && cl.promise.is_none())
        .filter(|cl| cl.by.organisation == org)?;
    Some(Due {
        author: Some(claim.by.name.clone()),
        commitment: c.id.clone(),
        basis: vec![claim.record],
        items: Vec::new(),
        op: Op::Promise(pb::Promise {}),
    })
}

/// What the Work service party has due for one commitment at `now`.
fn due_for(c: &k::Commitment, now: i64) -> Vec<Due> {
    let mut out = Vec::new();
    for a in k::due_work(c, now) {
        match wire_op(&a.op) {
            Some(op) => out.push(Due {
                author: None,
                commitment: a.commitment,
                basis: a.basis,
                items: a.items,
                op,
            }),
            None => {
                tracing::error!(op = a.op.wire_name(), "unexpected Work service operation")
            }
        }
    }
    out
}

/// Most commitments one tick looks at; the rest wait for the next tick (earliest first).
pub const TICK_MAX: usize = 4096;

/// Everything due at `now`: the commitments the deadline index (`pj_due`, issue 15, item 3)
/// holds at or before `now`, read under a short read lock — O(due), not O(open commitments);
/// the kernel then runs on each without the lock.
pub fn scan(node: &Node, now: i64) -> Vec<Due> {
    let Ok(due) = node.projection.read().map(|p| p.service_due(now, TICK_MAX)) else {
        return Vec::new();
    };
    // Only the commitment's home writes what its clock produces (issue 26, item 1): every other
    // holder applies the home's records as they arrive and never writes its own.
    // The claims this organisation's runs owe, and the promises its parties' claims produced,
    // are its own to write, wherever the home is.
    due.iter()
        .flat_map(|c| {
            let mut d = claims_for(c);
            d.extend(promise_for(c, c.promise_due(), node.name()));
            if c.home_org(node.name()) == node.name() {
                d.extend(due_for(c, now));
            }
            d
        })
        .collect()
}

/// Signs `due` with the node key (as the Work service party, or the party of this organisation
/// that owes it: a run's executor, a claimant) and appends it; the kernel form is converted from the signed wire record.
pub async fn write(node: &Node, due: Due, now: i64) -> Result<crate::ledger::AppendResult, Error> {
    let record = pb::Record {
        author: Some(pb::PartyRef {
            organisation: node.name().to_string(),
            name: due.author.unwrap_or_else(|| WORK_SERVICE.to_string()),
        }),
        declared_at_unix_ms: now,
        commitment_id: due.commitment,
        basis: due.basis.iter().map(|b| b.to_vec().into()).collect(),
        items: due.items,
        nonce: Default::default(),
        operation: Some(due.op),
    };
    let signed = signing::sign_record(&node.signer, &record);
    let id = signing::record_id(&signed.payload_type, &signed.payload);
    let input = crate::convert::record_from_pb(id, &record)?;
    node.ledger
        .append(crate::ledger::Append {
            id,
            signed,
            input,
            at: None,
        })
        .await
}

/// Writes what is due at `now`; returns how many records were written.
pub async fn tick(node: &Arc<Node>, now: i64) -> usize {
    let scanning = node.clone();
    let due = match tokio::task::spawn_blocking(move || scan(&scanning, now)).await {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(error = %e, "work service scan failed");
            return 0;
        }
    };
    let mut written = 0;
    for d in due {
        let commitment = d.commitment.clone();
        match write(node, d, now).await {
            Ok(r) => {
                written += 1;
                tracing::info!(%commitment, sequence = r.sequence, applied = r.outcome.applied, "work service record");
            }
            Err(e) => tracing::warn!(error = %e, "work service record not written"),
        }
    }
    node.metrics.service_ticked(now);
    written
}

/// Ticks every `clock.tick_ms` (of real time; what is due is decided on the node's clock) until
/// `shutdown`.
pub async fn run_clock(node: Arc<Node>, shutdown: CancellationToken) {
    let mut t = tokio::time::interval(Duration::from_millis(node.config.clock.tick_ms));
    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = t.tick() => { tick(&node, node.clock.now_ms()).await; }
        }
    }
}
