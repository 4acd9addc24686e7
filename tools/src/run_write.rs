//! The run writes (seed 002) as a party, over RunService with its bearer token: `run create`,
//! `run move`, `run action`, `run proposal`, `run decision`, `run evidence`, `run output`,
//! `run audit-event`, and `run show` to read a run back (state and transition log). Flags are
//! named after the run record's fields and checked before sending ([`crate::flags`]); the
//! answer is printed as the kernel gave it, with the exit codes of `work declare` (0 applied,
//! 1 the call failed, 2 a flag refused, 3 recorded but rejected).

use accord_proto::pb::record::v1 as rpb;
use accord_proto::pb::run::v1::{self as pb, run_service_client::RunServiceClient};
use accord_proto::pb::work::v1::SubmitResponse;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use sha2::Digest as _;

use crate::flags::{
    self, FlagError, Reason, choice, err, id, opt_party, opt_record_id, pair, record_ids, required,
};
use crate::output::{self, Output};

/// Where, who, and which run.
#[derive(Debug, Args)]
pub struct RunConn {
    #[command(flatten)]
    conn: crate::creds::ReadArgs,
    /// The run id.
    #[arg(value_name = "RUN")]
    run: String,
}

/// `run create`: a `run_start` (the run begins in `pending`).
#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    r: RunConn,
    /// The commitment the run executes (only its obligor may start one); none = no commitment.
    #[arg(long, value_name = "COMMITMENT")]
    commitment: Option<String>,
    /// What triggered the run (`trigger`).
    #[arg(long)]
    trigger: Option<String>,
    /// Who initiated it, org/name (`initiator`).
    #[arg(long, value_name = "PARTY")]
    initiator: Option<String>,
    /// The run this one recovers or continues (`parent`).
    #[arg(long, value_name = "RUN")]
    parent: Option<String>,
    /// The persistence mode the runtime declares (`persistence`).
    #[arg(long)]
    persistence: Option<String>,
    /// The operator confirmed replaying the parent's non-idempotent actions (`replay_confirmed`).
    #[arg(long)]
    replay_confirmed: bool,
    /// How often the executor promises a sign of life while the run executes the commitment, in
    /// milliseconds (`heartbeat_interval_ms`; every run record is one); default one hour.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(1..))]
    heartbeat_interval_ms: Option<i64>,
}

/// The fourteen run states, by wire name.
fn states() -> Vec<(&'static str, i32)> {
    (1..=14).map(|n| (crate::run::state_name(n), n)).collect()
}

/// `run move`: a `run_transition` to another state.
#[derive(Debug, Args)]
pub struct MoveArgs {
    #[command(flatten)]
    r: RunConn,
    /// The next state (`to`; required): pending, queued, planning, running, waiting_for_user,
    /// awaiting_approval, partially_approved, paused, recovering, completed, failed, rejected,
    /// canceled, expired.
    #[arg(long, value_name = "STATE")]
    to: Option<String>,
    /// Why (`context.reason`).
    #[arg(long)]
    reason: Option<String>,
    /// The proposal the move is about (`context.proposal`; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    proposal: Option<String>,
    /// Evidence the move rests on (`context.evidence`; repeat).
    #[arg(long, value_name = "RECORD_ID")]
    evidence: Vec<String>,
    /// Metadata `KEY=VALUE` a reviewer needs (`context.metadata`; repeat).
    #[arg(long, value_name = "KEY=VALUE")]
    metadata: Vec<String>,
}

/// `run action`: an action the executor takes.
#[derive(Debug, Args)]
pub struct ActionArgs {
    #[command(flatten)]
    r: RunConn,
    /// The tool or step invoked (`tool`; required).
    #[arg(long)]
    tool: Option<String>,
    /// What it does (`description`).
    #[arg(long)]
    description: Option<String>,
    /// Repeating it is harmless (`idempotent`).
    #[arg(long)]
    idempotent: bool,
    /// It changes something outside the run (`side_effect`).
    #[arg(long)]
    side_effect: bool,
    /// It may only run after an approving decision (`approval_gated`).
    #[arg(long)]
    approval_gated: bool,
    /// The proposal it carries out (`proposal`; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    proposal: Option<String>,
    /// A record of the executed commitment it acts upon (`acts_on`; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    acts_on: Option<String>,
}

