//! `accordctl envelope show ID | list | start ... | holds | release-hold ID` (issue 13 item 8;
//! issue 27: the operator's holds): commit envelopes over `accord.envelope.v1.EnvelopeService`,
//! as a table for people or JSON (`--output json`).

use crate::creds::{Bearer, ReadArgs};
use crate::output::{self, Output};
use accord_proto::pb::envelope::v1::{self as pb, envelope_service_client::EnvelopeServiceClient};
use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};
use serde_json::json;

/// `accordctl envelope ...`
#[derive(Debug, Subcommand)]
pub enum EnvelopeCmd {
    /// One envelope: phase, votes, this node's accounts and the event history.
    Show(ShowArgs),
    /// Envelopes known to the node, open ones first, oldest first.
    List(ListArgs),
    /// Start an envelope as the party whose token is given (the node coordinates it).
    Start(Box<StartArgs>),
    /// The commitments open envelopes hold on this node (operator: admin.token).
    Holds(ReadArgs),
    /// End an envelope's holds on this node now (operator: admin.token); a PREPARING envelope
    /// this node coordinates aborts on TIMEOUT.
    ReleaseHold(ShowArgs),
}

/// Options of `envelope show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub conn: ReadArgs,
    /// The envelope id.
    pub id: String,
}

/// Options of `envelope list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub conn: ReadArgs,
    /// Include COMMITTED and ABORTED envelopes.
    #[arg(long)]
    pub all: bool,
    /// At most this many.
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
}

/// Options of `envelope start`.
#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub conn: ReadArgs,
    /// The envelope type (default: the built-in budget_transfer).
    #[arg(long = "type", default_value = "budget_transfer")]
    pub envelope_type: String,
    /// The envelope id (default: chosen by the node).
    #[arg(long)]
    pub id: Option<String>,
    /// A change, `ORG:debit:ACCOUNT:AMOUNT` or `ORG:credit:ACCOUNT:AMOUNT` (repeat; each
    /// organisation named is a participant).
    #[arg(long = "change", required_unless_present = "delegate")]
    pub changes: Vec<String>,
    /// An atomic cross-organisation delegate (`--type` becomes `obligation_delegate`).
    #[command(flatten)]
    pub delegate: crate::envelope_delegate::DelegateArgs,
}

