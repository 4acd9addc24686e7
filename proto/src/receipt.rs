//! Federation receipts: signing and offline verification (DESIGN.md, "Federation": "The
//! receiver answers with signed receipts: one when the envelope is recorded, one when each
//! record's admission is decided … A receipt should carry proof, not a promise").
//!
//! * The receiver signs with [`sign`] (DSSE, [`RECEIPT_PAYLOAD_TYPE`]).
//! * Anyone — the sender's node, an auditor, `accordctl receipt verify` — checks a receipt
//!   offline against the receiver's keys (and witnesses) with [`verify`] / [`verify_many`]: the
//!   signature, the admission leaf, the checkpoint signature and the inclusion proof.
//!
//! Pure protocol rules with no I/O, so they live in `accord-proto` (issue 10, item 3); the
//! receiver's proof attachment and the sender's receipt store stay in `accord-node`.

use crate::checkpoint::{Checkpoint, open_checkpoint};
use crate::codes::Decision;
use crate::merkle::{leaf_hash, verify_inclusion};
use crate::note::{Note, Signer, Verifier};
use crate::pb::federation::v1::{Receipt, ReceiptKind, Signed};
use crate::pb::record::v1::{Record, Signature, SignedRecord, record::Operation};
use crate::signing::{self, RECEIPT_PAYLOAD_TYPE};
use prost::Message;

/// Signs a receipt with the node key (DSSE, [`RECEIPT_PAYLOAD_TYPE`]).
pub fn sign(signer: &Signer, r: &Receipt) -> Signed {
    let payload = r.encode_to_vec();
    let sig = signing::sign(signer, RECEIPT_PAYLOAD_TYPE, &payload);
    Signed {
        payload: payload.into(),
        payload_type: RECEIPT_PAYLOAD_TYPE.into(),
        signatures: vec![sig],
    }
}

/// What [`verify`] established.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The decoded receipt.
    pub receipt: Receipt,
    /// For admission receipts: the decision.
    pub decision: Option<Decision>,
    /// The admission record is proven included in the receiver's signed checkpoint.
    pub proven: bool,
    /// The checkpoint's size, when proven.
    pub checkpoint_size: u64,
    /// Names of the witnesses whose cosignatures verified.
    pub witnessed_by: Vec<String>,
}

/// The first signature made by one of `keys`, with that key.
fn signed_by<'a>(
    sigs: &'a [Signature],
    keys: &'a [Verifier],
) -> Option<(&'a Verifier, &'a Signature)> {
    sigs.iter().find_map(|sig| {
        keys.iter()
            .find(|k| k.name() == sig.key_name && k.key_id()[..] == sig.key_id[..])
            .map(|k| (k, sig))
    })
}

/// A receipt decoded, before its signatures are checked.
struct Parsed {
    receipt: Receipt,
    decision: Option<Decision>,
    leaf: Option<SignedRecord>,
}

fn parse(signed: &Signed) -> Result<Parsed, String> {
    if signed.payload_type != RECEIPT_PAYLOAD_TYPE {
        return Err(format!(
            "payload type {:?} is not {RECEIPT_PAYLOAD_TYPE:?}",
            signed.payload_type
        ));
    }
    let receipt = Receipt::decode(signed.payload.as_ref())
        .map_err(|e| format!("receipt does not decode: {e}"))?;
    let decision = match ReceiptKind::try_from(receipt.kind) {
        Ok(ReceiptKind::Admission) => Some(
            Decision::from_wire(receipt.outcome, &receipt.code)
                .ok_or("admission receipt without an outcome")?,
        ),
        Ok(ReceiptKind::EnvelopeRecorded) => None,
        _ => return Err(format!("unknown receipt kind {}", receipt.kind)),
    };
    let leaf = if receipt.checkpoint.is_empty() {
        None
    } else {
        Some(
            SignedRecord::decode(receipt.admission_leaf.as_ref())
                .map_err(|e| format!("admission leaf does not decode: {e}"))?,
        )
    };
    Ok(Parsed {
        receipt,
        decision,
        leaf,
    })
}

/// Checkpoints already verified in one [`verify_many`] call: note text → (size, root,
/// witnesses whose cosignature verified). Receipts under one checkpoint check its signature once.
type CheckpointCache =
    std::collections::HashMap<String, Result<(u64, [u8; 32], Vec<String>), String>>;

