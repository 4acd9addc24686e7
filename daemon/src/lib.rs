//! `accord-daemon`: the plumbing every Accord daemon needs, written once for `accord-node` and
//! `accord-witness` (issue 10, item 8). It depends on neither, so the witness still knows no node.
//!
//! - [`logging`]: the tracing subscriber (human or JSON lines on stderr, `RUST_LOG` filter).
//! - [`signal`]: SIGINT/SIGTERM → a [`tokio_util::sync::CancellationToken`].
//! - [`pem`]: reading certificates and private keys from PEM files.
//! - [`pki`]: a private CA and the leaf certificate it issues (`init`).
//! - [`layout`]: which file `init` writes where, for the node and the witness; and the small
//!   helpers `init` writes them with (secret files, bearer tokens).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod layout;
pub mod logging;
pub mod pem;
pub mod pki;
pub mod signal;

pub use error::Error;