/// `run proposal`: put up for approval.
#[derive(Debug, Args)]
pub struct ProposalArgs {
    #[command(flatten)]
    r: RunConn,
    /// What is proposed (`summary`; required).
    #[arg(long)]
    summary: Option<String>,
    /// The action proposed, when already recorded (`action`; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    action: Option<String>,
}

/// `run decision`: a signed approval decision.
#[derive(Debug, Args)]
pub struct DecisionArgs {
    #[command(flatten)]
    r: RunConn,
    /// The proposal decided (`proposal`; required; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    proposal: Option<String>,
    /// approve or reject (`verdict`; required).
    #[arg(long)]
    verdict: Option<String>,
    /// Why (`reason`).
    #[arg(long)]
    reason: Option<String>,
}

/// An artifact by reference: its digest and size, or a file to take them from.
#[derive(Debug, Args)]
pub struct ArtifactArgs {
    /// A file whose SHA-256 and size are recorded (`artifact`; its content is not sent).
    #[arg(long, conflicts_with_all = ["digest", "size"])]
    file: Option<std::path::PathBuf>,
    /// The artifact's SHA-256 (`artifact.digest`; 64 hex), with --size.
    #[arg(long, value_name = "SHA256")]
    digest: Option<String>,
    /// The artifact's size in bytes (`artifact.size`).
    #[arg(long, value_name = "BYTES")]
    size: Option<String>,
}

impl ArtifactArgs {
    fn artifact(&self) -> Result<Option<rpb::RunArtifact>, FlagError> {
        if let Some(f) = &self.file {
            let bytes = std::fs::read(f).map_err(|e| {
                err(
                    "--file",
                    Reason::UnreadableFile,
                    format!("{}: {e}", f.display()),
                )
            })?;
            return Ok(Some(rpb::RunArtifact {
                digest: sha2::Sha256::digest(&bytes).to_vec().into(),
                size: bytes.len() as u64,
            }));
        }
        match (&self.digest, &self.size) {
            (None, None) => Ok(None),
            (Some(d), s) => Ok(Some(rpb::RunArtifact {
                digest: flags::record_id("--digest", d)?.into(),
                size: flags::num("--size", required("--size", s)?)?,
            })),
            (None, Some(_)) => Err(err(
                "--digest",
                Reason::MissingFlag,
                "--size needs the artifact's --digest",
            )),
        }
    }
}

const EVIDENCE_KINDS: &[(&str, i32)] = &[
    ("source_data", rpb::EvidenceKind::SourceData as i32),
    ("screenshot", rpb::EvidenceKind::Screenshot as i32),
    ("report", rpb::EvidenceKind::Report as i32),
    ("log", rpb::EvidenceKind::Log as i32),
    ("diff", rpb::EvidenceKind::Diff as i32),
    ("export", rpb::EvidenceKind::Export as i32),
    ("audit_snapshot", rpb::EvidenceKind::AuditSnapshot as i32),
];
const VERDICTS: &[(&str, i32)] = &[
    ("approve", rpb::RunVerdict::Approve as i32),
    ("reject", rpb::RunVerdict::Reject as i32),
];

/// `run evidence`: review material (it supports a claim; it is not verified truth).
#[derive(Debug, Args)]
pub struct EvidenceArgs {
    #[command(flatten)]
    r: RunConn,
    /// source_data, screenshot, report, log, diff, export or audit_snapshot (`kind`; required).
    #[arg(long)]
    kind: Option<String>,
    /// The action it is about (`action`; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    action: Option<String>,
    /// What it supports: a proposal, action, output or transition of this run (`supports`).
    #[arg(long, value_name = "RECORD_ID")]
    supports: Option<String>,
    #[command(flatten)]
    artifact: ArtifactArgs,
    /// What it shows (`description`).
    #[arg(long)]
    description: Option<String>,
}

