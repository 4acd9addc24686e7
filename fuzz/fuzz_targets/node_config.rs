//! The node's config file: TOML → typed, validated `Config` (paths resolved against a node
//! directory made by `accord-node init`, so the seeds reach validation past "file not found").
//!
//! The body is `accord_fuzz_targets::targets::node_config::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::node_config::run(data));
