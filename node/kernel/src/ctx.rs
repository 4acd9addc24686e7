//! [`Ctx`]: what an operation module sees while one record is applied. Built by `apply` after
//! the existence, Access and subject checks; the operation modules read it and never reach back
//! into the dispatcher.

use crate::access::Access;
use crate::commitment::{Commitment, OpenCondition};
use crate::directory::Directory;
use crate::record::Record;

/// The context of one `apply`.
pub(crate) struct Ctx<'a> {
    pub c: &'a Commitment,
    pub r: &'a Record,
    pub access: &'a Access,
    pub now: i64,
    /// The open condition a withdraw/satisfy names.
    pub condition: Option<&'a OpenCondition>,
    /// The commitments the node knows.
    pub dir: &'a dyn Directory,
}
