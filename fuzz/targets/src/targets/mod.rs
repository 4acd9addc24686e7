//! The fuzz targets' bodies, one module per target, each a `run(&[u8])` that panics when a
//! property fails. `fuzz/fuzz_targets/<name>.rs` wraps each in libFuzzer's `fuzz_target!`; the
//! replay test (`tests/replay.rs`) runs each over its saved inputs on the stable toolchain.

pub mod checkpoint;
pub mod keys;
pub mod merkle;
pub mod note;
pub mod receipt;
pub mod signed_record;

#[cfg(feature = "node")]
pub mod envelope;
#[cfg(feature = "node")]
pub mod node_config;
#[cfg(feature = "node")]
pub mod record_edge;
#[cfg(feature = "node")]
pub mod witness_body;
#[cfg(feature = "node")]
pub mod witness_config;
