//! Conversion of the operations of issue 11 (gates, aggregation, observations, stop requests,
//! control handover): each wire field reaches the kernel, and bad input names its field.

use super::record_from_pb;
use crate::error::Error;
use accord_kernel as k;
use accord_proto::pb::record::v1 as pb;
use accord_proto::pb::record::v1::record::Operation as Op;

fn party(o: &str, n: &str) -> pb::PartyRef {
    pb::PartyRef {
        organisation: o.into(),
        name: n.into(),
    }
}

fn record(op: Op) -> pb::Record {
    pb::Record {
        author: Some(party("acme", "alice")),
        commitment_id: "c-1".into(),
        operation: Some(op),
        ..Default::default()
    }
}

fn convert(op: Op) -> Result<k::Operation, Error> {
    record_from_pb([1; 32], &record(op)).map(|r| r.op)
}

fn field_of(e: Error) -> String {
    match e {
        Error::InvalidArgument { field, .. } => field,
        other => panic!("expected InvalidArgument, got {other}"),
    }
}

#[test]
fn a_gate_with_participants_and_a_policy() {
    let op = convert(Op::OpenCondition(pb::OpenCondition {
        condition: Some(pb::Condition {
            description: "sign-off".into(),
            addressed_to: None,
            kind: pb::GateKind::Approval as i32,
            deadline_unix_ms: 5_000,
            participants: vec![party("acme", "bob"), party("globex", "gina")],
            aggregation: Some(pb::Aggregation {
                rule: pb::AggregationRule::KOfN as i32,
                k: 2,
                percent: 0,
                any_rejection_rejects: true,
            }),
        }),
    }))
    .unwrap();
    let k::Operation::OpenCondition { condition } = op else {
        panic!("{op:?}")
    };
    assert_eq!(condition.kind, k::GateKind::Approval);
    assert_eq!(condition.deadline, Some(5_000));
    assert_eq!(
        condition.participants,
        vec![
            k::Party::new("acme", "bob"),
            k::Party::new("globex", "gina")
        ]
    );
    assert_eq!(condition.aggregation.rule, k::AggregationRule::KOfN);
    assert_eq!(condition.aggregation.k, 2);
    assert!(condition.aggregation.any_rejection_rejects);
}

#[test]
fn gate_decision_and_amend_participants() {
    let op = convert(Op::GateDecision(pb::GateDecision {
        answer: pb::GateAnswer::Accept as i32,
        content_digest: vec![7; 32].into(),
        participant: None,
        reason: String::new(),
    }))
    .unwrap();
    assert_eq!(
        op,
        k::Operation::GateDecision {
            answer: k::GateAnswer::Accept,
            content_digest: Some([7; 32]),
            participant: None,
            reason: String::new(),
        }
    );
    let bad = convert(Op::GateDecision(pb::GateDecision {
        answer: pb::GateAnswer::Accept as i32,
        content_digest: vec![7; 31].into(),
        ..Default::default()
    }))
    .unwrap_err();
    assert_eq!(
        field_of(bad),
        "record.payload.operation.gate_decision.content_digest"
    );
    let bad = convert(Op::Amend(pb::Amend {
        supersedes: vec![1; 32].into(),
        terms: None,
        participants: vec![pb::GateParticipants {
            gate: Default::default(),
            participants: vec![party("acme", "bob")],
        }],
    }))
    .unwrap_err();
    assert_eq!(
        field_of(bad),
        "record.payload.operation.amend.participants[0].gate"
    );
}

#[test]
fn observation_stop_and_handover() {
    let op = convert(Op::Observation(pb::Observation {
        execution: pb::ExecutionReport::Stopped as i32,
        control: pb::ControlReport::Manual as i32,
        heartbeat_interval_ms: 30_000,
        left_cleanly: false,
        checkpoint: "ck-1".into(),
        external_state: String::new(),
    }))
    .unwrap();
    let k::Operation::Observation(o) = op else {
        panic!("{op:?}")
    };
    assert_eq!(o.execution, k::ExecutionReport::Stopped);
    assert_eq!(o.control, k::ControlReport::Manual);
    assert_eq!(o.heartbeat_interval_ms, Some(30_000));
    assert_eq!(o.checkpoint, "ck-1");
    let bad = convert(Op::Observation(pb::Observation {
        heartbeat_interval_ms: -1,
        ..Default::default()
    }))
    .unwrap_err();
    assert_eq!(
        field_of(bad),
        "record.payload.operation.observation.heartbeat_interval_ms"
    );
    assert_eq!(
        convert(Op::StopRequest(pb::StopRequest {
            mode: pb::StopMode::Pause as i32,
            reason: "check".into(),
        }))
        .unwrap(),
        k::Operation::StopRequest {
            mode: k::StopMode::Pause,
            reason: "check".into()
        }
    );
    assert_eq!(
        convert(Op::StopResponse(pb::StopResponse {
            answer: pb::StopAnswer::Refuse as i32,
            reason: "interlock".into(),
        }))
        .unwrap(),
        k::Operation::StopResponse {
            answer: k::StopAnswer::Refuse,
            reason: "interlock".into()
        }
    );
    assert_eq!(
        convert(Op::ControlLease(pb::ControlLease {
            holder: Some(party("acme", "bob")),
            until_unix_ms: 0,
        }))
        .unwrap(),
        k::Operation::ControlLease {
            holder: Some(k::Party::new("acme", "bob")),
            until: None
        }
    );
    assert_eq!(
        convert(Op::HandBackControl(pb::HandBackControl {
            handoff_note: "done".into(),
        }))
        .unwrap(),
        k::Operation::HandBackControl {
            handoff_note: "done".into()
        }
    );
    assert_eq!(
        convert(Op::Recheck(pb::Recheck {
            outcome: pb::RecheckOutcome::Replan as i32,
            note: String::new(),
        }))
        .unwrap(),
        k::Operation::Recheck {
            outcome: k::RecheckOutcome::Replan,
            note: String::new()
        }
    );
    assert_eq!(
        convert(Op::ResumeAfterStop(pb::ResumeAfterStop {
            reason: String::new(),
        }))
        .unwrap(),
        k::Operation::ResumeAfterStop {
            reason: String::new()
        }
    );
}
