//! The offline check of a run's execution receipt (seed 002, "Execution receipt": "Any receipt
//! view should remain traceable to state transitions, actions, approvals, evidence, audit
//! events, output, and timestamps"), shared by `accordctl run verify-receipt` and any client
//! in Rust.
//!
//! What binds each field the receipt shows (issue 29, item 2):
//!
//! | field | bound by |
//! |---|---|
//! | the references (transitions, actions, proposals, decisions, evidence, outputs, audit events, run_record) | each names a record embedded in the receipt, of the right kind and run, whose id is the hash of its signed bytes and whose inclusion proof reaches the checkpoint's root |
//! | trigger, initiator, parent, persistence mode | equal to the run_start record's |
//! | state, terminal, output_present, gated_actions | computed again from the records |
//! | created, started and ended times, child runs, node, and every other byte | the node's signature over the whole receipt ([`RUN_RECEIPT_PAYLOAD_TYPE`]), by the key that signs its checkpoints |
//! | the checkpoint | the node's signature and, when asked, `k` witness cosignatures |
//!
//! So any change to a byte that changes a value the receipt shows is refused.

use crate::checkpoint::{Checkpoint, open_checkpoint};
use crate::merkle::{leaf_hash, verify_inclusion};
use crate::note::{Note, Signer, Verifier};
use crate::pb::record::v1::{self as rpb, record::Operation as Op};
use crate::pb::run::v1::RunReceipt;
use crate::signing;
use prost::Message;
use std::collections::BTreeMap;

/// The payload type of the node's signature over a run receipt (signed as
/// `PAE(type, receipt encoded with node_signature unset)`, [`signing::pae`]).
pub const RUN_RECEIPT_PAYLOAD_TYPE: &str = "application/vnd.accord.run-receipt.v1+protobuf";

/// The bytes the node signs: the receipt encoded with `node_signature` unset.
pub fn signed_bytes(r: &RunReceipt) -> Vec<u8> {
    let mut unsigned = r.clone();
    unsigned.node_signature = None;
    unsigned.encode_to_vec()
}

/// Signs `r` as its node, filling `node_signature`.
pub fn sign(signer: &Signer, r: &mut RunReceipt) {
    r.node_signature = None;
    let payload = r.encode_to_vec();
    r.node_signature = Some(signing::sign(signer, RUN_RECEIPT_PAYLOAD_TYPE, &payload));
}

/// The run state names, by wire number (1 = pending … 14 = expired).
const STATES: [&str; 14] = [
    "pending",
    "queued",
    "planning",
    "running",
    "waiting_for_user",
    "awaiting_approval",
    "partially_approved",
    "paused",
    "recovering",
    "completed",
    "failed",
    "rejected",
    "canceled",
    "expired",
];

/// The name of run state number `n`.
pub fn state_name(n: i32) -> &'static str {
    usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| STATES.get(i))
        .copied()
        .unwrap_or("unspecified")
}

pub(crate) fn short(b: &[u8]) -> String {
    hex::encode(b).chars().take(12).collect()
}

/// What a valid receipt proved.
#[derive(Debug)]
pub struct Verified {
    /// Records proven included.
    pub records: usize,
    /// The checkpoint's tree size.
    pub size: u64,
    /// Witnesses whose cosignature verified.
    pub witnessed_by: Vec<String>,
}

/// The embedded record's kind (its operation's wire name) and decoded body.
fn kind(op: &Option<Op>) -> &'static str {
    match op {
        Some(Op::RunStart(_)) => "run_start",
        Some(Op::RunTransition(_)) => "run_transition",
        Some(Op::RunAction(_)) => "run_action",
        Some(Op::RunProposal(_)) => "run_proposal",
        Some(Op::RunDecision(_)) => "run_decision",
        Some(Op::RunEvidence(_)) => "run_evidence",
        Some(Op::RunOutput(_)) => "run_output",
        Some(Op::RunAuditEvent(_)) => "run_audit_event",
        _ => "other",
    }
}

fn run_of(op: &Option<Op>) -> &str {
    match op {
        Some(Op::RunStart(x)) => &x.run,
        Some(Op::RunTransition(x)) => &x.run,
        Some(Op::RunAction(x)) => &x.run,
        Some(Op::RunProposal(x)) => &x.run,
        Some(Op::RunDecision(x)) => &x.run,
        Some(Op::RunEvidence(x)) => &x.run,
        Some(Op::RunOutput(x)) => &x.run,
        Some(Op::RunAuditEvent(x)) => &x.run,
        _ => "",
    }
}

