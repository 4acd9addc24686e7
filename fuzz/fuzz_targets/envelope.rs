//! A federation `Deliver` body: the DSSE-signed `Envelope` and its records, checked as the
//! receiver does (`federation/inbox.rs` `authenticate` and `check`): payload type, decoding,
//! sender is a known peer, receiver is us, no party key signs the envelope, the node key's
//! signature verifies; per record: payload type, decoding, conversion, the author's
//! organisation, the key ↔ party binding and the signature. `Peer::verify_batch` (the fast
//! path) must never accept a record `Peer::verify` refuses.
//!
//! The body is `accord_fuzz_targets::targets::envelope::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::envelope::run(data));
