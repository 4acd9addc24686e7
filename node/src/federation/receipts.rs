//! Receipts (DESIGN.md, "Federation": "The receiver answers with signed receipts: one when the
//! envelope is recorded, one when each record's admission is decided … A receipt should carry
//! proof, not a promise").
//!
//! Signing and offline verification are protocol rules: `sign`, [`sign_batch`] (every receipt
//! of one answer under one signature, issue 14), `verify` and [`verify_many`] live in
//! [`accord_proto::receipt`]; what the node uses is re-exported here. The receiver's proof attachment is
//! [`super::receipt_proof`]; the sender's store of receipts is [`super::receipt_store`].

pub use accord_proto::receipt::{Verified, sign_batch, verify_many};
