//! `accordctl work`: read a node's Work state — one commitment (`show`), the commitments that
//! need a party (`list --needs`), and a live feed of their changes (`watch`). Each prints a table
//! for people or, with `--output json`, JSON (`watch`: one JSON document per line).

use accord_proto::pb::record::v1::PartyRef;
use accord_proto::pb::work::v1 as pb;
use anyhow::{Result, anyhow};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::output::{self, Output};

/// `accordctl work`.
#[derive(Debug, Subcommand)]
pub enum WorkCmd {
    /// One commitment's derived state: state, category, flags, whose move, axes, gates.
    Show(ShowArgs),
    /// Commitments the credential may read, filtered ("what needs me": --needs PARTY).
    List(ListArgs),
    /// Streams commitment summaries: each as it is now, then each change of state, category,
    /// flags or axes, until interrupted (or --count summaries).
    Watch(WatchArgs),
    /// Declare one Work kernel operation as a party (WorkService.Declare with the party's
    /// --token-file): `work declare <operation> COMMITMENT --flag ...`; see `work declare
    /// <operation> --help`. Exit 0 applied, 2 a flag refused (nothing sent), 3 rejected by the
    /// kernel.
    #[command(subcommand)]
    Declare(Box<crate::declare::DeclareOp>),
}

/// Options of `work show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    conn: crate::creds::ReadArgs,
    /// The commitment id.
    id: String,
}

/// The filter of `work list` and `work watch`.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Only the commitments that need PARTY (org/name): its move in triage, its acceptance
    /// awaited, its move otherwise, unknown, or overdue. A party's token may only ask about
    /// itself.
    #[arg(long, value_name = "PARTY")]
    needs: Option<String>,
    /// Only this summary category (triage, awaiting_acceptance, waiting, unknown, active, ...).
    #[arg(long)]
    category: Option<String>,
    /// Only commitments with this flag (overdue, at_risk, stale, ...).
    #[arg(long)]
    flag: Option<String>,
}

/// Options of `work list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    conn: crate::creds::ReadArgs,
    #[command(flatten)]
    filter: FilterArgs,
}

/// Options of `work watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    conn: crate::creds::ReadArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Stop after this many summaries (default: run until interrupted).
    #[arg(long)]
    count: Option<u64>,
}

fn party(s: &str) -> Result<PartyRef> {
    let (o, n) = s
        .split_once('/')
        .filter(|(o, n)| !o.is_empty() && !n.is_empty())
        .ok_or_else(|| anyhow!("--needs: expected org/name, got {s:?}"))?;
    Ok(PartyRef {
        organisation: o.into(),
        name: n.into(),
    })
}

fn party_str(p: &Option<PartyRef>) -> String {
    p.as_ref()
        .map(|p| format!("{}/{}", p.organisation, p.name))
        .unwrap_or_default()
}

fn parties(ps: &[PartyRef]) -> Vec<String> {
    ps.iter()
        .map(|p| format!("{}/{}", p.organisation, p.name))
        .collect()
}

impl FilterArgs {
    fn request(&self) -> Result<pb::ListCommitmentsRequest> {
        Ok(pb::ListCommitmentsRequest {
            category: self.category.clone().unwrap_or_default(),
            flag: self.flag.clone().unwrap_or_default(),
            needs: self.needs.as_deref().map(party).transpose()?,
            ..Default::default()
        })
    }
}

fn status(s: tonic::Status) -> anyhow::Error {
    crate::hints::status_error(
        &s,
        "--token-file <node dir>/parties/<p>.token or admin.token",
    )
}

/// A summary as JSON.
pub fn summary_json(s: &pb::CommitmentSummary) -> Value {
    json!({
        "commitment_id": s.commitment_id,
        "state": s.state,
        "category": s.category,
        "flags": s.flags,
        "next_move": parties(&s.next_move),
        "next_move_reason": s.next_move_reason,
        "assignment": s.assignment,
        "execution": s.execution,
        "control": s.control,
        "liveness": s.liveness,
        "obligee": party_str(&s.obligee),
        "obligor": party_str(&s.obligor),
        "needs": s.needs,
        "change": s.change,
    })
}

fn summary_row(s: &pb::CommitmentSummary) -> Vec<String> {
    vec![
        s.commitment_id.clone(),
        s.state.clone(),
        s.category.clone(),
        s.flags.join(","),
        parties(&s.next_move).join(","),
        s.needs.join(","),
        format!("{}/{}/{}", s.execution, s.control, s.liveness),
    ]
}

const SUMMARY_HEADERS: [&str; 7] = [
    "COMMITMENT",
    "STATE",
    "CATEGORY",
    "FLAGS",
    "NEXT MOVE",
    "NEEDS",
    "EXECUTION/CONTROL/LIVENESS",
];

/// Runs `accordctl work ...`.
pub async fn run(cmd: WorkCmd, out: Output) -> Result<()> {
    match cmd {
        WorkCmd::Show(a) => show(a, out).await,
        WorkCmd::List(a) => list(a, out).await,
        WorkCmd::Watch(a) => watch(a, out).await,
        WorkCmd::Declare(op) => crate::declare::run(*op, out).await,
    }
}

