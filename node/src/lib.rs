//! `accord-node`: an organisation's Accord node.
//!
//! A node keeps an append-only ledger of signed records in RocksDB ([`ledger`]), derives the
//! Work kernel's state from them ([`projection`]), commits them into a Merkle log whose
//! checkpoints witnesses co-sign, and serves all of it over gRPC with TLS ([`server`]).
//! [`run`] is the whole daemon; `main.rs` only parses flags and calls it.
#![forbid(unsafe_code)]

pub mod auth;
pub mod clock;
pub mod config;
pub mod convert;
pub mod error;
pub mod federation;
pub mod ident;
pub mod init;
pub mod ledger;
pub mod log;
pub mod metrics;
pub mod node;
pub mod pki;
pub mod projection;
pub mod runs;
pub mod server;
pub mod service_party;
pub mod services;
pub mod tls;
pub mod view;

pub use error::Error;
pub use node::Node;
pub use server::{Listeners, run, run_with_clock};
