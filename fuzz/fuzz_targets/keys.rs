//! Key text: vkeys, note signer skeys, cosigner skeys and single signature lines.
//!
//! The body is `accord_fuzz_targets::targets::keys::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::keys::run(data));
