//! Types and services generated from `proto/accord/**/*.proto` at build time.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// Records and their signed form (`accord.record.v1`).
pub mod record {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("accord.record.v1");
    }
}
/// The client-facing Work API (`accord.work.v1`).
pub mod work {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("accord.work.v1");
    }
}
/// The node's Merkle log API (`accord.log.v1`).
pub mod log {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("accord.log.v1");
    }
}
/// Node-to-node federation (`accord.federation.v1`).
pub mod federation {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("accord.federation.v1");
    }
}
/// The witness API (`accord.witness.v1`).
pub mod witness {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("accord.witness.v1");
    }
}
/// The node operator API (`accord.admin.v1`).
pub mod admin {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("accord.admin.v1");
    }
}
/// Runs and execution receipts (`accord.run.v1`).
pub mod run {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("accord.run.v1");
    }
}
/// Commit envelopes (`accord.envelope.v1`).
pub mod envelope {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("accord.envelope.v1");
    }
}

/// The encoded `FileDescriptorSet` of every Accord proto file, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("accord_descriptor");
