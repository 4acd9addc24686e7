//! The witness's HTTP add-checkpoint body (c2sp.org/tlog-witness): parse, re-serialise, then
//! the checks the witness makes before co-signing — the checkpoint opens under the log key and
//! the consistency proof leads from the size it holds (4 leaves) to the new size.
//!
//! The body is `accord_fuzz_targets::targets::witness_body::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::witness_body::run(data));
