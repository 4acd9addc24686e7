//! Generates the Rust types and tonic services from `accord/**/*.proto` with the protoc binary
//! vendored by `protoc-bin-vendored`, so a fresh machine needs no protoc installed; also writes
//! the file descriptor set that gRPC reflection serves.

use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "accord/record/v1/record.proto",
    "accord/work/v1/work.proto",
    "accord/log/v1/log.proto",
    "accord/federation/v1/federation.proto",
    "accord/witness/v1/witness.proto",
    "accord/admin/v1/admin.proto",
    "accord/record/v1/run_record.proto",
    "accord/run/v1/run.proto",
    "accord/envelope/v1/envelope_record.proto",
    "accord/envelope/v1/envelope.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    config.bytes(["."]);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("accord_descriptor.bin"))
        .compile_with_config(config, PROTOS, &["."])?;
    for p in PROTOS {
        println!("cargo:rerun-if-changed={p}");
    }
    Ok(())
}
