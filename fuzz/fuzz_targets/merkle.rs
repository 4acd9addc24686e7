//! RFC 6962 / 9162 proof verification. Two parts: arbitrary (index, sizes, proof, roots) must
//! give an answer without panicking; and an oracle — a correct proof for a small tree verifies,
//! and any change the fuzzer makes to it (a hash bit, a size, an index, a dropped or added hash)
//! is refused.
//!
//! The body is `accord_fuzz_targets::targets::merkle::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::merkle::run(data));
