//! Admission outcomes and reason codes: protocol rules, defined in [`accord_proto::codes`]
//! (issue 10, item 3) and re-exported here for the federation modules.

pub use accord_proto::codes::*;