/// `run output`: produced material.
#[derive(Debug, Args)]
pub struct OutputArgs {
    #[command(flatten)]
    r: RunConn,
    /// The action that produced it (`action`; 64 hex).
    #[arg(long, value_name = "RECORD_ID")]
    action: Option<String>,
    #[command(flatten)]
    artifact: ArtifactArgs,
    /// What it is (`summary`).
    #[arg(long)]
    summary: Option<String>,
}

/// `run audit-event`: runtime activity.
#[derive(Debug, Args)]
pub struct AuditEventArgs {
    #[command(flatten)]
    r: RunConn,
    /// What happened, e.g. tool_timeout (`kind`; required).
    #[arg(long)]
    kind: Option<String>,
    /// Detail (`detail`).
    #[arg(long)]
    detail: Option<String>,
}

/// `run show`: the run's state and transition log.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    r: RunConn,
}

fn text(v: &Option<String>) -> String {
    v.clone().unwrap_or_default()
}

/// One run write, built from its flags.
enum Write {
    Create(pb::CreateRunRequest),
    Move(pb::TransitionRequest),
    Action(pb::AddActionRequest),
    Proposal(pb::AddProposalRequest),
    Decision(pb::AddDecisionRequest),
    Evidence(pb::AddEvidenceRequest),
    Output(pb::AddOutputRequest),
    Audit(pb::AddAuditEventRequest),
}

/// The run commands that write.
#[derive(Debug)]
pub enum RunWrite {
    /// `run create`.
    Create(CreateArgs),
    /// `run move`.
    Move(MoveArgs),
    /// `run action`.
    Action(ActionArgs),
    /// `run proposal`.
    Proposal(ProposalArgs),
    /// `run decision`.
    Decision(DecisionArgs),
    /// `run evidence`.
    Evidence(EvidenceArgs),
    /// `run output`.
    Output(OutputArgs),
    /// `run audit-event`.
    AuditEvent(AuditEventArgs),
}

impl RunWrite {
    fn conn(&self) -> &RunConn {
        match self {
            RunWrite::Create(a) => &a.r,
            RunWrite::Move(a) => &a.r,
            RunWrite::Action(a) => &a.r,
            RunWrite::Proposal(a) => &a.r,
            RunWrite::Decision(a) => &a.r,
            RunWrite::Evidence(a) => &a.r,
            RunWrite::Output(a) => &a.r,
            RunWrite::AuditEvent(a) => &a.r,
        }
    }