fn open_cp(
    text: &str,
    keys: &[Verifier],
    witnesses: &[Verifier],
) -> Result<(u64, [u8; 32], Vec<String>), String> {
    let note = Note::parse(text.as_bytes()).map_err(|e| format!("checkpoint: {e}"))?;
    let cp = Checkpoint::parse(note.text()).map_err(|e| format!("checkpoint: {e}"))?;
    let log_keys: Vec<Verifier> = keys
        .iter()
        .filter(|k| k.name() == cp.origin)
        .cloned()
        .collect();
    if log_keys.is_empty() {
        return Err(format!(
            "no receiver key is named after the checkpoint origin {:?}",
            cp.origin
        ));
    }
    let opened = open_checkpoint(text.as_bytes(), &cp.origin, &log_keys, witnesses)
        .map_err(|e| format!("checkpoint: {e}"))?;
    let mut by = Vec::new();
    for w in witnesses {
        if !opened
            .cosignatures()
            .any(|(c, _)| c.name() == w.name() && c.key_id() == w.key_id())
        {
            return Err(format!(
                "checkpoint is not cosigned by witness {}",
                w.name()
            ));
        }
        by.push(w.name().to_string());
    }
    Ok((cp.size, cp.root, by))
}

/// The checks after the signatures: the admission leaf says what the receipt says, and the
/// checkpoint and inclusion proof hold.
fn finish(
    p: Parsed,
    witnesses: &[Verifier],
    keys: &[Verifier],
    cache: &mut CheckpointCache,
) -> Result<Verified, String> {
    let mut v = Verified {
        receipt: p.receipt,
        decision: p.decision,
        proven: false,
        checkpoint_size: 0,
        witnessed_by: Vec::new(),
    };
    let Some(leaf) = p.leaf else {
        if !witnesses.is_empty() {
            return Err("the receipt carries no checkpoint, so no witness cosignature".into());
        }
        return Ok(v);
    };
    let r = &v.receipt;
    let leaf_id = signing::record_id(&leaf.payload_type, &leaf.payload);
    if leaf_id[..] != r.admission_record_id[..] {
        return Err("the admission leaf is not the admission record the receipt names".into());
    }
    let record = Record::decode(leaf.payload.as_ref())
        .map_err(|e| format!("admission record does not decode: {e}"))?;
    let Some(Operation::Admission(a)) = &record.operation else {
        return Err("the admission leaf is not an admission declaration".into());
    };
    if a.record_id != r.record_id
        || a.outcome != r.outcome
        || a.code != r.code
        || a.peer != r.sender
    {
        return Err("the admission declaration does not say what the receipt says".into());
    }
    let (size, root, by) = cache
        .entry(r.checkpoint.clone())
        .or_insert_with(|| open_cp(&r.checkpoint, keys, witnesses))
        .clone()?;
    let proof: Vec<[u8; 32]> = r
        .inclusion_proof
        .iter()
        .map(|h| {
            h.as_ref()
                .try_into()
                .map_err(|_| "inclusion proof hash is not 32 bytes".to_string())
        })
        .collect::<Result<_, _>>()?;
    verify_inclusion(
        &leaf_hash(&r.admission_leaf),
        r.admission_sequence,
        size,
        &proof,
        &root,
    )
    .map_err(|e| format!("inclusion proof: {e}"))?;
    v.proven = true;
    v.checkpoint_size = size;
    v.witnessed_by = by;
    Ok(v)
}

/// Verifies many signed receipts against the receiver's keys at once: the receipt signatures and
/// the admission leaves' signatures in one Ed25519 batch (one by one only if the batch fails), each
/// distinct checkpoint once. See [`verify`] for what is checked.
pub fn verify_many(
    list: &[Signed],
    keys: &[Verifier],
    witnesses: &[Verifier],
) -> Vec<Result<Verified, String>> {
    let parsed: Vec<Result<Parsed, String>> = list.iter().map(parse).collect();
    let mut failed: Vec<Option<String>> = vec![None; list.len()];
    // (owner, key, PAE message, signature)
    let mut items: Vec<(usize, &Verifier, Vec<u8>, Vec<u8>)> = Vec::new();
    for (i, (s, p)) in list.iter().zip(&parsed).enumerate() {
        let Ok(p) = p else { continue };
        let Some((k, sig)) = signed_by(&s.signatures, keys) else {
            failed[i] = Some("no signature by the receiver's key".into());
            continue;
        };
        items.push((
            i,
            k,
            signing::pae(RECEIPT_PAYLOAD_TYPE, &s.payload),
            sig.signature.to_vec(),
        ));
        if let Some(leaf) = &p.leaf {
            match signed_by(&leaf.signatures, keys) {
                Some((k, sig)) => items.push((
                    i,
                    k,
                    signing::pae(&leaf.payload_type, &leaf.payload),
                    sig.signature.to_vec(),
                )),
                None => {
                    failed[i] = Some("admission record: no signature by the receiver's key".into())
                }
            }
        }
    }
    let batch: Vec<(&Verifier, &[u8], &[u8])> = items
        .iter()
        .map(|(_, k, m, s)| (*k, m.as_slice(), s.as_slice()))
        .collect();
    if signing::verify_batch(&batch).is_err() {
        for (i, k, m, s) in &items {
            if signing::verify_batch(&[(*k, m.as_slice(), s.as_slice())]).is_err() {
                failed[*i] = Some("signature does not verify".into());
            }
        }
    }
    let mut cache = CheckpointCache::new();
    parsed
        .into_iter()
        .zip(failed)
        .map(|(p, f)| match f {
            Some(e) => Err(e),
            None => finish(p?, witnesses, keys, &mut cache),
        })
        .collect()
}

