//! Admission outcomes and reason codes: protocol rules, defined in [`accord_proto::codes`]
//! (issue 10, item 3) and re-exported here for the federation modules.

pub use accord_proto::codes::*;

/// The admission decision of a peer record the ledger recorded with `outcome`: admitted when the
/// kernel applied it, or when it waits for its commitment's home to order it (issue 26: it is in
/// this node's ledger, and its effect comes with the home's decision); else rejected with the
/// kernel's code.
pub fn decision_of(outcome: &crate::ledger::Outcome) -> Decision {
    if outcome.applied || outcome.rejection_code == crate::projection::AWAITING_SEQUENCE {
        Decision::Admitted
    } else {
        Decision::Rejected(invalid_operation(&outcome.rejection_code))
    }
}