    fn build(&self) -> Result<(&'static str, Write), FlagError> {
        let run = id("RUN", &self.conn().run)?;
        Ok(match self {
            RunWrite::Create(a) => (
                "run_start",
                Write::Create(pb::CreateRunRequest {
                    commitment_id: a
                        .commitment
                        .as_deref()
                        .map(|c| id("--commitment", c))
                        .transpose()?
                        .unwrap_or_default(),
                    start: Some(rpb::RunStart {
                        run,
                        trigger: text(&a.trigger),
                        initiator: opt_party("--initiator", &a.initiator)?
                            .map(|p| format!("{}/{}", p.organisation, p.name))
                            .unwrap_or_default(),
                        parent: a
                            .parent
                            .as_deref()
                            .map(|p| id("--parent", p))
                            .transpose()?
                            .unwrap_or_default(),
                        persistence: text(&a.persistence),
                        replay_confirmed: a.replay_confirmed,
                        heartbeat_interval_ms: a.heartbeat_interval_ms.unwrap_or(0),
                    }),
                }),
            ),
            RunWrite::Move(a) => {
                let mut metadata = std::collections::HashMap::new();
                for m in &a.metadata {
                    let (k, v) = pair("--metadata", m)?;
                    metadata.insert(k.to_string(), v.to_string());
                }
                (
                    "run_transition",
                    Write::Move(pb::TransitionRequest {
                        transition: Some(rpb::RunTransition {
                            run,
                            to: choice("--to", required("--to", &a.to)?, &states())?,
                            context: Some(rpb::RunTransitionContext {
                                reason: text(&a.reason),
                                proposal: opt_record_id("--proposal", &a.proposal)?.into(),
                                evidence: record_ids("--evidence", &a.evidence)?
                                    .into_iter()
                                    .map(Into::into)
                                    .collect(),
                                metadata,
                            }),
                        }),
                    }),
                )
            }
            RunWrite::Action(a) => (
                "run_action",
                Write::Action(pb::AddActionRequest {
                    action: Some(rpb::RunAction {
                        run,
                        tool: required("--tool", &a.tool)?.to_string(),
                        description: text(&a.description),
                        idempotent: a.idempotent,
                        side_effect: a.side_effect,
                        approval_gated: a.approval_gated,
                        proposal: opt_record_id("--proposal", &a.proposal)?.into(),
                        acts_on: opt_record_id("--acts-on", &a.acts_on)?.into(),
                    }),
                }),
            ),
            RunWrite::Proposal(a) => (
                "run_proposal",
                Write::Proposal(pb::AddProposalRequest {
                    proposal: Some(rpb::RunProposal {
                        run,
                        summary: required("--summary", &a.summary)?.to_string(),
                        action: opt_record_id("--action", &a.action)?.into(),
                    }),
                }),
            ),
            RunWrite::Decision(a) => (
                "run_decision",
                Write::Decision(pb::AddDecisionRequest {
                    decision: Some(rpb::RunDecision {
                        run,
                        proposal: flags::record_id(
                            "--proposal",
                            required("--proposal", &a.proposal)?,
                        )?
                        .into(),
                        verdict: choice("--verdict", required("--verdict", &a.verdict)?, VERDICTS)?,
                        reason: text(&a.reason),
                    }),
                }),
            ),
            RunWrite::Evidence(a) => (
                "run_evidence",
                Write::Evidence(pb::AddEvidenceRequest {
                    evidence: Some(rpb::RunEvidence {
                        run,
                        kind: choice("--kind", required("--kind", &a.kind)?, EVIDENCE_KINDS)?,
                        action: opt_record_id("--action", &a.action)?.into(),
                        supports: opt_record_id("--supports", &a.supports)?.into(),
                        artifact: a.artifact.artifact()?,
                        description: text(&a.description),
                    }),
                }),
            ),
            RunWrite::Output(a) => (
                "run_output",
                Write::Output(pb::AddOutputRequest {
                    output: Some(rpb::RunOutput {
                        run,
                        action: opt_record_id("--action", &a.action)?.into(),
                        artifact: a.artifact.artifact()?,
                        summary: text(&a.summary),
                    }),
                }),
            ),
            RunWrite::AuditEvent(a) => (
                "run_audit_event",
                Write::Audit(pb::AddAuditEventRequest {
                    event: Some(rpb::RunAuditEvent {
                        run,
                        kind: required("--kind", &a.kind)?.to_string(),
                        detail: text(&a.detail),
                    }),
                }),
            ),
        })
    }
}

type RunClient = RunServiceClient<crate::creds::Authed>;

async fn client(c: &crate::creds::ReadArgs) -> Result<RunClient> {
    let (ch, bearer) = c.channel().await?;
    Ok(RunServiceClient::with_interceptor(ch, bearer))
}

fn status(s: tonic::Status) -> anyhow::Error {
    crate::hints::status_error(&s, "--token-file <node dir>/parties/<party>.token")
}

