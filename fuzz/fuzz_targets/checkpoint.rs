//! tlog-checkpoint bodies and cosignature/v1 lines: parse, re-serialise, open with the log key
//! and a witness key, verify each cosignature.
//!
//! The body is `accord_fuzz_targets::targets::checkpoint::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::checkpoint::run(data));
