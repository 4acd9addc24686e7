//! Signed federation receipts, verified offline as the sender (and `accordctl receipt verify`)
//! does: the receiver's signature (or, batched, the batch signature and the receipt's path in
//! the batch), the admission leaf, the checkpoint and the inclusion proof. Protocol rules only
//! (`accord_proto::receipt`), so this target needs no RocksDB.

use crate::{cosigner_verifier, org_node_signer};
use accord_proto::pb::federation::v1::Signed;
use accord_proto::receipt as receipts;
use prost::Message;
use std::sync::OnceLock;

/// One execution: panics when a property fails.
pub fn run(data: &[u8]) {
    let Ok(signed) = Signed::decode(data) else {
        return;
    };
    static KEY: OnceLock<accord_proto::note::Verifier> = OnceLock::new();
    let keys = [KEY.get_or_init(|| org_node_signer().verifier()).clone()];
    let witnesses = [cosigner_verifier()];
    let bare = receipts::verify(&signed, &keys, &[]);
    let witnessed = receipts::verify(&signed, &keys, &witnesses);
    // Asking for a witness can only refuse more: never accept what the bare check refuses.
    if let Ok(w) = &witnessed {
        assert!(bare.is_ok(), "witnessed receipt refused without witnesses");
        assert!(w.proven, "a witnessed receipt is proven");
    }
    // The batch path decides exactly as the single one, also next to a second copy.
    let many = receipts::verify_many(&[signed.clone(), signed], &keys, &[]);
    assert_eq!(many.len(), 2);
    for m in &many {
        assert_eq!(m.is_ok(), bare.is_ok(), "verify_many and verify disagree");
    }
    for e in [bare.err(), witnessed.err()].into_iter().flatten() {
        assert!(e.len() < 4096, "error of {} bytes", e.len());
    }
}
