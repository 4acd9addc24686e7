//! `accord-witness`: an independent transparency-log witness (c2sp.org/tlog-witness).
//!
//! For every log it is configured with (an origin and the log's Ed25519 keys), the witness keeps
//! the latest checkpoint it co-signed, and co-signs a new checkpoint only if it is signed by the
//! log and consistent with that one (RFC 9162 §2.1.4.2 consistency proof), answering with a
//! timestamped `cosignature/v1` line (c2sp.org/tlog-cosignature). It serves the C2SP HTTP
//! protocol (`POST /add-checkpoint`) and the same semantics over gRPC
//! (`accord.witness.v1.WitnessService`), plus an admin service for the set of logs.
//!
//! - [`witness`]: the core ([`Witness::add_checkpoint`] and friends), usable in-process.
//! - [`request`]: the add-checkpoint request and its HTTP text form.
//! - [`config`], [`init`]: the config file and the `init` command.
//! - [`server`]: [`run`] and [`Listeners`]; [`http`] and [`grpc`] are the two transports.
//! - [`store`]: the RocksDB state, written in groups by the `commit` queue; [`tls`]: TLS material
//!   and acceptors; [`clock`]: time.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod clock;
mod commit;
pub mod config;
pub mod error;
pub mod grpc;
pub mod http;
pub mod init;
pub mod logs;
pub mod metrics;
pub mod request;
pub mod server;
pub mod store;
pub mod subtree;
pub mod tls;
pub mod witness;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::Config;
pub use error::Error;
pub use logs::LogConfig;
pub use request::AddCheckpoint;
pub use server::{Listeners, run, run_with_clock, serve};
pub use store::Latest;
pub use subtree::SignSubtree;
pub use witness::{Cosigned, Limits, LogStatus, Witness, WitnessOptions};
