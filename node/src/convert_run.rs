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

/// Longest free text of a run record (trigger, reason, description, summary, detail), bytes
/// (issue 27: a run's text stays in its derived state, which is stored and cached; 150 runs of
/// 900 KB triggers once took a node from 75 to 444 MiB).
pub const MAX_RUN_TEXT: usize = 4096;
/// Longest label of a run record (persistence mode, tool, audit event kind, a metadata key),
/// bytes.
pub const MAX_RUN_LABEL: usize = 256;
/// Most metadata entries of a transition's context.
pub const MAX_RUN_METADATA: usize = 32;
/// Longest metadata value, bytes.
pub const MAX_RUN_METADATA_VALUE: usize = 1024;
/// Most record references in one list (a transition's evidence).
pub const MAX_RUN_REFS: usize = 256;

/// Checks a text field's length; the field is named in full, the value quoted (cut) only.
fn text(field: &dyn Fn() -> String, v: &str, max: usize) -> R<()> {
    if v.len() > max {
        return Err(Error::invalid(
            field(),
            format!("{}: longer than {max} bytes", crate::ident::quote(v)),
        ));
    }
    Ok(())
}

/// The input bounds of a run record (README "Limits": run records), checked at the edge
/// (`convert::check_idents`: `Submit`, `Declare`, the RunService, federation) and not at
/// replay, so records recorded before a bound existed still replay. Ok for any other record.
pub fn check_bounds(op: &Op) -> R<()> {
    let f = |s: &'static str| move || format!("{F}.{s}");
    // An empty run id is the kernel's `missing_field`, recorded like any rejection.
    let run = |name: &'static str, id: &str| -> R<()> {
        if id.is_empty() {
            return Ok(());
        }
        crate::ident::id(id).map_err(|r| Error::invalid(format!("{F}.{name}.run"), r))
    };
    match op {
        Op::RunStart(s) => {
            run("run_start", &s.run)?;
            if !s.parent.is_empty() {
                crate::ident::id(&s.parent)
                    .map_err(|r| Error::invalid(format!("{F}.run_start.parent"), r))?;
            }
            text(&f("run_start.trigger"), &s.trigger, MAX_RUN_TEXT)?;
            text(&f("run_start.persistence"), &s.persistence, MAX_RUN_LABEL)?;
        }
        Op::RunTransition(t) => {
            run("run_transition", &t.run)?;
            if let Some(c) = &t.context {
                text(&f("run_transition.context.reason"), &c.reason, MAX_RUN_TEXT)?;
                if c.evidence.len() > MAX_RUN_REFS {
                    return Err(Error::invalid(
                        f("run_transition.context.evidence")(),
                        format!("{} references: at most {MAX_RUN_REFS}", c.evidence.len()),
                    ));
                }
                if c.metadata.len() > MAX_RUN_METADATA {
                    return Err(Error::invalid(
                        f("run_transition.context.metadata")(),
                        format!("{} entries: at most {MAX_RUN_METADATA}", c.metadata.len()),
                    ));
                }
                for (k, v) in &c.metadata {
                    let field = || {
                        format!(
                            "{F}.run_transition.context.metadata[{}]",
                            crate::ident::quote(k)
                        )
                    };
                    text(&field, k, MAX_RUN_LABEL)?;
                    text(&field, v, MAX_RUN_METADATA_VALUE)?;
                }
            }
        }
        Op::RunAction(a) => {
            run("run_action", &a.run)?;
            text(&f("run_action.tool"), &a.tool, MAX_RUN_LABEL)?;
            text(&f("run_action.description"), &a.description, MAX_RUN_TEXT)?;
        }
        Op::RunProposal(p) => {
            run("run_proposal", &p.run)?;
            text(&f("run_proposal.summary"), &p.summary, MAX_RUN_TEXT)?;
        }
        Op::RunDecision(d) => {
            run("run_decision", &d.run)?;
            text(&f("run_decision.reason"), &d.reason, MAX_RUN_TEXT)?;
        }
        Op::RunEvidence(e) => {
            run("run_evidence", &e.run)?;
            text(&f("run_evidence.description"), &e.description, MAX_RUN_TEXT)?;
        }
        Op::RunOutput(o) => {
            run("run_output", &o.run)?;
            text(&f("run_output.summary"), &o.summary, MAX_RUN_TEXT)?;
        }
        Op::RunAuditEvent(a) => {
            run("run_audit_event", &a.run)?;
            text(&f("run_audit_event.kind"), &a.kind, MAX_RUN_LABEL)?;
            text(&f("run_audit_event.detail"), &a.detail, MAX_RUN_TEXT)?;
        }
        _ => {}
    }
    Ok(())
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
            if s.heartbeat_interval_ms < 0 {
                return Err(Error::invalid(
                    format!("{F}.run_start.heartbeat_interval_ms"),
                    "must be positive, or 0 for the default (one hour)",
                ));
            }
            (
                &s.run,
                kr::RunBody::Start(kr::RunStart {
                    trigger: s.trigger.clone(),
                    initiator,
                    parent: (!s.parent.is_empty()).then(|| s.parent.clone()),
                    persistence: s.persistence.clone(),
                    replay_confirmed: s.replay_confirmed,
                    heartbeat_interval_ms: (s.heartbeat_interval_ms > 0)
                        .then_some(s.heartbeat_interval_ms),
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
