//! Signed federation receipts, verified offline as the sender (and `accordctl receipt verify`)
//! does: the receiver's signature (or, batched, the batch signature and the receipt's path in
//! the batch), the admission leaf, the checkpoint and the inclusion proof. Protocol rules only
//! (`accord_proto::receipt`), so this target needs no RocksDB.
//!
//! The body is `accord_fuzz_targets::targets::receipt::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::receipt::run(data));
