//! The witness's config file: TOML → validated `Config`, paths resolved against a witness
//! directory made by `accord-witness init`.
//!
//! The body is `accord_fuzz_targets::targets::witness_config::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::witness_config::run(data));
