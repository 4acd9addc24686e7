//! Conversions between each RPC's own message and the shared message it replaced (issue 28, buf's
//! STANDARD rules: one request and one response message per RPC).
//!
//! `RunService.CreateRun` answers a `CreateRunResponse`, `WorkService.ListRecords` streams
//! `ListRecordsResponse`s, and so on; each has the same fields, numbers and types as the message
//! the RPC used before (`SubmitResponse`, `LedgerEntry`, …), so today's clients read the new
//! bytes unchanged. Inside Rust the node builds the shared message once (a ledger entry, a
//! submit outcome) and converts it here at the service's edge; clients convert back where they
//! want the shared type. Both directions move every field: a field added to one message and not
//! the other fails to compile here, and `tests` below check the bytes are identical.

use crate::pb::run::v1 as run;
use crate::pb::work::v1 as work;

/// Implements `From` both ways between two messages with the same fields.
macro_rules! same_fields {
    ($a:ty, $b:ty, { $($f:ident),* $(,)? }) => {
        impl From<$a> for $b {
            fn from(v: $a) -> Self {
                Self { $($f: v.$f),* }
            }
        }
        impl From<$b> for $a {
            fn from(v: $b) -> Self {
                Self { $($f: v.$f),* }
            }
        }
    };
}

/// Every message that answers a write with `SubmitResponse`'s fields.
macro_rules! submit_like {
    ($($b:ty),* $(,)?) => {
        $(same_fields!(work::SubmitResponse, $b, { record_id, sequence, durability, outcome, duplicate });)*
    };
}

submit_like!(
    work::DeclareResponse,
    run::CreateRunResponse,
    run::TransitionResponse,
    run::AddActionResponse,
    run::AddProposalResponse,
    run::AddDecisionResponse,
    run::AddEvidenceResponse,
    run::AddOutputResponse,
    run::AddAuditEventResponse,
);

same_fields!(work::LedgerEntry, work::ListRecordsResponse, {
    sequence, record_id, record, recorded_at_unix_ms, outcome, applied_at_unix_ms
});
same_fields!(work::ListCommitmentsRequest, work::WatchCommitmentsRequest, {
    category, flag, needs, page_size, page_token
});
same_fields!(work::CommitmentSummary, work::WatchCommitmentsResponse, {
    commitment_id, state, category, flags, next_move, next_move_reason, assignment, execution,
    control, liveness, obligee, obligor, needs, change
});
same_fields!(work::AttentionItem, work::WatchAttentionResponse, {
    sequence, commitment_id, record_id, from, to, at_unix_ms, about, detail
});
same_fields!(run::GetRunRequest, run::GetReceiptRequest, { run });
same_fields!(run::GetRunRequest, run::GetPriorWorkRequest, { run });

#[cfg(test)]
mod tests {
    //! The wire claim of issue 28: a message encoded as the old shape decodes as the new one to
    //! the same value, and the bytes are identical both ways. Values are filled by hand (every
    //! field set), not from the conversion under test.
    use super::*;
    use crate::pb::record::v1::{PartyRef, SignedRecord};
    use prost::Message;

    fn party(name: &str) -> Option<PartyRef> {
        Some(PartyRef {
            organisation: "acme".into(),
            name: name.into(),
        })
    }

    fn same_bytes<A: Message + Default + Clone + PartialEq + std::fmt::Debug, B>(a: &A)
    where
        B: Message + Default + From<A> + Into<A> + PartialEq + std::fmt::Debug,
    {
        let bytes = a.encode_to_vec();
        let decoded = B::decode(bytes.as_slice()).expect("decodes as the new message");
        assert_eq!(decoded, B::from(a.clone()));
        assert_eq!(
            decoded.encode_to_vec(),
            bytes,
            "the new message's bytes are the old one's"
        );
        assert_eq!(&Into::<A>::into(decoded), a);
    }

    #[test]
    fn submit_answers_share_bytes() {
        let a = work::SubmitResponse {
            record_id: vec![7; 32].into(),
            sequence: 41,
            durability: 2,
            outcome: Some(work::Outcome {
                applied: false,
                rejection_code: "terminal_state".into(),
                ..Default::default()
            }),
            duplicate: true,
        };
        same_bytes::<_, work::DeclareResponse>(&a);
        same_bytes::<_, run::CreateRunResponse>(&a);
        same_bytes::<_, run::TransitionResponse>(&a);
        same_bytes::<_, run::AddActionResponse>(&a);
        same_bytes::<_, run::AddProposalResponse>(&a);
        same_bytes::<_, run::AddDecisionResponse>(&a);
        same_bytes::<_, run::AddEvidenceResponse>(&a);
        same_bytes::<_, run::AddOutputResponse>(&a);
        same_bytes::<_, run::AddAuditEventResponse>(&a);
    }

    #[test]
    fn stream_items_share_bytes() {
        same_bytes::<_, work::ListRecordsResponse>(&work::LedgerEntry {
            sequence: 3,
            record_id: vec![1; 32].into(),
            record: Some(SignedRecord {
                payload: vec![9, 9].into(),
                ..Default::default()
            }),
            recorded_at_unix_ms: 1_700_000_000_000,
            outcome: Some(work::Outcome {
                applied: true,
                ..Default::default()
            }),
            applied_at_unix_ms: 1_699_999_999_000,
        });
        same_bytes::<_, work::WatchCommitmentsResponse>(&work::CommitmentSummary {
            commitment_id: "c1".into(),
            state: "promised".into(),
            category: "ready".into(),
            flags: vec!["overdue".into()],
            next_move: vec![party("bob").unwrap()],
            next_move_reason: "obligor".into(),
            assignment: "assigned".into(),
            execution: "not_started".into(),
            control: "none".into(),
            liveness: "not_applicable".into(),
            obligee: party("alice"),
            obligor: party("bob"),
            needs: vec!["waiting_on".into()],
            change: "changed".into(),
        });
        same_bytes::<_, work::WatchAttentionResponse>(&work::AttentionItem {
            sequence: 12,
            commitment_id: "c1".into(),
            record_id: vec![2; 32].into(),
            from: party("alice"),
            to: party("bob"),
            at_unix_ms: 5,
            about: "notice".into(),
            detail: "reminder".into(),
        });
    }

    #[test]
    fn requests_share_bytes() {
        same_bytes::<_, work::WatchCommitmentsRequest>(&work::ListCommitmentsRequest {
            category: "triage".into(),
            flag: "stale".into(),
            needs: party("bob"),
            page_size: 10,
            page_token: "t".into(),
        });
        same_bytes::<_, run::GetReceiptRequest>(&run::GetRunRequest { run: "r1".into() });
        same_bytes::<_, run::GetPriorWorkRequest>(&run::GetRunRequest { run: "r1".into() });
    }
}
