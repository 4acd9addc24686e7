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

use accord_node::federation::receipts;
use accord_proto::note::Verifier;
use accord_proto::pb::federation::v1::Signed;
use accord_proto::pb::work::v1::GetDurabilityRequest;
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
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Options of `receipt fetch`.
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
}

fn usage(msg: String) -> ExitCode {
    eprintln!("accordctl receipt verify: {msg}");
    ExitCode::from(2)
}

/// `receipt verify`: needs no runtime.
pub fn verify(a: VerifyArgs) -> ExitCode {
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
    if a.json {
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

/// `receipt fetch`.
pub async fn fetch(a: FetchArgs) -> Result<()> {
    let id = hex::decode(&a.record).context("--record: not hex")?;
    let d = a
        .conn
        .work()
        .await?
        .get_durability(GetDurabilityRequest {
            record_id: id.into(),
        })
        .await
        .map_err(|s| anyhow!("GetDurability: {:?}: {}", s.code(), s.message()))?
        .into_inner();
    let p = d
        .peers
        .iter()
        .find(|p| p.peer == a.peer)
        .ok_or_else(|| anyhow!("no receipt from peer {:?} for this record yet", a.peer))?;
    if p.receipt.is_empty() {
        return Err(anyhow!(
            "no receipt from peer {:?} for this record yet",
            a.peer
        ));
    }
    std::fs::write(&a.out, &p.receipt).with_context(|| format!("write {}", a.out.display()))?;
    println!("wrote {} ({} bytes)", a.out.display(), p.receipt.len());
    Ok(())
}
