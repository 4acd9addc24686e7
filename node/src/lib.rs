//! `accord-node`: an organisation's Accord node.
//!
//! A node keeps an append-only ledger of signed records in RocksDB, derives the Work kernel's
//! state from them, commits them into a Merkle log whose checkpoints witnesses co-sign, and
//! serves all of it over gRPC with TLS. [`run`] is the whole daemon; `main.rs` only parses
//! flags and calls it.
//!
//! The public API is what the node's users need (issue 10, item 3): [`run`] /
//! [`run_with_clock`] with a [`config::Config`] and [`Listeners`], [`init`] for a node
//! directory, [`connect`] for a TLS client channel, the [`Node`] state, the [`clock`] and the
//! [`Error`] type; [`ident`] (the name rules `accordctl` checks flags with) and [`ledger`] (for
//! `accordctl bench log`, which measures proofs on the node's real storage); [`embed`], the
//! step-by-step surface the deterministic simulation (`accord-sim`) drives; [`import`] (for
//! `accordctl bench scale`, which builds large ledgers through the real write path). Protocol rules
//! (reason codes, receipts) are in `accord-proto`; daemon plumbing in `accord-daemon`.
#![forbid(unsafe_code)]

pub mod audit;
pub mod clock;
pub mod config;
pub mod embed;
pub mod ident;
pub mod import;
pub mod init;
pub mod ledger;

pub(crate) mod auth;
pub(crate) mod convert;
pub(crate) mod envelope_driver;
pub(crate) mod envelopes;
pub(crate) mod error;
pub(crate) mod federation;
pub(crate) mod log;
pub(crate) mod metrics;
pub(crate) mod node;
pub(crate) mod pki;
pub(crate) mod projection;
pub(crate) mod received;
pub(crate) mod runs;
pub(crate) mod scrape;
pub(crate) mod server;
pub(crate) mod service_party;
pub(crate) mod services;
pub(crate) mod standby;
pub(crate) mod tls;
pub(crate) mod view;

pub use error::Error;

/// The node's input parsers, for the cargo-fuzz targets in `fuzz/` (issue 16) only: hidden, not
/// part of the node's API, and compiled in every build so the targets' imports cannot rot.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::convert::{record_from_pb, record_from_pb_recorded};
    pub use crate::federation::peers::{Peer, PeerKey, PeerRecord};
    pub use crate::pki::generate;
}
pub use node::Node;
pub use server::{Listeners, run, run_with_clock};
pub use tls::connect;
