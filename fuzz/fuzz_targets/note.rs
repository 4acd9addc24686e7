//! C2SP signed notes (c2sp.org/signed-note): parse, re-serialise, verify against fixed keys.
//!
//! The body is `accord_fuzz_targets::targets::note::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::note::run(data));
