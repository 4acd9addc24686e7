//! `accordctl receipt verify` and `accordctl receipt fetch`: proving that a peer admitted a
//! record, to anyone, with accordctl alone (seed 000, "Federation admission"; DESIGN.md: "A
//! receipt should carry proof, not a promise").
//!
//! A receipt file holds one encoded `accord.federation.v1.Signed` receipt, as the sender keeps
//! it (`receipt fetch` writes it from `WorkService.GetDurability`). `receipt verify` checks it
//! offline against the receiver's vkey (its node key: it signs receipts, its admission
//! declarations and its checkpoints) and, optionally, witness vkeys: the receipt signature, the
//! admission declaration (the leaf), the checkpoint signature (and each witness cosignature),
//! and the inclusion proof of the leaf under the checkpoint's root.
//!
//! Exit codes of `verify`: 0 proven; 1 invalid or not proven (one-line reason on stderr);
//! 2 usage (unreadable file, malformed key).

use accord_proto::note::Verifier;
use accord_proto::pb::federation::v1::Signed;
#[cfg(feature = "node")]
use accord_proto::pb::work::v1::GetDurabilityRequest;
use accord_proto::receipt as receipts;
#[cfg(feature = "node")]
use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};
use prost::Message;
use std::path::PathBuf;
use std::process::ExitCode;

/// `accordctl receipt ...`
#[derive(Debug, Subcommand)]
pub enum ReceiptCmd {
    /// Verify a peer's admission receipt offline: signature, admission leaf, checkpoint and
    /// inclusion proof. Exit 0 only when the admission is proven.
    Verify(VerifyArgs),
    /// Write the latest receipt a peer gave for one of this node's records to a file.
    #[cfg(feature = "node")]
    Fetch(FetchArgs),
}

/// Options of `receipt verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The receipt file (an encoded accord.federation.v1.Signed).
    #[arg(long)]
    pub receipt: PathBuf,
    /// The receiving peer's vkey (its node key); repeat for several.
    #[arg(long = "peer-vkey", required = true)]
    pub peer_vkeys: Vec<String>,
    /// A witness cosigner vkey whose cosignature the checkpoint must carry; repeatable.
    #[arg(long = "witness-vkey")]
    pub witness_vkeys: Vec<String>,
    /// Also require the receipt to be about this record (hex id).
    #[arg(long)]
    pub record: Option<String>,
    /// Print JSON (the same as `--output json`).
    #[arg(long, hide = true)]
    pub json: bool,
}

/// Options of `receipt fetch`.
#[cfg(feature = "node")]
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// The sending node and a credential that may read the record.
    #[command(flatten)]
    pub conn: crate::creds::ReadArgs,
    /// The record id (hex).
    #[arg(long)]
    pub record: String,
    /// The peer whose receipt to fetch.
    #[arg(long)]
    pub peer: String,
    /// Where to write the receipt.
    #[arg(long)]
    pub out: PathBuf,
    /// Wait (up to SECS, default 60) until the receipt carries the peer's checkpoint and
    /// inclusion proof, i.e. until `receipt verify` can prove it: the receiver must first
    /// checkpoint its admission declaration.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "60")]
    pub wait: Option<u64>,
}

fn usage(msg: String) -> ExitCode {
    eprintln!("accordctl receipt verify: {msg}");
    ExitCode::from(2)
}

