//! The node's edge for a submitted record (`services/work.rs` `verify_local`, federation
//! `inbox::check`): payload type, protobuf decoding, identifier bounds and the conversion into
//! the kernel's form (`convert::record_from_pb`), whose errors name the offending field.
//!
//! The body is `accord_fuzz_targets::targets::record_edge::run` (fuzz/targets), which the suite also
//! replays over the saved inputs on the stable toolchain.
#![no_main]
#![forbid(unsafe_code)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| accord_fuzz_targets::targets::record_edge::run(data));
