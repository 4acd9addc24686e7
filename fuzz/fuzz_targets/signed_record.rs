//! `SignedRecord` as a client or peer sends it: protobuf decoding, the signature's key
//! reference, Ed25519 verification over PAE with the party's key, then decoding the payload.
//!
//! The body is `accord_fuzz_targets::targets::signed_record::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::signed_record::run(data));
