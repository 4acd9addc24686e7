//! `accordctl run receipt ID` and `accordctl run verify-receipt FILE` (issue 12 item 8; seed
//! 002, "Execution receipt").
//!
//! `receipt` reads a run's receipt from a node (RunService.GetReceipt) and prints it for a
//! person — references as short ids, fields with no underlying record marked `missing` — or as
//! JSON (`--output json`, the stable rendering [`receipt_json`]); `--out FILE` also writes the
//! encoded `accord.run.v1.RunReceipt` for offline checks.
//!
//! `verify-receipt` needs only accord-proto: it checks the checkpoint's signature by the node's
//! key (and, with `--witness-vkey`, at least `--k` witness cosignatures), every embedded
//! record's id and inclusion proof under the checkpoint's root, and that the receipt's fields
//! match those records: each reference names an embedded record of this run of the right kind,
//! the state is the last transition's, trigger, initiator, parent and persistence mode are the
//! run_start's, and every approval-gated action lists exactly its approving decisions. Record
//! times are the node's ledger times and are not proven by the receipt.
//!
//! Exit codes of `verify-receipt`: 0 valid; 1 invalid (one-line reason on stderr); 2 usage.

// Without the `node` feature only `verify-receipt` is built; the printing helpers rest unused.
#![cfg_attr(not(feature = "node"), allow(dead_code, unused_imports))]

use accord_proto::checkpoint::{Checkpoint, open_checkpoint};
use accord_proto::merkle::{leaf_hash, verify_inclusion};
use accord_proto::note::{Note, Verifier};
use accord_proto::pb::record::v1::{self as rpb, record::Operation as Op};
use accord_proto::pb::run::v1::{GetRunRequest, RunReceipt, run_service_client::RunServiceClient};
use accord_proto::signing;
use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};
use prost::Message;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

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

/// `accordctl run ...`
#[derive(Debug, Subcommand)]
pub enum RunCmd {
    /// Print a run's receipt (references as short ids; missing fields marked missing).
    #[cfg(feature = "node")]
    Receipt(ReceiptArgs),
    /// Verify a receipt file offline: checkpoint signatures, inclusion proofs, fields.
    VerifyReceipt(VerifyArgs),
    /// Start a run as a party (run_start; only the executed commitment's obligor may).
    #[cfg(feature = "node")]
    Create(crate::run_write::CreateArgs),
    /// Move a run to another state (run_transition), checked against the transition table.
    #[cfg(feature = "node")]
    Move(crate::run_write::MoveArgs),
    /// Record an action the executor takes (run_action).
    #[cfg(feature = "node")]
    Action(crate::run_write::ActionArgs),
    /// Put a proposal up for approval (run_proposal).
    #[cfg(feature = "node")]
    Proposal(crate::run_write::ProposalArgs),
    /// Approve or reject a proposal (run_decision; the executed commitment's obligee, acceptor, ...).
    #[cfg(feature = "node")]
    Decision(crate::run_write::DecisionArgs),
    /// Record evidence by reference: digest and size, or --file (run_evidence).
    #[cfg(feature = "node")]
    Evidence(crate::run_write::EvidenceArgs),
    /// Record an output by reference (run_output).
    #[cfg(feature = "node")]
    Output(crate::run_write::OutputArgs),
    /// Record runtime activity (run_audit_event).
    #[cfg(feature = "node")]
    AuditEvent(crate::run_write::AuditEventArgs),
    /// A run's state and transition log (GetRun).
    #[cfg(feature = "node")]
    Show(crate::run_write::ShowArgs),
}

/// The run commands that talk to a node, other than `receipt`.
#[cfg(feature = "node")]
pub async fn online(cmd: RunCmd, out: crate::output::Output) -> Result<()> {
    use crate::run_write::{self as w, RunWrite};
    match cmd {
        RunCmd::Receipt(a) => receipt(a, out).await,
        RunCmd::VerifyReceipt(_) => Ok(()),
        RunCmd::Create(a) => w::write(RunWrite::Create(a), out).await,
        RunCmd::Move(a) => w::write(RunWrite::Move(a), out).await,
        RunCmd::Action(a) => w::write(RunWrite::Action(a), out).await,
        RunCmd::Proposal(a) => w::write(RunWrite::Proposal(a), out).await,
        RunCmd::Decision(a) => w::write(RunWrite::Decision(a), out).await,
        RunCmd::Evidence(a) => w::write(RunWrite::Evidence(a), out).await,
        RunCmd::Output(a) => w::write(RunWrite::Output(a), out).await,
        RunCmd::AuditEvent(a) => w::write(RunWrite::AuditEvent(a), out).await,
        RunCmd::Show(a) => w::show(a, out).await,
    }
}

