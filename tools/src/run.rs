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
//! run_start's, and every approval-gated action lists exactly its approving decisions; and the
//! node's signature over the whole receipt, which binds what no record proves (the times, the
//! child run count, the node). The check itself is `accord_proto::run_receipt::verify`.
//!
//! Exit codes of `verify-receipt`: 0 valid; 1 invalid (one-line reason on stderr); 2 usage.

// Without the `node` feature only `verify-receipt` is built; the printing helpers rest unused.
#![cfg_attr(not(feature = "node"), allow(dead_code, unused_imports))]

use accord_proto::note::Verifier;
use accord_proto::pb::run::v1::{
    GetReceiptRequest, RunReceipt, run_service_client::RunServiceClient,
};
use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};
use prost::Message;
use std::path::PathBuf;
use std::process::ExitCode;

pub use accord_proto::run_receipt::{state_name, verify};

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
        .get_receipt(GetReceiptRequest { run: a.id.clone() })
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
