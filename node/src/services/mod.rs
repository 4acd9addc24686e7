//! The node's gRPC services. Each handler converts wire types at the edge
//! ([`crate::convert`]) and maps [`crate::Error`] to a status through its one `From` impl.

pub mod admin;
pub mod attention;
pub mod commitments;
pub mod envelope;
pub mod federation;
pub mod listing;
pub mod log;
pub mod quota;
pub mod run;
pub mod run_receipt;
pub mod submit;
pub mod visibility;
pub mod work;
