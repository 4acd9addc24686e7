//! The participant's side of an envelope another organisation coordinates (issue 13 item 3):
//! the envelope here follows the coordinator's records and never decides. The arrows are the
//! coordinator's table seen from a participant, where ABORTING is never observed (the abort
//! record carries the decision): start → PENDING, prepare → PREPARING, prepared → COMMITTING,
//! commit → COMMITTED, abort → ABORTED; a duplicate stays; anything else is refused like the
//! kernel refuses it (`terminal_state` / `invalid_state`, `wrong_role`, `vote_changed`).

use super::{Envelopes, event_name};
use accord_kernel as k;
use accord_kernel::envelope::{self as ke, EventKind, Phase};
use k::RejectionCode as C;

fn no(code: C, detail: impl Into<String>) -> Result<(), k::Rejection> {
    Err(k::Rejection::new(code, detail))
}

fn refuse(phase: Phase, what: &str) -> Result<(), k::Rejection> {
    let code = if phase.is_terminal() {
        C::TerminalState
    } else {
        C::InvalidState
    };
    no(code, format!("{what} is not allowed in {phase}"))
}

impl Envelopes {
    pub(super) fn follow(
        &mut self,
        record: &k::Record,
        op: &ke::EnvelopeOperation,
        access: &k::Access,
        now: i64,
        budget: &dyn Fn(&str, &k::Party) -> Option<u64>,
    ) -> Result<(), k::Rejection> {
        if !access.acts_for(&record.author) {
            return no(
                C::NotAuthorized,
                format!("{} does not act for its organisation", record.author),
            );
        }
        let id = &op.envelope;
        if let ke::EnvelopeStep::Start(start) = &op.step {
            if self.envelopes.contains_key(id) {
                return no(C::EnvelopeExists, format!("envelope {id:?} exists"));
            }
            if !start.participants.iter().any(|p| p.participant == self.org) {
                return no(
                    C::NotParticipant,
                    format!("{:?} is not a participant of {id:?}", self.org),
                );
            }
            let env = ke::Envelope {
                id: id.clone(),
                envelope_type: start.envelope_type.clone(),
                coordinator: record.author.clone(),
                participants: start.participants.clone(),
                lifecycle: ke::LifecycleEvents::default(),
                // This node's own declaration of the type bounds its holds (issue 27).
                abort_after_ms: self.types.get(&start.envelope_type).map_or(
                    super::DEFAULT_ABORT_AFTER_MS,
                    ke::EnvelopeType::abort_after_ms,
                ),
                phase: Phase::Pending,
                start: ke::StartEntry {
                    record: record.id,
                    at: now,
                },
                prepare: None,
                preparing_since: None,
                votes: Default::default(),
                commit_trigger: None,
                prepared: None,
                commit: None,
                abort_trigger: None,
                abort_cause: None,
                abort: None,
                log: Vec::new(),
                history: vec![record.id],
                updated_at: now,
            };
            self.envelopes.insert(id.clone(), env);
            self.log(id, record, now, event_name(op));
            return Ok(());
        }
        let Some(env) = self.envelopes.get(id) else {
            return no(C::UnknownEnvelope, format!("envelope {id:?} is unknown"));
        };
        if env.history.contains(&record.id) {
            return no(C::DuplicateRecord, "the record was applied already");
        }
        let lifecycle = !matches!(op.step, ke::EnvelopeStep::Vote { .. });
        if lifecycle && record.author.organisation != env.coordinator.organisation {
            return no(
                C::WrongRole,
                format!(
                    "lifecycle events of {id:?} are emitted by the coordinator {:?}",
                    env.coordinator.organisation
                ),
            );
        }
        let mut next = env.clone();
        let from = env.phase;
        let (kind, to) = match &op.step {
            ke::EnvelopeStep::Start(_) => unreachable!("handled above"),
            ke::EnvelopeStep::Prepare => {
                next.lifecycle.prepare_event = op.event.clone();
                match from {
                    Phase::Pending => {
                        next.prepare = Some(record.id);
                        next.preparing_since = Some(now);
                        (EventKind::Prepare, Phase::Preparing)
                    }
                    _ => (EventKind::Prepare, from),
                }
            }
            ke::EnvelopeStep::Vote {
                participant, vote, ..
            } => {
                if !env
                    .participants
                    .iter()
                    .any(|p| p.participant == *participant)
                {
                    return no(
                        C::NotParticipant,
                        format!("{participant:?} is not a participant of {id:?}"),
                    );
                }
                if record.author.organisation != *participant {
                    return no(
                        C::WrongRole,
                        format!("only {participant:?} answers for itself"),
                    );
                }
                match env.votes.get(participant) {
                    Some((v, _)) if v != vote => {
                        return no(C::VoteChanged, format!("{participant:?} already answered"));
                    }
                    Some(_) => {}
                    None => {
                        next.votes.insert(participant.clone(), (*vote, record.id));
                    }
                }
                let kind = match vote {
                    ke::Vote::Ack => EventKind::Ack,
                    ke::Vote::Nack => EventKind::Nack,
                };
                (kind, from)
            }
            ke::EnvelopeStep::Prepared => {
                next.lifecycle.prepared_event = op.event.clone();
                match from {
                    Phase::Preparing => {
                        next.prepared = Some(record.id);
                        (EventKind::Prepared, Phase::Committing)
                    }
                    Phase::Committing | Phase::Committed => (EventKind::Prepared, from),
                    _ => return refuse(from, "envelope_prepared"),
                }
            }
            ke::EnvelopeStep::Commit => {
                next.lifecycle.commit_event = op.event.clone();
                match from {
                    Phase::Committing => {
                        next.commit = Some(record.id);
                        (EventKind::Commit, Phase::Committed)
                    }
                    Phase::Committed => (EventKind::Commit, from),
                    _ => return refuse(from, "envelope_commit"),
                }
            }
            ke::EnvelopeStep::Abort { cause } => {
                next.lifecycle.abort_event = op.event.clone();
                match from {
                    Phase::Pending | Phase::Preparing => {
                        next.abort = Some(record.id);
                        next.abort_cause = Some(*cause);
                        next.abort_trigger = record.basis.first().copied();
                        (EventKind::Abort, Phase::Aborted)
                    }
                    Phase::Aborted => (EventKind::Abort, from),
                    _ => return refuse(from, "envelope_abort"),
                }
            }
        };
        if to != from || matches!(op.step, ke::EnvelopeStep::Vote { .. }) {
            self.participate(&next, record, op, access, budget)?;
        }
        next.phase = to;
        next.log.push(ke::LogEntry {
            record: record.id,
            event: kind,
            from,
            to,
            at: now,
        });
        next.history.push(record.id);
        next.updated_at = now;
        self.envelopes.insert(id.clone(), next);
        self.log(id, record, now, event_name(op));
        Ok(())
    }
}
