//! Run records, wire → kernel (seed 002; `run_record.proto`), and the run state's wire number
//! both ways. Part of [`crate::convert`]: the same conventions (an empty id is `None`, any other
//! length than 32 bytes is bad input, every error names its field).

use super::opt_id;
use crate::error::Error;
use accord_kernel as k;
use accord_kernel::run as kr;
use accord_proto::pb::record::v1 as pb;
use accord_proto::pb::record::v1::record::Operation as Op;

type R<T> = Result<T, Error>;
const F: &str = "record.payload.operation";

/// The wire number of a run state (`RunState` enum: 1 = pending … 14 = expired, the kernel's
/// order).
pub fn state_to_wire(s: kr::RunState) -> i32 {
    kr::RunState::ALL
        .iter()
        .position(|x| *x == s)
        .map_or(0, |i| i as i32 + 1)
}

/// The run state a wire number names (`None`: unspecified or outside the list).
pub fn state_from_wire(n: i32) -> Option<kr::RunState> {
    usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| kr::RunState::ALL.get(i).copied())
}

fn artifact(field: &str, a: &Option<pb::RunArtifact>) -> R<Option<kr::Artifact>> {
    let Some(a) = a else { return Ok(None) };
    let digest = a.digest.as_ref().try_into().map_err(|_| {
        Error::invalid(
            format!("{field}.digest"),
            format!("must be 32 bytes, got {}", a.digest.len()),
        )
    })?;
    Ok(Some(kr::Artifact {
        digest,
        size: a.size,
    }))
}

fn ids(field: &str, list: &[prost::bytes::Bytes]) -> R<Vec<k::RecordId>> {
    list.iter()
        .enumerate()
        .map(|(i, b)| {
            opt_id(&format!("{field}[{i}]"), b)?
                .ok_or_else(|| Error::invalid(format!("{field}[{i}]"), "must be 32 bytes, got 0"))
        })
        .collect()
}

/// The run operation a wire operation holds, if it is a run record.
pub fn operation(op: &Op) -> R<Option<k::Operation>> {
    let (run, body) = match op {
        Op::RunStart(s) => {
            let initiator = if s.initiator.is_empty() {
                None
            } else {
                let (o, n) = crate::config::parse_party(&s.initiator)
                    .map_err(|r| Error::invalid(format!("{F}.run_start.initiator"), r))?;
                Some(k::Party::new(&o, &n))
            };
            (
                &s.run,
                kr::RunBody::Start(kr::RunStart {
                    trigger: s.trigger.clone(),
                    initiator,
                    parent: (!s.parent.is_empty()).then(|| s.parent.clone()),
                    persistence: s.persistence.clone(),
                    replay_confirmed: s.replay_confirmed,
                }),
            )
        }
        Op::RunTransition(t) => {
            let f = format!("{F}.run_transition");
            let to = state_from_wire(t.to).ok_or_else(|| {
                Error::invalid(
                    format!("{f}.to"),
                    format!("{} is not a run state (1..=14)", t.to),
                )
            })?;
            let c = t.context.clone().unwrap_or_default();
            (
                &t.run,
                kr::RunBody::Transition {
                    to,
                    context: kr::TransitionContext {
                        reason: c.reason.clone(),
                        proposal: opt_id(&format!("{f}.context.proposal"), &c.proposal)?,
                        evidence: ids(&format!("{f}.context.evidence"), &c.evidence)?,
                        metadata: c.metadata.into_iter().collect(),
                    },
                },
            )
        }
        Op::RunAction(a) => {
            let f = format!("{F}.run_action");
            (
                &a.run,
                kr::RunBody::Action(kr::Action {
                    tool: a.tool.clone(),
                    description: a.description.clone(),
                    idempotent: a.idempotent,
                    side_effect: a.side_effect,
                    approval_gated: a.approval_gated,
                    proposal: opt_id(&format!("{f}.proposal"), &a.proposal)?,
                    acts_on: opt_id(&format!("{f}.acts_on"), &a.acts_on)?,
                }),
            )
        }
        Op::RunProposal(p) => (
            &p.run,
            kr::RunBody::Proposal(kr::Proposal {
                summary: p.summary.clone(),
                action: opt_id(&format!("{F}.run_proposal.action"), &p.action)?,
            }),
        ),
        Op::RunDecision(d) => (
            &d.run,
            kr::RunBody::Decision(kr::Decision {
                proposal: opt_id(&format!("{F}.run_decision.proposal"), &d.proposal)?,
                verdict: match d.verdict {
                    0 => kr::Verdict::Unspecified,
                    1 => kr::Verdict::Approve,
                    2 => kr::Verdict::Reject,
                    n => {
                        return Err(Error::invalid(
                            format!("{F}.run_decision.verdict"),
                            format!("{n} is not a verdict"),
                        ));
                    }
                },
                reason: d.reason.clone(),
            }),
        ),
        Op::RunEvidence(e) => {
            let f = format!("{F}.run_evidence");
            let kind = match e.kind {
                0 => kr::EvidenceKind::Unspecified,
                n @ 1..=7 => kr::EvidenceKind::ALL[(n - 1) as usize],
                n => kr::EvidenceKind::Unknown(n),
            };
            (
                &e.run,
                kr::RunBody::Evidence(kr::Evidence {
                    kind,
                    action: opt_id(&format!("{f}.action"), &e.action)?,
                    supports: opt_id(&format!("{f}.supports"), &e.supports)?,
                    artifact: artifact(&format!("{f}.artifact"), &e.artifact)?,
                    description: e.description.clone(),
                }),
            )
        }
        Op::RunOutput(o) => {
            let f = format!("{F}.run_output");
            (
                &o.run,
                kr::RunBody::Output(kr::Output {
                    action: opt_id(&format!("{f}.action"), &o.action)?,
                    artifact: artifact(&format!("{f}.artifact"), &o.artifact)?,
                    summary: o.summary.clone(),
                }),
            )
        }
        Op::RunAuditEvent(a) => (
            &a.run,
            kr::RunBody::AuditEvent(kr::AuditEvent {
                kind: a.kind.clone(),
                detail: a.detail.clone(),
            }),
        ),
        _ => return Ok(None),
    };
    Ok(Some(k::Operation::Run(Box::new(kr::RunOperation {
        run: run.clone(),
        body,
    }))))
}

/// The run id of a wire run record (`None`: not a run record).
pub fn run_id(op: &Op) -> Option<&str> {
    Some(match op {
        Op::RunStart(s) => &s.run,
        Op::RunTransition(t) => &t.run,
        Op::RunAction(a) => &a.run,
        Op::RunProposal(p) => &p.run,
        Op::RunDecision(d) => &d.run,
        Op::RunEvidence(e) => &e.run,
        Op::RunOutput(o) => &o.run,
        Op::RunAuditEvent(a) => &a.run,
        _ => return None,
    })
}