/// Checks a receipt offline (see the module docs); `Err` names the first failure.
pub fn verify(
    r: &RunReceipt,
    node_keys: &[Verifier],
    witnesses: &[Verifier],
    k: usize,
) -> Result<Verified, String> {
    // 1. The checkpoint: the node's signature and enough witness cosignatures.
    let note = Note::parse(r.checkpoint.as_bytes()).map_err(|e| format!("checkpoint: {e}"))?;
    let origin = Checkpoint::parse(note.text())
        .map_err(|e| format!("checkpoint: {e}"))?
        .origin;
    let opened = open_checkpoint(r.checkpoint.as_bytes(), &origin, node_keys, witnesses)
        .map_err(|e| format!("checkpoint: {e}"))?;
    let witnessed_by: Vec<String> = opened
        .cosignatures()
        .filter(|(v, _)| witnesses.contains(v))
        .map(|(v, _)| v.name().to_string())
        .collect();
    if witnessed_by.len() < k {
        return Err(format!(
            "checkpoint: {} of the given witnesses cosigned, {k} needed",
            witnessed_by.len()
        ));
    }
    // 2. The node's signature over the whole receipt, by a key that signed the checkpoint: it
    // binds the fields no record proves.
    let sig = r
        .node_signature
        .as_ref()
        .ok_or_else(|| "node_signature: missing".to_string())?;
    let payload = signed_bytes(r);
    if !node_keys
        .iter()
        .any(|k| signing::verify(k, RUN_RECEIPT_PAYLOAD_TYPE, &payload, sig).is_ok())
    {
        return Err("node_signature: not the node's signature over this receipt".into());
    }
    let cp = &opened.checkpoint;
    // 3. Every embedded record: its id and its inclusion proof.
    let mut records: BTreeMap<Vec<u8>, rpb::Record> = BTreeMap::new();
    for (i, e) in r.records.iter().enumerate() {
        let signed = e
            .record
            .as_ref()
            .ok_or_else(|| format!("records[{i}]: no record"))?;
        let id = signing::record_id(&signed.payload_type, &signed.payload);
        if id.as_slice() != e.record_id.as_ref() {
            return Err(format!("records[{i}]: record id does not match its bytes"));
        }
        let proof: Vec<[u8; 32]> = e
            .inclusion_proof
            .iter()
            .map(|h| h.as_ref().try_into())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("records[{i}]: a proof hash is not 32 bytes"))?;
        verify_inclusion(
            &leaf_hash(&signed.encode_to_vec()),
            e.sequence,
            cp.size,
            &proof,
            &cp.root,
        )
        .map_err(|err| format!("record {}: inclusion: {err}", short(&e.record_id)))?;
        let rec = rpb::Record::decode(signed.payload.as_ref())
            .map_err(|_| format!("record {}: not a record", short(&e.record_id)))?;
        if run_of(&rec.operation) != r.run {
            return Err(format!(
                "record {} is not a record of run {:?}",
                short(&e.record_id),
                r.run
            ));
        }
        if rec.commitment_id != r.commitment_id {
            return Err(format!(
                "record {} executes another commitment",
                short(&e.record_id)
            ));
        }
        records.insert(e.record_id.to_vec(), rec);
    }
    // 4. The fields match the records.
    let get = |id: &[u8], want: &str, field: &str| -> Result<&rpb::Record, String> {
        let rec = records.get(id).ok_or_else(|| {
            format!(
                "{field}: {} is not a proven record of the receipt",
                short(id)
            )
        })?;
        if kind(&rec.operation) != want {
            return Err(format!("{field}: {} is not a {want}", short(id)));
        }
        Ok(rec)
    };
    let start = get(&r.run_record, "run_start", "run_record")?;
    if let Some(Op::RunStart(s)) = &start.operation
        && (s.trigger != r.trigger
            || s.initiator != r.initiator
            || s.parent != r.parent
            || s.persistence != r.persistence_mode)
    {
        return Err("trigger, initiator, parent or persistence differ from run_start".into());
    }
    let lists: [(&[prost::bytes::Bytes], &str, &str); 7] = [
        (&r.transitions, "run_transition", "transitions"),
        (&r.actions, "run_action", "actions"),
        (&r.proposals, "run_proposal", "proposals"),
        (&r.decisions, "run_decision", "decisions"),
        (&r.evidence, "run_evidence", "evidence"),
        (&r.outputs, "run_output", "outputs"),
        (&r.audit_events, "run_audit_event", "audit_events"),
    ];
    let mut referenced = 1;
    for (list, want, field) in lists {
        for id in list {
            get(id, want, field)?;
        }
        referenced += list.len();
    }
    if referenced != records.len() {
        return Err("the receipt embeds records it does not reference".into());
    }
    let state = match r.transitions.last() {
        Some(id) => match &get(id, "run_transition", "transitions")?.operation {
            Some(Op::RunTransition(t)) => t.to,
            _ => 0,
        },
        None => 1,
    };
    if state != r.state {
        return Err(format!(
            "state {} is not the last transition's {}",
            state_name(r.state),
            state_name(state)
        ));
    }
    if r.terminal != (10..=14).contains(&r.state) || r.output_present == r.outputs.is_empty() {
        return Err("terminal or output_present do not match the records".into());
    }
    // Approval-gated actions and their approving decisions.
    let mut gated = Vec::new();
    for id in &r.actions {
        if let Some(Op::RunAction(a)) = &get(id, "run_action", "actions")?.operation
            && a.approval_gated
        {
            let approvals: Vec<Vec<u8>> = r
                .decisions
                .iter()
                .filter(|d| {
                    matches!(&records.get(d.as_ref()).and_then(|x| x.operation.clone()),
                        Some(Op::RunDecision(x)) if !a.proposal.is_empty() && x.proposal == a.proposal && x.verdict == rpb::RunVerdict::Approve as i32)
                })
                .map(|d| d.to_vec())
                .collect();
            gated.push((id.to_vec(), approvals));
        }
    }
    let claimed: Vec<(Vec<u8>, Vec<Vec<u8>>)> = r
        .gated_actions
        .iter()
        .map(|g| {
            (
                g.action.to_vec(),
                g.approvals.iter().map(|a| a.to_vec()).collect(),
            )
        })
        .collect();
    if claimed != gated {
        return Err("gated_actions do not match the actions and decisions".into());
    }
    Ok(Verified {
        records: records.len(),
        size: cp.size,
        witnessed_by,
    })
}
