//! `accordctl envelope start --delegate COMMITMENT ...` (issue 13 item 7b): the participants of
//! an `obligation_delegate` envelope, with the two halves of the kernel's delegate (seed 000,
//! "Operations") pre-signed by their parties: the obligor's `delegate_offer` and the new
//! obligor's `delegate_acceptance`, whose `basis` and `offer_id` name the offer.

use accord_proto::note::Signer;
use accord_proto::pb::envelope::v1 as pb;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::signing;
use anyhow::{Context, Result, anyhow};
use prost::Message;

/// The delegate options of `envelope start`.
#[derive(Debug, Clone, clap::Args)]
pub struct DelegateArgs {
    /// Start an `obligation_delegate` of this commitment (instead of `--change`s).
    #[arg(long, requires_all = ["from", "from_key", "to", "to_key", "note"])]
    pub delegate: Option<String>,
    /// The obligor now, `ORG/PARTY` (signs the offer).
    #[arg(long)]
    pub from: Option<String>,
    /// The obligor's secret key file (`parties/<p>.skey`).
    #[arg(long)]
    pub from_key: Option<std::path::PathBuf>,
    /// The new obligor, `ORG/PARTY` (signs the acceptance).
    #[arg(long)]
    pub to: Option<String>,
    /// The new obligor's secret key file.
    #[arg(long)]
    pub to_key: Option<std::path::PathBuf>,
    /// The handover note of the offer.
    #[arg(long)]
    pub note: Option<String>,
    /// Another organisation holding the commitment that validates and holds it without a record
    /// of its own, e.g. the obligee's (repeat).
    #[arg(long = "participant")]
    pub participants: Vec<String>,
}

fn party(flag: &str, s: &str) -> Result<PartyRef> {
    match s.split_once('/') {
        Some((o, n)) if !o.is_empty() && !n.is_empty() && !n.contains('/') => Ok(PartyRef {
            organisation: o.into(),
            name: n.into(),
        }),
        _ => Err(anyhow!("{flag}: expected ORG/PARTY, got {s:?}")),
    }
}

fn signer(flag: &str, path: &std::path::Path) -> Result<Signer> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("{flag} {}", path.display()))?;
    Signer::from_skey(text.trim()).map_err(|e| anyhow!("{flag} {}: {e}", path.display()))
}

/// The two pre-signed records: `from`'s offer to `to`, and `to`'s acceptance naming it.
pub fn records(
    commitment: &str,
    from: &PartyRef,
    from_key: &Signer,
    to: &PartyRef,
    to_key: &Signer,
    note: &str,
    now_ms: i64,
) -> (rec::SignedRecord, rec::SignedRecord) {
    let offer = Record {
        author: Some(from.clone()),
        declared_at_unix_ms: now_ms,
        commitment_id: commitment.into(),
        operation: Some(Operation::Delegate(rec::Delegate {
            step: Some(rec::delegate::Step::Offer(rec::DelegateOffer {
                to: Some(to.clone()),
                handover_note: note.into(),
            })),
        })),
        ..Default::default()
    };
    let offer = signing::sign_record(from_key, &offer);
    let offer_id = signing::record_id(&offer.payload_type, &offer.payload);
    let acceptance = Record {
        author: Some(to.clone()),
        declared_at_unix_ms: now_ms,
        commitment_id: commitment.into(),
        basis: vec![offer_id.to_vec().into()],
        operation: Some(Operation::Delegate(rec::Delegate {
            step: Some(rec::delegate::Step::Acceptance(rec::HandoverAcceptance {
                offer_id: offer_id.to_vec().into(),
            })),
        })),
        ..Default::default()
    };
    (offer, signing::sign_record(to_key, &acceptance))
}

/// The participants of the delegate envelope: each `--participant` (no record), then the
/// obligor's organisation with the offer, then the new obligor's with the acceptance (one
/// participant with both, in that order, when they are of the same organisation).
pub fn participants(a: &DelegateArgs, commitment: &str) -> Result<Vec<pb::EnvelopeParticipant>> {
    let missing = |f: &str| anyhow!("--delegate needs {f}");
    let from = party(
        "--from",
        a.from.as_deref().ok_or_else(|| missing("--from"))?,
    )?;
    let to = party("--to", a.to.as_deref().ok_or_else(|| missing("--to"))?)?;
    let from_key = signer(
        "--from-key",
        a.from_key.as_deref().ok_or_else(|| missing("--from-key"))?,
    )?;
    let to_key = signer(
        "--to-key",
        a.to_key.as_deref().ok_or_else(|| missing("--to-key"))?,
    )?;
    let note = a.note.as_deref().ok_or_else(|| missing("--note"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let (offer, acceptance) = records(commitment, &from, &from_key, &to, &to_key, note, now);
    let change = |s: &rec::SignedRecord| pb::EnvelopeChange {
        kind: pb::ChangeKind::Record as i32,
        signed_record: s.encode_to_vec().into(),
        ..Default::default()
    };
    let mut out: Vec<pb::EnvelopeParticipant> = Vec::new();
    for p in &a.participants {
        if !out.iter().any(|x| x.participant == *p) {
            out.push(pb::EnvelopeParticipant {
                participant: p.clone(),
                changes: Vec::new(),
            });
        }
    }
    for (org, c) in [
        (&from.organisation, change(&offer)),
        (&to.organisation, change(&acceptance)),
    ] {
        match out.iter_mut().find(|x| x.participant == *org) {
            Some(x) => x.changes.push(c),
            None => out.push(pb::EnvelopeParticipant {
                participant: org.clone(),
                changes: vec![c],
            }),
        }
    }
    Ok(out)
}
