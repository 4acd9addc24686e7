//! `accord-proto`: Accord's wire schema and the protocol rules every component shares.
//!
//! - [`pb`]: the generated protobuf types and tonic services (`proto/accord/**/*.proto`).
//! - [`signing`]: DSSE-style PAE signing of records, envelopes and receipts (DESIGN.md,
//!   "Records and signing").
//! - [`note`]: C2SP signed notes and Ed25519 keys in signed-note text form (c2sp.org/signed-note).
//! - [`checkpoint`]: C2SP tlog-checkpoint and tlog-cosignature (cosignature/v1).
//! - [`merkle`]: RFC 6962 / RFC 9162 Merkle hashing, inclusion and consistency proofs.
//! - [`declaration`]: seed 000's typed Declarations and the payload type each is signed under.
//! - [`codes`]: federation admission decisions and the closed lists of reason codes.
//! - [`receipt`]: signing and offline verification of federation receipts.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod pb;

pub mod checkpoint;
pub mod codes;
pub mod declaration;
pub mod error;
pub mod merkle;
pub mod note;
pub mod receipt;
pub mod rpc_shapes;
pub mod run_receipt;
pub mod signing;

pub use checkpoint::{Checkpoint, Cosigner};
pub use error::{Error, KeyRef};
pub use note::{KeyKind, Note, Signer, Verifier};
pub use signing::RecordId;