/// Runs a run write.
pub async fn write(w: RunWrite, out: Output) -> Result<()> {
    let (kind, req) = match w.build() {
        Ok(b) => b,
        Err(e) => return Err(flags::report(e, out)),
    };
    let conn = &w.conn().conn;
    if conn.token_file.is_none() {
        return Err(flags::report(
            err(
                "--token-file",
                Reason::MissingFlag,
                "a party's token: <node dir>/parties/<party>.token (the node signs for that party)",
            ),
            out,
        ));
    }
    let mut c = client(conn).await?;
    // Each call has its own answer message with `SubmitResponse`'s fields (issue 28).
    fn answer<T: Into<SubmitResponse>>(
        r: Result<tonic::Response<T>, tonic::Status>,
    ) -> Result<SubmitResponse, tonic::Status> {
        r.map(|r| r.into_inner().into())
    }
    let r = match req {
        Write::Create(r) => answer(c.create_run(r).await),
        Write::Move(r) => answer(c.transition(r).await),
        Write::Action(r) => answer(c.add_action(r).await),
        Write::Proposal(r) => answer(c.add_proposal(r).await),
        Write::Decision(r) => answer(c.add_decision(r).await),
        Write::Evidence(r) => answer(c.add_evidence(r).await),
        Write::Output(r) => answer(c.add_output(r).await),
        Write::Audit(r) => answer(c.add_audit_event(r).await),
    }
    .map_err(status)?;
    flags::submitted(
        &[("record", kind.into()), ("run", w.conn().run.clone())],
        &r,
        None,
        out,
    )
}

/// Runs `run show`.
pub async fn show(a: ShowArgs, out: Output) -> Result<()> {
    let r = client(&a.r.conn)
        .await?
        .get_run(pb::GetRunRequest {
            run: a.r.run.clone(),
        })
        .await
        .map_err(status)?
        .into_inner();
    let hexes = |l: &[prost::bytes::Bytes]| l.iter().map(hex::encode).collect::<Vec<_>>();
    if out == Output::Json {
        output::json(&json!({
            "run": r.run,
            "commitment": r.commitment_id,
            "organisation": r.organisation,
            "state": crate::run::state_name(r.state),
            "terminal": r.terminal,
            "parent": r.parent,
            "transitions": r.transitions.iter().map(|t| json!({
                "record_id": hex::encode(&t.record_id),
                "by": t.by.as_ref().map(|p| format!("{}/{}", p.organisation, p.name)),
                "at_unix_ms": t.at_unix_ms,
                "prior": crate::run::state_name(t.prior),
                "next": crate::run::state_name(t.next),
                "reason": t.context.as_ref().map(|c| c.reason.clone()).unwrap_or_default(),
            })).collect::<Vec<_>>(),
            "actions": hexes(&r.actions),
            "proposals": hexes(&r.proposals),
            "decisions": hexes(&r.decisions),
            "evidence": hexes(&r.evidence),
            "outputs": hexes(&r.outputs),
            "audit_events": hexes(&r.audit_events),
        }));
        return Ok(());
    }
    output::fields(&[
        ("run", r.run.clone()),
        ("commitment", r.commitment_id.clone()),
        ("state", crate::run::state_name(r.state).to_string()),
        ("terminal", r.terminal.to_string()),
        (
            "records",
            format!(
                "{} actions, {} proposals, {} decisions, {} evidence, {} outputs, {} audit events",
                r.actions.len(),
                r.proposals.len(),
                r.decisions.len(),
                r.evidence.len(),
                r.outputs.len(),
                r.audit_events.len()
            ),
        ),
    ]);
    println!();
    let rows: Vec<Vec<String>> = r
        .transitions
        .iter()
        .map(|t| {
            vec![
                crate::run::state_name(t.prior).to_string(),
                crate::run::state_name(t.next).to_string(),
                t.by.as_ref()
                    .map(|p| format!("{}/{}", p.organisation, p.name))
                    .unwrap_or_default(),
                hex::encode(&t.record_id),
            ]
        })
        .collect();
    output::table(&["FROM", "TO", "BY", "RECORD"], &rows);
    Ok(())
}
