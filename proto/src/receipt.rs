//! Federation receipts: signing and offline verification (DESIGN.md, "Federation": "The
//! receiver answers with signed receipts: one when the envelope is recorded, one when each
//! record's admission is decided … A receipt should carry proof, not a promise").
//!
//! * The receiver signs with [`sign`] (DSSE, [`RECEIPT_PAYLOAD_TYPE`]), or — every receipt of
//!   one answer at once — with [`sign_batch`]: one signature over a [`ReceiptBatch`] (a Merkle
//!   root over the receipts), each receipt carrying its path (issue 14: one signature per
//!   envelope instead of one per record).
//! * Anyone — the sender's node, an auditor, `accordctl receipt verify` — checks a receipt
//!   offline against the receiver's keys (and witnesses) with [`verify`] / [`verify_many`]: the
//!   signature, the admission leaf, the checkpoint signature and the inclusion proof.
//!
//! Pure protocol rules with no I/O, so they live in `accord-proto` (issue 10, item 3); the
//! receiver's proof attachment and the sender's receipt store stay in `accord-node`.

use crate::checkpoint::{Checkpoint, open_checkpoint};
use crate::codes::Decision;
use crate::merkle::{self, Hash, MemoryTree, leaf_hash, verify_inclusion};
use crate::note::{Note, Signer, Verifier};
use crate::pb::federation::v1::{Receipt, ReceiptBatch, ReceiptBatchProof, ReceiptKind, Signed};
use crate::pb::record::v1::{Record, Signature, SignedRecord, record::Operation};
use crate::signing::{self, RECEIPT_BATCH_PAYLOAD_TYPE, RECEIPT_PAYLOAD_TYPE};
use prost::Message;
use std::collections::HashMap;

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

/// Signs `receipts` — every one from `receiver` to `sender` — as one batch (issue 14): the
/// receiver signs one `ReceiptBatch` (the Merkle root over the receipts, each encoded without
/// `batch`) instead of one signature per receipt, and each receipt carries its place in the
/// batch, so it is verifiable alone (see `accord.federation.v1.Receipt`). Returned in order.
pub fn sign_batch(
    signer: &Signer,
    receiver: &str,
    sender: &str,
    issued_at: i64,
    receipts: Vec<Receipt>,
) -> Vec<Signed> {
    if receipts.is_empty() {
        return Vec::new();
    }
    let hashes: Vec<Hash> = receipts
        .iter()
        .map(|r| {
            debug_assert!(r.batch.is_none());
            leaf_hash(&r.encode_to_vec())
        })
        .collect();
    // An in-memory tree of at most a few thousand leaves cannot fail to build.
    let tree = MemoryTree::from_leaf_hashes(&hashes).unwrap_or_default();
    let size = receipts.len() as u64;
    let head = ReceiptBatch {
        receiver: receiver.to_string(),
        sender: sender.to_string(),
        size,
        root: tree.root().to_vec().into(),
        issued_at_unix_ms: issued_at,
    }
    .encode_to_vec();
    let sig = signing::sign(signer, RECEIPT_BATCH_PAYLOAD_TYPE, &head);
    let head: prost::bytes::Bytes = head.into();
    receipts
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            let path = merkle::inclusion_proof(&tree, i as u64, size).unwrap_or_default();
            r.batch = Some(ReceiptBatchProof {
                batch: head.clone(),
                index: i as u64,
                path: path.into_iter().map(|h| h.to_vec().into()).collect(),
            });
            Signed {
                payload: r.encode_to_vec().into(),
                payload_type: RECEIPT_PAYLOAD_TYPE.into(),
                signatures: vec![sig.clone()],
            }
        })
        .collect()
}