async fn client(c: &ReadArgs) -> Result<EnvelopeServiceClient<crate::creds::Authed>> {
    if c.token_file.is_none() && c.cert.is_none() {
        return Err(anyhow!(
            "envelope calls need a credential: --token-file FILE or --cert/--key"
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
        Some(p) => Bearer::from_file(p)?,
        None => Bearer::default(),
    };
    Ok(EnvelopeServiceClient::with_interceptor(ch, bearer))
}

/// Parses `ORG:debit|credit:ACCOUNT:AMOUNT` into participants (in order of first mention).
pub fn parse_changes(list: &[String]) -> Result<Vec<pb::EnvelopeParticipant>> {
    let mut out: Vec<pb::EnvelopeParticipant> = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let parts: Vec<&str> = s.split(':').collect();
        let [org, kind, account, amount] = parts[..] else {
            return Err(anyhow!(
                "--change[{i}]: expected ORG:debit|credit:ACCOUNT:AMOUNT"
            ));
        };
        let kind = match kind {
            "debit" => pb::ChangeKind::Debit,
            "credit" => pb::ChangeKind::Credit,
            _ => return Err(anyhow!("--change[{i}]: kind must be debit or credit")),
        };
        let amount: u64 = amount
            .parse()
            .map_err(|_| anyhow!("--change[{i}]: amount must be a whole number"))?;
        let change = pb::EnvelopeChange {
            kind: kind as i32,
            account: account.to_string(),
            amount,
            ..Default::default()
        };
        match out.iter_mut().find(|p| p.participant == org) {
            Some(p) => p.changes.push(change),
            None => out.push(pb::EnvelopeParticipant {
                participant: org.to_string(),
                changes: vec![change],
            }),
        }
    }
    Ok(out)
}

fn change_text(c: &pb::EnvelopeChange) -> String {
    let kind = match pb::ChangeKind::try_from(c.kind) {
        Ok(pb::ChangeKind::Debit) => "debit",
        Ok(pb::ChangeKind::Credit) => "credit",
        Ok(pb::ChangeKind::Record) => {
            return format!("record on {} ({} bytes)", c.account, c.signed_record.len());
        }
        _ => "?",
    };
    format!("{kind} {} {}", c.account, c.amount)
}

/// The stable JSON rendering of one envelope.
pub fn envelope_json(e: &pb::Envelope) -> serde_json::Value {
    json!({
        "envelope": e.envelope,
        "type": e.envelope_type,
        "phase": e.phase,
        "role": e.role,
        "coordinator": e.coordinator,
        "started_at_unix_ms": e.started_at_unix_ms,
        "updated_at_unix_ms": e.updated_at_unix_ms,
        "abort_cause": if e.abort_cause.is_empty() { serde_json::Value::Null } else { json!(e.abort_cause) },
        "participants": e.participants.iter().map(|p| json!({
            "participant": p.participant,
            "changes": p.changes.iter().map(change_text).collect::<Vec<_>>(),
            "vote": e.votes.get(&p.participant),
        })).collect::<Vec<_>>(),
        "accounts": e.accounts.iter().map(|a| json!({
            "account": a.account, "balance": a.balance, "reserved": a.reserved, "pending": a.pending,
        })).collect::<Vec<_>>(),
        "history": e.history.iter().map(|h| json!({
            "record_id": hex::encode(&h.record_id),
            "step": h.step,
            "event": h.event,
            "author": h.author,
            "at_unix_ms": h.at_unix_ms,
            "phase": h.phase,
        })).collect::<Vec<_>>(),
    })
}

async fn show(a: ShowArgs, out: Output) -> Result<()> {
    let e = client(&a.conn)
        .await?
        .get(pb::GetRequest {
            envelope: a.id.clone(),
        })
        .await
        .map_err(|s| crate::hints::status_error(&s, "a party token or admin.token"))?
        .into_inner()
        .envelope
        .ok_or_else(|| anyhow!("the node answered without an envelope"))?;
    if out == Output::Json {
        output::json(&envelope_json(&e));
        return Ok(());
    }
    println!("envelope:    {}", e.envelope);
    println!("type:        {}", e.envelope_type);
    println!("phase:       {}", e.phase);
    println!("role:        {}", e.role);
    println!("coordinator: {}", e.coordinator);
    if !e.abort_cause.is_empty() {
        println!("abort cause: {}", e.abort_cause);
    }
    println!();
    let rows: Vec<Vec<String>> = e
        .participants
        .iter()
        .map(|p| {
            vec![
                p.participant.clone(),
                p.changes
                    .iter()
                    .map(change_text)
                    .collect::<Vec<_>>()
                    .join(", "),
                e.votes.get(&p.participant).cloned().unwrap_or("-".into()),
            ]
        })
        .collect();
    output::table(&["PARTICIPANT", "CHANGES", "VOTE"], &rows);
    if !e.accounts.is_empty() {
        println!();
        let rows: Vec<Vec<String>> = e
            .accounts
            .iter()
            .map(|a| {
                vec![
                    a.account.clone(),
                    a.balance.to_string(),
                    a.reserved.to_string(),
                ]
            })
            .collect();
        output::table(&["ACCOUNT", "BALANCE", "RESERVED"], &rows);
    }
    println!();
    let rows: Vec<Vec<String>> = e
        .history
        .iter()
        .map(|h| {
            vec![
                h.at_unix_ms.to_string(),
                h.step.clone(),
                h.event.clone(),
                h.author.clone(),
                h.phase.clone(),
                hex::encode(&h.record_id).chars().take(12).collect(),
            ]
        })
        .collect();
    output::table(
        &["AT_MS", "STEP", "EVENT", "AUTHOR", "PHASE", "RECORD"],
        &rows,
    );
    Ok(())
}

async fn list(a: ListArgs, out: Output) -> Result<()> {
    let r = client(&a.conn)
        .await?
        .list(pb::ListRequest {
            include_closed: a.all,
            limit: a.limit,
        })
        .await
        .map_err(|s| crate::hints::status_error(&s, "a party token or admin.token"))?
        .into_inner();
    if out == Output::Json {
        output::json(&json!({
            "envelopes": r.envelopes.iter().map(|e| json!({
                "envelope": e.envelope, "type": e.envelope_type, "phase": e.phase,
                "role": e.role, "coordinator": e.coordinator,
                "started_at_unix_ms": e.started_at_unix_ms, "age_ms": e.age_ms,
            })).collect::<Vec<_>>()
        }));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = r
        .envelopes
        .iter()
        .map(|e| {
            vec![
                e.envelope.clone(),
                e.envelope_type.clone(),
                e.phase.clone(),
                e.role.clone(),
                format!("{:.1}s", e.age_ms as f64 / 1000.0),
            ]
        })
        .collect();
    output::table(&["ENVELOPE", "TYPE", "PHASE", "ROLE", "AGE"], &rows);
    Ok(())
}

async fn start(a: StartArgs, out: Output) -> Result<()> {
    let (envelope_type, participants) = match &a.delegate.delegate {
        Some(c) if !a.changes.is_empty() => {
            return Err(anyhow!(
                "--delegate {c}: give either --delegate or --change"
            ));
        }
        Some(c) => (
            "obligation_delegate".to_string(),
            crate::envelope_delegate::participants(&a.delegate, c)?,
        ),
        None => (a.envelope_type.clone(), parse_changes(&a.changes)?),
    };
    let r = client(&a.conn)
        .await?
        .start(pb::StartRequest {
            envelope: a.id.clone().unwrap_or_default(),
            envelope_type,
            participants,
        })
        .await
        .map_err(|s| crate::hints::status_error(&s, "a party's token (parties/<p>.token)"))?
        .into_inner();
    if out == Output::Json {
        output::json(&json!({
            "envelope": r.envelope, "phase": r.phase, "record_id": hex::encode(&r.record_id),
        }));
    } else {
        println!("envelope {} started ({})", r.envelope, r.phase);
    }
    Ok(())
}

async fn holds(a: ReadArgs, out: Output) -> Result<()> {
    let r = client(&a)
        .await?
        .list_holds(pb::ListHoldsRequest {})
        .await
        .map_err(|s| crate::hints::status_error(&s, "the node's admin.token"))?
        .into_inner();
    if out == Output::Json {
        output::json(&json!({
            "holds": r.holds.iter().map(|h| json!({
                "commitment": h.commitment, "envelope": h.envelope, "phase": h.phase,
                "role": h.role, "lapses_at_unix_ms": h.lapses_at_unix_ms,
            })).collect::<Vec<_>>()
        }));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = r
        .holds
        .iter()
        .map(|h| {
            vec![
                h.commitment.clone(),
                h.envelope.clone(),
                h.phase.clone(),
                h.role.clone(),
                match h.lapses_at_unix_ms {
                    0 => "until its records arrive".to_string(),
                    t => t.to_string(),
                },
            ]
        })
        .collect();
    output::table(
        &[
            "COMMITMENT",
            "ENVELOPE",
            "PHASE",
            "ROLE",
            "LAPSES AT (UNIX MS)",
        ],
        &rows,
    );
    Ok(())
}

async fn release_hold(a: ShowArgs, out: Output) -> Result<()> {
    let r = client(&a.conn)
        .await?
        .release_hold(pb::ReleaseHoldRequest {
            envelope: a.id.clone(),
        })
        .await
        .map_err(|s| crate::hints::status_error(&s, "the node's admin.token"))?
        .into_inner();
    if out == Output::Json {
        output::json(&json!({
            "envelope": a.id, "record_id": hex::encode(&r.record_id),
        }));
    } else {
        println!(
            "holds of envelope {} released (tick {})",
            a.id,
            hex::encode(&r.record_id)
        );
    }
    Ok(())
}

/// Runs an `envelope` subcommand.
pub async fn run(c: EnvelopeCmd, out: Output) -> Result<()> {
    match c {
        EnvelopeCmd::Show(a) => show(a, out).await,
        EnvelopeCmd::List(a) => list(a, out).await,
        EnvelopeCmd::Start(a) => start(*a, out).await,
        EnvelopeCmd::Holds(a) => holds(a, out).await,
        EnvelopeCmd::ReleaseHold(a) => release_hold(a, out).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_parse_into_participants_and_bad_ones_name_their_position() {
        let p = parse_changes(&[
            "acme:debit:src:30".into(),
            "globex:credit:dst:30".into(),
            "acme:credit:fee:1".into(),
        ])
        .unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].participant, "acme");
        assert_eq!(p[0].changes.len(), 2);
        assert_eq!(p[1].changes[0].kind, pb::ChangeKind::Credit as i32);
        let e = parse_changes(&["acme:steal:src:1".into()]).unwrap_err();
        assert!(e.to_string().contains("--change[0]"), "{e}");
        let e = parse_changes(&["a:debit:x:1".into(), "acme:debit:src".into()]).unwrap_err();
        assert!(e.to_string().contains("--change[1]"), "{e}");
    }
}
