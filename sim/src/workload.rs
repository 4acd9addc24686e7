//! The workload: commitments between organisations through their lifecycle (seed 000): the
//! obligee's party requests from a party of another organisation (a third of them name a party
//! of the third organisation as principal, so all three hold the commitment), the candidate
//! promises, states delivery, and the obligee accepts. Each record is submitted at its author's
//! node through the record door, signed by the author's own key, with the last record its
//! author's node applied as basis (what a careful client does). Now and then a record is
//! submitted out of turn: the kernel rejects it, it is recorded and stays local.

use crate::fixture::ORGS;
use accord_proto::pb::record::v1::{self as rec, PartyRef, Record, record::Operation};
use accord_proto::pb::work::v1::GetCommitmentResponse;

/// Where a commitment is in its lifecycle (the next record to write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The obligee requests.
    Request,
    /// The candidate promises.
    Promise,
    /// The obligor states delivery.
    State,
    /// The obligee accepts.
    Accept,
    /// Accepted.
    Done,
}

/// One commitment of the workload.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Its id.
    pub id: String,
    /// The obligee's organisation (index into [`ORGS`]).
    pub obligee: usize,
    /// The candidate obligor's organisation.
    pub obligor: usize,
    /// A principal's organisation, if any.
    pub principal: Option<usize>,
    /// The next record.
    pub stage: Stage,
}

fn party(i: usize) -> PartyRef {
    PartyRef {
        organisation: ORGS[i].0.into(),
        name: ORGS[i].1.into(),
    }
}

impl Plan {
    /// The organisation whose party writes the next record.
    pub fn author(&self) -> usize {
        match self.stage {
            Stage::Request | Stage::Accept | Stage::Done => self.obligee,
            Stage::Promise | Stage::State => self.obligor,
        }
    }

    /// Whether the author's node shows the state the next record expects.
    pub fn in_turn(&self, view: Option<&GetCommitmentResponse>) -> bool {
        match (self.stage, view) {
            (Stage::Request, None) => true,
            (Stage::Promise, Some(v)) => v.state == "requested",
            (Stage::State, Some(v)) => v.state == "promised",
            (Stage::Accept, Some(v)) => v.state == "stated",
            _ => false,
        }
    }

    /// The next record, declared at `now` on the basis of the author's `view`.
    pub fn record(
        &self,
        view: Option<&GetCommitmentResponse>,
        now: i64,
        nonce: [u8; 8],
    ) -> Option<Record> {
        let op = match self.stage {
            Stage::Request => Operation::Request(rec::Request {
                candidate: Some(party(self.obligor)),
                principal: self.principal.map(party),
                terms: Some(rec::Terms {
                    title: format!("{} terms", self.id),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            Stage::Promise => Operation::Promise(rec::Promise {}),
            Stage::State => Operation::State(rec::State {
                fulfillment_refs: vec![format!("{}-delivery", self.id)],
            }),
            Stage::Accept => Operation::Accept(rec::Accept {
                evidence_ref: format!("{}-delivery", self.id),
                ..Default::default()
            }),
            Stage::Done => return None,
        };
        let basis = view
            .and_then(|v| {
                v.history.iter().rev().find(|h| {
                    h.operation != "admission" && h.outcome.as_ref().is_some_and(|o| o.applied)
                })
            })
            .map(|h| h.record_id.clone())
            .into_iter()
            .collect();
        Some(Record {
            author: Some(party(self.author())),
            declared_at_unix_ms: now,
            commitment_id: self.id.clone(),
            basis,
            nonce: nonce.to_vec().into(),
            operation: Some(op),
            ..Default::default()
        })
    }

    /// Moves to the next stage after the record was applied.
    pub fn advance(&mut self) {
        self.stage = match self.stage {
            Stage::Request => Stage::Promise,
            Stage::Promise => Stage::State,
            Stage::State => Stage::Accept,
            Stage::Accept | Stage::Done => Stage::Done,
        };
    }

    /// Every organisation holding the commitment.
    pub fn orgs(&self) -> Vec<usize> {
        let mut v = vec![self.obligee, self.obligor];
        v.extend(self.principal);
        v.sort_unstable();
        v.dedup();
        v
    }
}