/// `receipt verify`: needs no runtime.
pub fn verify(a: VerifyArgs, out: crate::output::Output) -> ExitCode {
    let json = out.or_json(a.json) == crate::output::Output::Json;
    let bytes = match std::fs::read(&a.receipt) {
        Ok(b) => b,
        Err(e) => return usage(format!("{}: {e}", a.receipt.display())),
    };
    let mut keys = Vec::new();
    for v in &a.peer_vkeys {
        match Verifier::from_vkey(v.trim()) {
            Ok(k) => keys.push(k),
            Err(e) => return usage(format!("--peer-vkey {v:?}: {e}")),
        }
    }
    let mut witnesses = Vec::new();
    for v in &a.witness_vkeys {
        match Verifier::from_vkey(v.trim()) {
            Ok(k) => witnesses.push(k),
            Err(e) => return usage(format!("--witness-vkey {v:?}: {e}")),
        }
    }
    let invalid = |msg: String| {
        eprintln!("accordctl receipt verify: invalid: {msg}");
        ExitCode::from(1)
    };
    let signed = match Signed::decode(bytes.as_slice()) {
        Ok(s) => s,
        Err(e) => return invalid(format!("not an encoded accord.federation.v1.Signed: {e}")),
    };
    let v = match receipts::verify(&signed, &keys, &witnesses) {
        Ok(v) => v,
        Err(e) => return invalid(e),
    };
    let r = &v.receipt;
    if let Some(want) = &a.record
        && hex::encode(&r.record_id) != want.to_lowercase()
    {
        return invalid(format!(
            "the receipt is about record {}, not {want}",
            hex::encode(&r.record_id)
        ));
    }
    let Some(decision) = &v.decision else {
        return invalid("an envelope receipt, not an admission receipt".into());
    };
    if !v.proven {
        return invalid(format!(
            "signed by {}, but it carries no checkpoint and inclusion proof yet (fetch it again later)",
            r.receiver
        ));
    }
    if json {
        let j = serde_json::json!({
            "valid": true,
            "receiver": r.receiver,
            "sender": r.sender,
            "record_id": hex::encode(&r.record_id),
            "outcome": decision.to_json(),
            "admission_record_id": hex::encode(&r.admission_record_id),
            "admission_sequence": r.admission_sequence,
            "checkpoint_size": v.checkpoint_size,
            "witnessed_by": v.witnessed_by,
        });
        println!("{j}");
    } else {
        println!("receipt: valid");
        println!("  receiver:  {}", r.receiver);
        println!("  sender:    {}", r.sender);
        println!("  record:    {}", hex::encode(&r.record_id));
        println!("  outcome:   {decision}");
        println!(
            "  proof:     admission record {} is leaf {} of {}'s checkpoint of size {}",
            hex::encode(&r.admission_record_id),
            r.admission_sequence,
            r.receiver,
            v.checkpoint_size
        );
        if !v.witnessed_by.is_empty() {
            println!("  witnessed: {}", v.witnessed_by.join(", "));
        }
    }
    ExitCode::SUCCESS
}

/// What a stored receipt says, without verifying it (`receipt verify` does that).
#[cfg(feature = "node")]
fn peek(receipt: &[u8]) -> Option<accord_proto::pb::federation::v1::Receipt> {
    let signed = Signed::decode(receipt).ok()?;
    accord_proto::pb::federation::v1::Receipt::decode(signed.payload.as_ref()).ok()
}

/// `receipt fetch`: the latest receipt the peer gave for the record; with `--wait`, polls until
/// it carries the receiver's checkpoint and inclusion proof.
#[cfg(feature = "node")]
pub async fn fetch(a: FetchArgs, out: crate::output::Output) -> Result<()> {
    let id = hex::decode(a.record.trim()).context("--record: not hex")?;
    let mut client = a.conn.work().await?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(a.wait.unwrap_or(0));
    let spinner = a
        .wait
        .map(|_| crate::output::spinner("waiting for the receiver's checkpoint and proof"));
    let (receipt, durability, code) = loop {
        let d = client
            .get_durability(GetDurabilityRequest {
                record_id: id.clone().into(),
            })
            .await
            .map_err(|s| {
                crate::hints::status_error(
                    &s,
                    "--token-file <node dir>/admin.token or a party token that may read the record",
                )
            })?
            .into_inner();
        let found = d
            .peers
            .iter()
            .find(|p| p.peer == a.peer && !p.receipt.is_empty());
        let proven = found
            .and_then(|p| peek(&p.receipt))
            .is_some_and(|r| !r.checkpoint.is_empty());
        if let Some(p) = found
            && (proven || a.wait.is_none())
        {
            let state = p.durability().as_str_name();
            let state = state.trim_start_matches("DURABILITY_").to_lowercase();
            break (p.receipt.to_vec(), state, p.code.clone());
        }
        if std::time::Instant::now() >= deadline {
            return Err(match found {
                None => anyhow!(
                    "no receipt from peer {:?} for this record yet — is {:?} a peer this record is delivered to? `accordctl admin peer health {}` shows its queue",
                    a.peer,
                    a.peer,
                    a.peer
                ),
                Some(_) => anyhow!(
                    "peer {:?} answered, but its receipt carries no checkpoint and proof yet — wait longer (--wait SECS): the receiver proves admission once it has checkpointed",
                    a.peer
                ),
            });
        }
        // Receipts are fetched again by the node's poller; ask again shortly.
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    std::fs::write(&a.out, &receipt).with_context(|| format!("write {}", a.out.display()))?;
    let r = peek(&receipt).unwrap_or_default();
    if out == crate::output::Output::Json {
        crate::output::json(&serde_json::json!({
            "path": a.out.display().to_string(),
            "bytes": receipt.len(),
            "peer": a.peer,
            "record_id": hex::encode(&id),
            "durability": durability,
            "code": code,
            "proven": !r.checkpoint.is_empty(),
        }));
    } else {
        println!(
            "wrote {} ({} bytes): {} at {}{}",
            a.out.display(),
            receipt.len(),
            durability,
            a.peer,
            if r.checkpoint.is_empty() {
                " — no checkpoint and proof yet (fetch again later, or --wait)"
            } else {
                ", with the receiver's checkpoint and inclusion proof"
            }
        );
    }
    Ok(())
}
