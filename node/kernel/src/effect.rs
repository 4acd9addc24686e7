//! What applying a record asks of the caller: [`Effect`]s (the kernel does no I/O) and what a
//! notification is about. Shared by the operation modules, below them in the module order.

use serde::{Deserialize, Serialize};

use crate::commitment::{Commitment, ReopenLink};
use crate::record::{NoticeType, Party, RecordId, RevokeKind, StopMode};

/// What the caller must do after a record was applied (the kernel does no I/O).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Notify these parties (attention): everything the node needs to deliver it.
    Notify {
        /// The commitment.
        commitment: String,
        /// The record that caused it.
        record: RecordId,
        /// Recipients (never the author).
        to: Vec<Party>,
        /// About what.
        about: Notification,
    },
    /// A claim produced a promise (seed 000, "Assignment": "a promise record is produced"): the
    /// commitment is already promised by `obligor` in the derived state; the node writes the
    /// promise record of it, authored by `obligor`'s organisation's node, with `claim` in basis.
    PromiseProduced {
        /// The commitment.
        commitment: String,
        /// The claim record the promise rests on.
        claim: RecordId,
        /// The claiming obligor.
        obligor: Party,
        /// The obligee the promise is made to.
        obligee: Party,
        /// The items promised (empty = the whole commitment).
        items: Vec<String>,
        /// The terms version promised.
        terms_version: RecordId,
    },
    /// An allowed revoke_acceptance starts a linked reopening commitment. The node stores
    /// `commitment` under `link.reopening` (the allow record created it; a replay of the allow
    /// gives the same value). The node must refuse the allow if that id is taken.
    StartReopening {
        /// The link (also in both commitments).
        link: ReopenLink,
        /// The reopening commitment's initial derived state.
        commitment: Box<Commitment>,
    },
}

/// What a notification is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Notification {
    /// A notice from the obligor.
    Notice {
        /// Its type.
        notice_type: NoticeType,
        /// Its text.
        text: String,
    },
    /// The commitment was closed administratively.
    AdministrativelyClosed {
        /// Why.
        reason: String,
    },
    /// A revoke request was opened and waits for the recipients.
    RevokeRequested {
        /// Which.
        kind: RevokeKind,
    },
    /// A dispute mark was made.
    DisputeMarked {
        /// The disputed record.
        disputed: RecordId,
    },
    /// A stop (or pause) was requested of the executor.
    StopRequested {
        /// How.
        mode: StopMode,
    },
    /// The executor refused a stop request.
    StopRefused {
        /// Why.
        reason: String,
    },
    /// A person took control.
    ControlTaken {
        /// Who holds control.
        holder: Party,
    },
    /// The party's own record lost: the commitment's home rejected it (issue 26, "One order":
    /// a record that loses is rejected at every node with a code its author can see). Raised by
    /// the node, not by the kernel: the kernel never sees a record another node decided.
    RecordRejected {
        /// The home's code (the kernel's, e.g. `terminal_state`, or federation's).
        code: String,
    },
}