async fn show(a: ShowArgs, out: Output) -> Result<()> {
    let v = a
        .conn
        .work()
        .await?
        .get_commitment(pb::GetCommitmentRequest {
            commitment_id: a.id.clone(),
        })
        .await
        .map_err(status)?
        .into_inner();
    let gates: Vec<Value> = v
        .gates
        .iter()
        .map(|g| {
            json!({
                "record_id": hex::encode(&g.record_id),
                "kind": g.kind,
                "description": g.description,
                "status": g.status,
                "addressed_to": party_str(&g.addressed_to),
                "answers": g.answers.iter().map(|x| json!({
                    "by": party_str(&x.by),
                    "answer": x.answer,
                    "valid": x.valid,
                    "record_id": hex::encode(&x.record_id),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    if out == Output::Json {
        output::json(&json!({
            "commitment_id": v.commitment_id,
            "state": v.state,
            "terminal": v.terminal,
            "category": v.category,
            "flags": v.flags,
            "next_move": parties(&v.next_move),
            "next_move_reason": v.next_move_reason,
            "assignment": v.assignment,
            "execution": v.execution,
            "control": v.control,
            "control_holder": party_str(&v.control_holder),
            "liveness": v.liveness,
            "obligee": party_str(&v.obligee),
            "obligor": party_str(&v.obligor),
            "acceptor": party_str(&v.acceptor),
            "version": hex::encode(&v.version),
            "items": v.items.iter().map(|i| json!({"item": i.item, "state": i.state})).collect::<Vec<_>>(),
            "gates": gates,
            "history": v.history.iter().map(|h| json!({
                "sequence": h.sequence,
                "operation": h.operation,
                "applied": h.outcome.as_ref().is_some_and(|o| o.applied),
                "rejection_code": h.outcome.as_ref().map(|o| o.rejection_code.clone()).unwrap_or_default(),
            })).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    output::fields(&[
        ("commitment", v.commitment_id.clone()),
        ("state", v.state.clone()),
        ("category", v.category.clone()),
        ("flags", v.flags.join(", ")),
        (
            "next move",
            format!(
                "{} ({})",
                parties(&v.next_move).join(", "),
                v.next_move_reason
            ),
        ),
        ("obligee", party_str(&v.obligee)),
        ("obligor", party_str(&v.obligor)),
        ("assignment", v.assignment.clone()),
        ("execution", v.execution.clone()),
        (
            "control",
            match &v.control_holder {
                Some(_) => format!("{} (held by {})", v.control, party_str(&v.control_holder)),
                None => v.control.clone(),
            },
        ),
        ("liveness", v.liveness.clone()),
        ("version", hex::encode(&v.version)),
    ]);
    if !v.gates.is_empty() {
        println!();
        let rows: Vec<Vec<String>> = v
            .gates
            .iter()
            .map(|g| {
                vec![
                    hex::encode(&g.record_id)[..12].to_string(),
                    g.kind.clone(),
                    g.status.clone(),
                    party_str(&g.addressed_to),
                    g.answers
                        .iter()
                        .map(|x| {
                            format!(
                                "{} {}{}",
                                party_str(&x.by),
                                x.answer,
                                if x.valid { "" } else { " (invalid)" }
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                ]
            })
            .collect();
        output::table(
            &["GATE", "KIND", "STATUS", "ADDRESSED TO", "ANSWERS"],
            &rows,
        );
    }
    Ok(())
}

async fn list(a: ListArgs, out: Output) -> Result<()> {
    let mut client = a.conn.work().await?;
    let mut req = a.filter.request()?;
    let mut all = Vec::new();
    loop {
        let page = client
            .list_commitments(req.clone())
            .await
            .map_err(status)?
            .into_inner();
        all.extend(page.commitments);
        if page.next_page_token.is_empty() {
            break;
        }
        req.page_token = page.next_page_token;
    }
    if out == Output::Json {
        output::json(&Value::Array(all.iter().map(summary_json).collect()));
    } else {
        let rows: Vec<Vec<String>> = all.iter().map(summary_row).collect();
        output::table(&SUMMARY_HEADERS, &rows);
    }
    Ok(())
}

async fn watch(a: WatchArgs, out: Output) -> Result<()> {
    let mut stream = a
        .conn
        .work()
        .await?
        .watch_commitments(pb::WatchCommitmentsRequest::from(a.filter.request()?))
        .await
        .map_err(status)?
        .into_inner();
    let mut seen = 0u64;
    if out == Output::Table {
        let mut headers = vec!["CHANGE"];
        headers.extend(SUMMARY_HEADERS);
        println!("{}", headers.join("  "));
    }
    while a.count.is_none_or(|c| seen < c) {
        let Some(s) = stream.message().await.map_err(status)? else {
            break;
        };
        let s = pb::CommitmentSummary::from(s);
        seen += 1;
        if out == Output::Json {
            output::json(&summary_json(&s));
        } else {
            let mut row = vec![s.change.clone()];
            row.extend(summary_row(&s));
            println!("{}", row.join("  "));
        }
    }
    Ok(())
}