/// Verifies a signed receipt against the receiver's keys: its signature, and — when it carries
/// a checkpoint — that the admission leaf is the receiver's signed admission declaration about
/// this record with this outcome, that the checkpoint is signed by the receiver's log key (and
/// cosigned by every key in `witnesses`), and that the inclusion proof puts the leaf at the
/// admission sequence under the checkpoint's root.
pub fn verify(
    signed: &Signed,
    keys: &[Verifier],
    witnesses: &[Verifier],
) -> Result<Verified, String> {
    verify_many(std::slice::from_ref(signed), keys, witnesses)
        .pop()
        .unwrap_or_else(|| Err("nothing to verify".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Cosigner;
    use crate::pb::record::v1::{Admission, AdmissionOutcome, PartyRef};

    fn signer(name: &str) -> Signer {
        Signer::generate(name, &mut rand::rngs::OsRng).unwrap()
    }

    /// A receiver's admission receipt with a proof: a one-leaf log holding the declaration.
    fn proven(node: &Signer, witness: Option<&Cosigner>) -> (Signed, Receipt) {
        let record_id = [7u8; 32];
        let decl = Record {
            author: Some(PartyRef {
                organisation: "globex".into(),
                name: "work-service".into(),
            }),
            commitment_id: "c".into(),
            operation: Some(Operation::Admission(Admission {
                record_id: record_id.to_vec().into(),
                peer: "acme".into(),
                outcome: AdmissionOutcome::Admitted as i32,
                ..Default::default()
            })),
            ..Default::default()
        };
        let leaf = signing::sign_record(node, &decl);
        let leaf_bytes = leaf.encode_to_vec();
        let root = leaf_hash(&leaf_bytes);
        let mut note = Checkpoint::new(node.name(), 1, root).sign(node).unwrap();
        if let Some(w) = witness {
            let body = Note::parse(note.as_bytes()).unwrap().text().to_string();
            note.push_str(&w.cosign(&body, 1_700_000_000).unwrap().to_line());
        }
        let r = Receipt {
            kind: ReceiptKind::Admission as i32,
            receiver: "globex".into(),
            sender: "acme".into(),
            record_id: record_id.to_vec().into(),
            outcome: AdmissionOutcome::Admitted as i32,
            admission_record_id: signing::record_id(&leaf.payload_type, &leaf.payload)
                .to_vec()
                .into(),
            admission_sequence: 0,
            checkpoint: note,
            admission_leaf: leaf_bytes.into(),
            ..Default::default()
        };
        (sign(node, &r), r)
    }

    #[test]
    fn a_proven_receipt_verifies_offline_and_tampering_does_not() {
        let node = signer("globex.accord/log");
        let w = Cosigner::generate("witness.example/w1", &mut rand::rngs::OsRng).unwrap();
        let (s, r) = proven(&node, Some(&w));
        let keys = [node.verifier()];
        let v = verify(&s, &keys, &[w.verifier()]).unwrap();
        assert!(v.proven);
        assert_eq!(v.decision, Some(Decision::Admitted));
        assert_eq!(v.witnessed_by, ["witness.example/w1"]);
        // Another key, a witness that did not cosign, a changed outcome: invalid.
        assert!(verify(&s, &[signer("globex.accord/log").verifier()], &[]).is_err());
        let other = Cosigner::generate("witness.example/w2", &mut rand::rngs::OsRng).unwrap();
        assert!(verify(&s, &keys, &[other.verifier()]).is_err());
        let mut t = r.clone();
        t.outcome = AdmissionOutcome::Rejected as i32;
        t.code = "x".into();
        assert!(
            verify(&sign(&node, &t), &keys, &[])
                .unwrap_err()
                .contains("does not say")
        );
        let mut t = r.clone();
        t.admission_sequence = 1;
        assert!(verify(&sign(&node, &t), &keys, &[]).is_err());
        let mut bad = s.clone();
        let mut p = bad.payload.to_vec();
        p[3] ^= 1;
        bad.payload = p.into();
        // In a batch, the bad one fails alone.
        let many = verify_many(&[s.clone(), bad, s], &keys, &[]);
        assert!(many[0].is_ok() && many[1].is_err() && many[2].is_ok());
    }
}