/// A batched receipt's place in its batch, checked: the batch names the receipt's receiver and
/// sender, and its Merkle path puts the receipt (encoded without `batch`) under the batch root.
/// Returns the encoded batch, which the signatures are over.
fn open_batch(receipt: &Receipt) -> Result<Option<prost::bytes::Bytes>, String> {
    let Some(proof) = &receipt.batch else {
        return Ok(None);
    };
    let head = ReceiptBatch::decode(proof.batch.as_ref())
        .map_err(|e| format!("receipt batch does not decode: {e}"))?;
    if head.receiver != receipt.receiver || head.sender != receipt.sender {
        return Err("the receipt batch names another receiver or sender".into());
    }
    let root: Hash = head
        .root
        .as_ref()
        .try_into()
        .map_err(|_| "receipt batch root is not 32 bytes".to_string())?;
    let path: Vec<Hash> = proof
        .path
        .iter()
        .map(|h| {
            h.as_ref()
                .try_into()
                .map_err(|_| "receipt batch path hash is not 32 bytes".to_string())
        })
        .collect::<Result<_, _>>()?;
    let mut leaf = receipt.clone();
    leaf.batch = None;
    verify_inclusion(
        &leaf_hash(&leaf.encode_to_vec()),
        proof.index,
        head.size,
        &path,
        &root,
    )
    .map_err(|e| format!("receipt batch: the receipt is not in the batch: {e}"))?;
    Ok(Some(proof.batch.clone()))
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
    /// For a batched receipt: the encoded batch its signatures are over (its path checked).
    batch: Option<prost::bytes::Bytes>,
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
    let batch = open_batch(&receipt)?;
    Ok(Parsed {
        receipt,
        decision,
        leaf,
        batch,
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
    if record.author.as_ref().map(|p| p.organisation.as_str()) != Some(r.receiver.as_str()) {
        return Err("the admission declaration is not the receiver's".into());
    }
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

/// One signature to check in [`verify_many`]: the receipts it covers (indexes into the list),
/// the key, the PAE message and the signature.
type SigItem<'a> = (Vec<usize>, &'a Verifier, Vec<u8>, Vec<u8>);

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
    // (owners, key, PAE message, signature); the receipts of one batch share one item, so a
    // batch's signature is checked once however many of its receipts are here.
    let mut items: Vec<SigItem<'_>> = Vec::new();
    let mut batches: HashMap<(&[u8], &[u8]), usize> = HashMap::new();
    for (i, (s, p)) in list.iter().zip(&parsed).enumerate() {
        let Ok(p) = p else { continue };
        let Some((k, sig)) = signed_by(&s.signatures, keys) else {
            failed[i] = Some("no signature by the receiver's key".into());
            continue;
        };
        match &p.batch {
            Some(head) => match batches.get(&(head.as_ref(), sig.signature.as_ref())) {
                Some(&j) => items[j].0.push(i),
                None => {
                    batches.insert((head.as_ref(), sig.signature.as_ref()), items.len());
                    items.push((
                        vec![i],
                        k,
                        signing::pae(RECEIPT_BATCH_PAYLOAD_TYPE, head),
                        sig.signature.to_vec(),
                    ));
                }
            },
            None => items.push((
                vec![i],
                k,
                signing::pae(RECEIPT_PAYLOAD_TYPE, &s.payload),
                sig.signature.to_vec(),
            )),
        }
        // A declaration written without a signature (issue 32, item 2) is the receiver's by its
        // place in the receiver's signed log: `finish` checks the inclusion proof either way.
        if let Some(leaf) = p.leaf.as_ref().filter(|l| !l.signatures.is_empty()) {
            match signed_by(&leaf.signatures, keys) {
                Some((k, sig)) => items.push((
                    vec![i],
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
        for (owners, k, m, s) in &items {
            if signing::verify_batch(&[(*k, m.as_slice(), s.as_slice())]).is_err() {
                for i in owners {
                    failed[*i] = Some("signature does not verify".into());
                }
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

/// Verifies a signed receipt against the receiver's keys: its signature (for a batched receipt:
/// the batch's signature and the receipt's path in the batch), and — when it carries
/// a checkpoint — that the admission leaf is the receiver's admission declaration about this
/// record with this outcome (signed with the receiver's key, or without any signature: then
/// the checkpoint and the inclusion proof alone bind it, issue 32 item 2), that the checkpoint is signed by the receiver's log key (and
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
        let leaf = signing::sign_record(node, &declaration("globex"));
        proven_leaf(node, witness, leaf)
    }

    /// globex's declaration that it admitted acme's record `[7; 32]`, authored by `org`.
    fn declaration(org: &str) -> Record {
        let record_id = [7u8; 32];
        Record {
            author: Some(PartyRef {
                organisation: org.into(),
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
        }
    }

    /// The receipt for `leaf` as the only leaf of the receiver's log.
    fn proven_leaf(
        node: &Signer,
        witness: Option<&Cosigner>,
        leaf: SignedRecord,
    ) -> (Signed, Receipt) {
        let record_id = [7u8; 32];
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

    /// Issue 32, item 2: a declaration written without a signature is proven by the
    /// receiver's signed checkpoint and its inclusion proof alone; without the receiver as its
    /// author, or not at the proven place, it is not.
    #[test]
    fn an_unsigned_declaration_is_proven_by_the_checkpoint() {
        let node = signer("globex.accord/log");
        let keys = [node.verifier()];
        let unsigned = |org: &str| {
            let r = declaration(org);
            SignedRecord {
                payload: r.encode_to_vec().into(),
                payload_type: crate::declaration::payload_type(&r),
                signatures: vec![],
            }
        };
        let (s, r) = proven_leaf(&node, None, unsigned("globex"));
        let v = verify(&s, &keys, &[]).unwrap();
        assert!(v.proven);
        assert_eq!(v.decision, Some(Decision::Admitted));
        let (s, _) = proven_leaf(&node, None, unsigned("initech"));
        assert!(
            verify(&s, &keys, &[])
                .unwrap_err()
                .contains("not the receiver's")
        );
        let mut t = r.clone();
        t.admission_sequence = 1;
        assert!(verify(&sign(&node, &t), &keys, &[]).is_err());
        // A leaf signed by a key that is not the receiver's is not taken for an unsigned one.
        let other = signer("initech.accord/log");
        let (s, _) = proven_leaf(
            &node,
            None,
            signing::sign_record(&other, &declaration("globex")),
        );
        assert!(
            verify(&s, &keys, &[])
                .unwrap_err()
                .contains("no signature by the receiver")
        );
    }

    fn admission(record: u8, outcome: AdmissionOutcome, code: &str) -> Receipt {
        Receipt {
            kind: ReceiptKind::Admission as i32,
            receiver: "globex".into(),
            sender: "acme".into(),
            envelope_id: vec![1u8; 32].into(),
            record_id: vec![record; 32].into(),
            outcome: outcome as i32,
            code: code.into(),
            admission_record_id: vec![record ^ 0xff; 32].into(),
            admission_sequence: u64::from(record),
            issued_at_unix_ms: 1_700_000_000_000,
            ..Default::default()
        }
    }

    #[test]
    fn a_batched_receipt_verifies_alone_with_one_signature_for_the_batch() {
        let node = signer("globex.accord/log");
        let keys = [node.verifier()];
        let env = Receipt {
            kind: ReceiptKind::EnvelopeRecorded as i32,
            receiver: "globex".into(),
            sender: "acme".into(),
            envelope_id: vec![1u8; 32].into(),
            ..Default::default()
        };
        let mut list = vec![env];
        for i in 0..6u8 {
            list.push(admission(i, AdmissionOutcome::Admitted, ""));
        }
        list.push(admission(9, AdmissionOutcome::Rejected, "bad_signature"));
        let signed = sign_batch(&node, "globex", "acme", 1_700_000_000_000, list.clone());
        assert_eq!(signed.len(), 8);
        // One signature for all of them.
        assert!(signed.iter().all(|s| s.signatures == signed[0].signatures));
        for (i, s) in signed.iter().enumerate() {
            let v = verify(s, &keys, &[]).unwrap();
            let mut r = v.receipt.clone();
            assert_eq!(r.batch.as_ref().map(|b| b.index), Some(i as u64));
            r.batch = None;
            assert_eq!(r, list[i], "receipt {i} says what was signed");
        }
        let v = verify(&signed[7], &keys, &[]).unwrap();
        assert_eq!(v.decision, Some(Decision::Rejected("bad_signature".into())));
        assert!(verify_many(&signed, &keys, &[]).iter().all(Result::is_ok));
        // Another key does not verify it.
        assert_eq!(
            verify(&signed[1], &[signer("globex.accord/log").verifier()], &[]).unwrap_err(),
            "no signature by the receiver's key"
        );
    }

    #[test]
    fn a_tampered_batched_receipt_or_batch_signature_fails_with_its_reason() {
        let node = signer("globex.accord/log");
        let keys = [node.verifier()];
        let list: Vec<Receipt> = (0..5u8)
            .map(|i| admission(i, AdmissionOutcome::Admitted, ""))
            .collect();
        let signed = sign_batch(&node, "globex", "acme", 1_700_000_000_000, list);
        let reencode = |s: &Signed, f: &dyn Fn(&mut Receipt)| {
            let mut r = Receipt::decode(s.payload.as_ref()).unwrap();
            f(&mut r);
            Signed {
                payload: r.encode_to_vec().into(),
                ..s.clone()
            }
        };
        // An entry changed (admitted → rejected): no longer under the signed root.
        let t = reencode(&signed[2], &|r| {
            r.outcome = AdmissionOutcome::Rejected as i32;
            r.code = "operator".into();
        });
        assert_eq!(
            verify(&t, &keys, &[]).unwrap_err(),
            "receipt batch: the receipt is not in the batch: proof invalid: computed root does not match"
        );
        // Moved to another leaf of the same batch.
        let t = reencode(&signed[2], &|r| r.batch.as_mut().unwrap().index = 3);
        assert!(
            verify(&t, &keys, &[])
                .unwrap_err()
                .starts_with("receipt batch: the receipt is not in the batch")
        );
        // Claimed for another sender than the batch names.
        let t = reencode(&signed[2], &|r| r.sender = "initech".into());
        assert_eq!(
            verify(&t, &keys, &[]).unwrap_err(),
            "the receipt batch names another receiver or sender"
        );
        // The batch signature changed: every receipt of the batch fails, alone or together.
        let mut bad = signed.clone();
        for s in &mut bad {
            let mut sig = s.signatures[0].signature.to_vec();
            sig[5] ^= 1;
            s.signatures[0].signature = sig.into();
        }
        assert_eq!(
            verify(&bad[0], &keys, &[]).unwrap_err(),
            "signature does not verify"
        );
        let mixed = verify_many(
            &[signed[0].clone(), bad[1].clone(), signed[1].clone()],
            &keys,
            &[],
        );
        assert!(mixed[0].is_ok() && mixed[2].is_ok());
        assert_eq!(mixed[1].as_ref().unwrap_err(), "signature does not verify");
        // The batch itself changed (another root): its signature no longer holds.
        let t = reencode(&signed[0], &|r| {
            let b = r.batch.as_mut().unwrap();
            let mut head = ReceiptBatch::decode(b.batch.as_ref()).unwrap();
            head.issued_at_unix_ms += 1;
            b.batch = head.encode_to_vec().into();
        });
        assert_eq!(
            verify(&t, &keys, &[]).unwrap_err(),
            "signature does not verify"
        );
    }

    #[test]
    fn a_proven_batched_receipt_verifies_like_a_single_one() {
        let node = signer("globex.accord/log");
        let (_, mut r) = proven(&node, None);
        r.issued_at_unix_ms = 5;
        let signed = sign_batch(&node, "globex", "acme", 5, vec![r.clone(), r]);
        let v = verify(&signed[1], &[node.verifier()], &[]).unwrap();
        assert!(v.proven);
        assert_eq!(v.decision, Some(Decision::Admitted));
    }
}