/// Options of `run receipt`.
#[cfg(feature = "node")]
#[derive(Debug, Args)]
pub struct ReceiptArgs {
    #[command(flatten)]
    pub conn: crate::creds::ReadArgs,
    /// The run id.
    pub id: String,
    /// Also write the encoded receipt (accord.run.v1.RunReceipt) here, for verify-receipt.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Options of `run verify-receipt`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The receipt file (an encoded accord.run.v1.RunReceipt, from `run receipt --out`).
    pub file: PathBuf,
    /// The node's verifier key (its log key, `<node dir>/node.vkey`).
    #[arg(long = "node-vkey", required = true)]
    pub node_vkeys: Vec<String>,
    /// A witness's cosignature verifier key.
    #[arg(long = "witness-vkey")]
    pub witness_vkeys: Vec<String>,
    /// How many of the witnesses must have cosigned (default: all given).
    #[arg(long)]
    pub k: Option<usize>,
}

fn short(b: &[u8]) -> String {
    hex::encode(b).chars().take(12).collect()
}

fn hexes(list: &[prost::bytes::Bytes]) -> Vec<String> {
    list.iter().map(hex::encode).collect()
}

fn opt(s: &str) -> serde_json::Value {
    if s.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::Value::String(s.to_string())
    }
}

fn opt_time(t: i64) -> serde_json::Value {
    if t == 0 {
        serde_json::Value::Null
    } else {
        serde_json::json!(t)
    }
}

/// The stable JSON rendering of a receipt: fixed keys, ids as lowercase hex, a field with no
/// underlying record as `null` (lists: `[]`), proofs left to the binary form.
pub fn receipt_json(r: &RunReceipt) -> serde_json::Value {
    serde_json::json!({
        "run": r.run,
        "run_record": hex::encode(&r.run_record),
        "commitment": opt(&r.commitment_id),
        "trigger": opt(&r.trigger),
        "initiator": opt(&r.initiator),
        "parent": opt(&r.parent),
        "created_at_unix_ms": r.created_at_unix_ms,
        "started_at_unix_ms": opt_time(r.started_at_unix_ms),
        "ended_at_unix_ms": opt_time(r.ended_at_unix_ms),
        "state": state_name(r.state),
        "terminal": r.terminal,
        "transitions": hexes(&r.transitions),
        "actions": hexes(&r.actions),
        "proposals": hexes(&r.proposals),
        "decisions": hexes(&r.decisions),
        "evidence": hexes(&r.evidence),
        "outputs": hexes(&r.outputs),
        "output_present": r.output_present,
        "audit_events": hexes(&r.audit_events),
        "gated_actions": r.gated_actions.iter().map(|g| serde_json::json!({
            "action": hex::encode(&g.action),
            "approvals": hexes(&g.approvals),
            "approved": !g.approvals.is_empty(),
        })).collect::<Vec<_>>(),
        "child_runs": r.child_runs,
        "persistence_mode": opt(&r.persistence_mode),
        "node": r.node,
        "records_proven": r.records.len(),
    })
}

fn print_table(r: &RunReceipt) {
    let m = |s: &str| {
        if s.is_empty() {
            "missing".to_string()
        } else {
            s.to_string()
        }
    };
    let t = |v: i64| {
        if v == 0 {
            "missing".into()
        } else {
            v.to_string()
        }
    };
    let l = |list: &[prost::bytes::Bytes]| {
        if list.is_empty() {
            "missing".to_string()
        } else {
            list.iter().map(|b| short(b)).collect::<Vec<_>>().join(" ")
        }
    };
    let gated = if r.gated_actions.is_empty() {
        "none".to_string()
    } else {
        r.gated_actions
            .iter()
            .map(|g| {
                if g.approvals.is_empty() {
                    format!("{}: no approving decision", short(&g.action))
                } else {
                    format!("{}: approved by {}", short(&g.action), l(&g.approvals))
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    crate::output::fields(&[
        ("run", r.run.clone()),
        ("run record", short(&r.run_record)),
        ("commitment", m(&r.commitment_id)),
        ("state", state_name(r.state).to_string()),
        ("terminal", r.terminal.to_string()),
        ("trigger", m(&r.trigger)),
        ("initiator", m(&r.initiator)),
        (
            "parent",
            if r.parent.is_empty() {
                "none".into()
            } else {
                r.parent.clone()
            },
        ),
        ("created at", r.created_at_unix_ms.to_string()),
        ("started at", t(r.started_at_unix_ms)),
        ("ended at", t(r.ended_at_unix_ms)),
        ("transitions", l(&r.transitions)),
        ("actions", l(&r.actions)),
        ("proposals", l(&r.proposals)),
        ("decisions", l(&r.decisions)),
        ("evidence", l(&r.evidence)),
        ("outputs", l(&r.outputs)),
        ("audit events", l(&r.audit_events)),
        ("gated actions", gated),
        ("child runs", r.child_runs.to_string()),
        ("persistence", m(&r.persistence_mode)),
        (
            "proofs",
            format!(
                "{} records against {}'s checkpoint",
                r.records.len(),
                r.node
            ),
        ),
    ]);
}

/// `run receipt`.
#[cfg(feature = "node")]
pub async fn receipt(a: ReceiptArgs, out: crate::output::Output) -> Result<()> {
    let c = &a.conn;
    if c.token_file.is_none() && c.cert.is_none() {
        return Err(anyhow!(
            "reads need a credential: --token-file FILE or --cert/--key"
        ));
    }
    let identity = match (&c.cert, &c.key) {
        (Some(cert), Some(k)) => Some((
            std::fs::read(cert).with_context(|| format!("--cert {}", cert.display()))?,
            std::fs::read(k).with_context(|| format!("--key {}", k.display()))?,
        )),
        _ => None,
    };
    let ch = crate::admin::connect_with(
        &c.node,
        &c.ca,
        c.domain.as_deref(),
        identity.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice())),
    )
    .await?;
    let bearer = match &c.token_file {
        Some(p) => crate::creds::Bearer::from_file(p)?,
        None => crate::creds::Bearer::default(),
    };
    let mut client = RunServiceClient::with_interceptor(ch, bearer);
    let r = client
        .get_receipt(GetRunRequest { run: a.id.clone() })
        .await
        .map_err(|s| crate::hints::status_error(&s, "a party token on the run, or admin.token"))?
        .into_inner();
    if let Some(p) = &a.out {
        std::fs::write(p, r.encode_to_vec()).with_context(|| format!("write {}", p.display()))?;
    }
    if out == crate::output::Output::Json {
        crate::output::json(&receipt_json(&r));
    } else {
        print_table(&r);
    }
    Ok(())
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
    let cp = &opened.checkpoint;
    // 2. Every embedded record: its id and its inclusion proof.
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
    // 3. The fields match the records.
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

/// `run verify-receipt`.
pub fn verify_receipt(a: VerifyArgs, out: crate::output::Output) -> ExitCode {
    let usage = |m: String| {
        eprintln!("accordctl run verify-receipt: {m}");
        ExitCode::from(2)
    };
    let bytes = match std::fs::read(&a.file) {
        Ok(b) => b,
        Err(e) => return usage(format!("{}: {e}", a.file.display())),
    };
    let mut keys = Vec::new();
    for v in &a.node_vkeys {
        match Verifier::from_vkey(v.trim()) {
            Ok(k) => keys.push(k),
            Err(e) => return usage(format!("--node-vkey: {e}")),
        }
    }
    let mut witnesses = Vec::new();
    for v in &a.witness_vkeys {
        match Verifier::from_vkey(v.trim()) {
            Ok(k) => witnesses.push(k),
            Err(e) => return usage(format!("--witness-vkey: {e}")),
        }
    }
    let k = a.k.unwrap_or(witnesses.len());
    if k > witnesses.len() {
        return usage(format!(
            "--k {k} but only {} witness keys given",
            witnesses.len()
        ));
    }
    let r = match RunReceipt::decode(bytes.as_slice()) {
        Ok(r) => r,
        Err(_) => {
            eprintln!(
                "accordctl run verify-receipt: invalid: not an encoded accord.run.v1.RunReceipt"
            );
            return ExitCode::from(1);
        }
    };
    match verify(&r, &keys, &witnesses, k) {
        Ok(v) => {
            if out == crate::output::Output::Json {
                crate::output::json(&serde_json::json!({
                    "valid": true,
                    "run": r.run,
                    "state": state_name(r.state),
                    "records": v.records,
                    "checkpoint_size": v.size,
                    "witnessed_by": v.witnessed_by,
                }));
            } else {
                println!(
                    "receipt: valid — run {:?} ({}), {} records proven in {}'s checkpoint of size {}{}",
                    r.run,
                    state_name(r.state),
                    v.records,
                    r.node,
                    v.size,
                    if v.witnessed_by.is_empty() {
                        String::new()
                    } else {
                        format!(", witnessed by {}", v.witnessed_by.join(", "))
                    }
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("accordctl run verify-receipt: invalid: {e}");
            ExitCode::from(1)
        }
    }
}
