//! `apply_envelope` and `apply_tick`: one envelope record (or one tick) against the envelope's
//! derived state, through the one table ([`ENVELOPE_TRANSITIONS`](super::ENVELOPE_TRANSITIONS)).
//! The order of the checks is fixed, so every rejection has one code:
//!
//! 1. the machine (`wrong_machine`) and the envelope id (`missing_field`);
//! 2. Access: `not_authorized`;
//! 3. existence: `envelope_exists` / `unknown_envelope`, `duplicate_record`; the start's type
//!    and participants (`unknown_envelope_type`, `missing_field`, `duplicate_participant`);
//! 4. the declared event name (`undeclared_event`);
//! 5. who: lifecycle events by the coordinator's organisation (`wrong_role`); a vote by a
//!    participant (`not_participant`) for itself (`wrong_role`), never changed (`vote_changed`);
//! 6. the table: `terminal_state` / `invalid_state`;
//! 7. the cause in `basis` (`missing_basis`): prepare names the start; a vote names the
//!    prepare; prepared names the ACK that completed the votes; commit names prepared; abort
//!    names the NACK or the tick that timed out.

use std::collections::BTreeMap;

use super::decl::EnvelopeType;
use super::record::{AbortCause, EnvelopeOperation, EnvelopeStep, ParticipantChanges, Tick, Vote};
use super::state::{Envelope, EnvelopeApplied, LogEntry};
use super::table::{EventKind, Guard, Lifecycle, Phase, lookup};
use crate::access::Access;
use crate::record::{Operation, Record, RecordId, hex_id};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};

/// Applies an envelope record at ledger time `now`. `types` are the declared envelope types
/// (only `envelope_start` reads them; the envelope keeps what it needs).
pub fn apply_envelope(
    state: Option<&Envelope>,
    types: &BTreeMap<String, EnvelopeType>,
    record: &Record,
    access: &Access,
    now: i64,
) -> Result<EnvelopeApplied, Rejection> {
    let Operation::Envelope(op) = &record.op else {
        return reject(
            C::WrongMachine,
            format!("{} is not an envelope record", record.op.wire_name()),
        );
    };
    let EnvelopeOperation {
        envelope: id,
        event,
        step,
    } = op.as_ref();
    ensure(
        !id.trim().is_empty(),
        C::MissingField,
        "an envelope record needs the envelope id",
    )?;
    authorized(record, access)?;
    if let EnvelopeStep::Start(start) = step {
        ensure(
            state.is_none(),
            C::EnvelopeExists,
            format!("envelope {id:?} exists"),
        )?;
        let Some(ty) = types.get(&start.envelope_type) else {
            return reject(
                C::UnknownEnvelopeType,
                format!("no envelope type {:?} is declared", start.envelope_type),
            );
        };
        check_participants(&start.participants)?;
        let env = Envelope::start(id, ty, start, record, now);
        let effects = vec![env.emit(Lifecycle::Prepare, record.id)];
        return Ok(EnvelopeApplied { next: env, effects });
    }
    let Some(env) = state.filter(|e| e.id == *id) else {
        return reject(C::UnknownEnvelope, format!("envelope {id:?} is unknown"));
    };
    ensure(
        !env.history.contains(&record.id),
        C::DuplicateRecord,
        hex_id(&record.id),
    )?;
    let kind = match step {
        EnvelopeStep::Start(_) => unreachable!("handled above"),
        EnvelopeStep::Prepare => EventKind::Prepare,
        EnvelopeStep::Prepared => EventKind::Prepared,
        EnvelopeStep::Commit => EventKind::Commit,
        EnvelopeStep::Abort { .. } => EventKind::Abort,
        EnvelopeStep::Vote {
            vote: Vote::Ack, ..
        } => EventKind::Ack,
        EnvelopeStep::Vote {
            vote: Vote::Nack, ..
        } => EventKind::Nack,
    };
    if let Some(l) = lifecycle_of(kind) {
        let declared = env.event_name(l);
        ensure(
            event == declared,
            C::UndeclaredEvent,
            format!("{} is declared as {declared:?}", step.wire_name()),
        )?;
        ensure(
            record.author.organisation == env.coordinator.organisation,
            C::WrongRole,
            format!(
                "lifecycle events of {id:?} are emitted by the coordinator {:?}",
                env.coordinator.organisation
            ),
        )?;
    }
    let mut next = env.clone();
    let mut effects = Vec::new();
    let guard_ok: Box<dyn Fn(Guard) -> bool> = match step {
        EnvelopeStep::Vote {
            participant, vote, ..
        } => {
            ensure(
                env.participants
                    .iter()
                    .any(|p| p.participant == *participant),
                C::NotParticipant,
                format!("{participant:?} is not a participant of {id:?}"),
            )?;
            ensure(
                record.author.organisation == *participant,
                C::WrongRole,
                format!("only {participant:?} answers for itself"),
            )?;
            let before = env.votes.get(participant).map(|(v, _)| *v);
            ensure(
                before.is_none_or(|b| b == *vote),
                C::VoteChanged,
                format!("{participant:?} already answered {before:?}"),
            )?;
            let same = before.is_some();
            let all = env.participants.iter().all(|p| {
                p.participant == *participant && *vote == Vote::Ack
                    || env.votes.get(&p.participant).map(|(v, _)| *v) == Some(Vote::Ack)
            });
            Box::new(move |g| match g {
                Guard::SameVote => same,
                Guard::AllAcked => !same && all,
                Guard::NotAllAcked => !same && !all,
                Guard::Late | Guard::Any => !same,
                _ => false,
            })
        }
        EnvelopeStep::Prepared => {
            let dup = env.prepared.is_some();
            Box::new(move |g| match g {
                Guard::First => !dup,
                Guard::Duplicate => dup,
                _ => false,
            })
        }
        EnvelopeStep::Commit => {
            let (prepared, dup) = (env.prepared.is_some(), env.commit.is_some());
            Box::new(move |g| match g {
                Guard::AfterPrepared => prepared && !dup,
                Guard::Duplicate => dup,
                _ => false,
            })
        }
        EnvelopeStep::Prepare => {
            let dup = env.prepare.is_some();
            Box::new(move |g| match g {
                Guard::Any => !dup,
                Guard::Duplicate => dup,
                _ => false,
            })
        }
        EnvelopeStep::Abort { .. } => {
            let dup = env.abort.is_some();
            Box::new(move |g| match g {
                Guard::Any => !dup,
                Guard::Duplicate => dup,
                _ => false,
            })
        }
        EnvelopeStep::Start(_) => unreachable!("handled above"),
    };
    let Some(row) = lookup(Some(env.phase), kind, guard_ok) else {
        return refuse(env.phase, step.wire_name());
    };
    // The cause each record must name (basis), so the causal order is checkable.
    let cause = match step {
        EnvelopeStep::Prepare => Some(env.start.record),
        EnvelopeStep::Vote { .. } => env.prepare,
        EnvelopeStep::Prepared => env.commit_trigger,
        EnvelopeStep::Commit => env.prepared,
        EnvelopeStep::Abort { .. } => env.abort_trigger,
        EnvelopeStep::Start(_) => None,
    };
    if let Some(cause) = cause {
        ensure(
            record.basis.contains(&cause),
            C::MissingBasis,
            format!("{} must name {} in basis", step.wire_name(), hex_id(&cause)),
        )?;
    }
    match step {
        EnvelopeStep::Prepare if row.to.is_some() => {
            next.prepare = Some(record.id);
            next.preparing_since = Some(now);
        }
        EnvelopeStep::Vote {
            participant, vote, ..
        } if row.guard != Guard::SameVote => {
            next.votes.insert(participant.clone(), (*vote, record.id));
            match row.emits {
                Some(Lifecycle::Prepared) => next.commit_trigger = Some(record.id),
                Some(Lifecycle::Abort) => {
                    next.abort_trigger = Some(record.id);
                    next.abort_cause = Some(AbortCause::Nack);
                }
                _ => {}
            }
        }
        EnvelopeStep::Prepared if row.to.is_some() && row.guard == Guard::First => {
            next.prepared = Some(record.id);
        }
        EnvelopeStep::Commit if row.guard == Guard::AfterPrepared => {
            next.commit = Some(record.id);
        }
        EnvelopeStep::Abort { .. } if row.guard == Guard::Any => next.abort = Some(record.id),
        _ => {}
    }
    finish(env, &mut next, record, kind, row.to, now);
    if let Some(l) = row.emits {
        effects.push(next.emit(l, record.id));
    }
    Ok(EnvelopeApplied { next, effects })
}

/// Applies one tick record to an open envelope: the timeout is checked here and only here,
/// against the tick's `instant_time` (seed 003, "Timeout").
pub fn apply_tick(
    env: &Envelope,
    record: &Record,
    access: &Access,
    now: i64,
) -> Result<EnvelopeApplied, Rejection> {
    let Operation::Tick(Tick { instant_time, .. }) = &record.op else {
        return reject(
            C::WrongMachine,
            format!("{} is not a tick", record.op.wire_name()),
        );
    };
    authorized(record, access)?;
    ensure(
        !env.history.contains(&record.id),
        C::DuplicateRecord,
        hex_id(&record.id),
    )?;
    let timed_out = env.timed_out(*instant_time);
    let Some(row) = lookup(Some(env.phase), EventKind::Tick, |g| match g {
        Guard::TimedOut => timed_out,
        Guard::NotTimedOut => !timed_out,
        Guard::Any => true,
        _ => false,
    }) else {
        return refuse(env.phase, "tick");
    };
    let mut next = env.clone();
    let mut effects = Vec::new();
    if row.emits == Some(Lifecycle::Abort) {
        next.abort_trigger = Some(record.id);
        next.abort_cause = Some(AbortCause::Timeout);
    }
    // A tick that changes nothing is not logged: ticks are many and carry no decision.
    if row.to.is_some_and(|to| to != env.phase) {
        finish(env, &mut next, record, EventKind::Tick, row.to, now);
    }
    if let Some(l) = row.emits {
        effects.push(next.emit(l, record.id));
    }
    Ok(EnvelopeApplied { next, effects })
}

fn authorized(record: &Record, access: &Access) -> Result<(), Rejection> {
    ensure(
        access.acts_for(&record.author),
        C::NotAuthorized,
        format!(
            "{} does not act for {:?}",
            record.author, record.author.organisation
        ),
    )
}

fn check_participants(ps: &[ParticipantChanges]) -> Result<(), Rejection> {
    ensure(
        !ps.is_empty(),
        C::MissingField,
        "an envelope needs participants",
    )?;
    let mut seen: Vec<&str> = Vec::new();
    for p in ps {
        ensure(
            !p.participant.trim().is_empty(),
            C::MissingField,
            "a participant needs its organisation",
        )?;
        ensure(
            !seen.contains(&p.participant.as_str()),
            C::DuplicateParticipant,
            format!("participant {:?} named twice", p.participant),
        )?;
        seen.push(&p.participant);
    }
    Ok(())
}

fn lifecycle_of(kind: EventKind) -> Option<Lifecycle> {
    match kind {
        EventKind::Prepare => Some(Lifecycle::Prepare),
        EventKind::Prepared => Some(Lifecycle::Prepared),
        EventKind::Commit => Some(Lifecycle::Commit),
        EventKind::Abort => Some(Lifecycle::Abort),
        _ => None,
    }
}

fn refuse<T>(phase: Phase, what: &str) -> Result<T, Rejection> {
    let code = if phase.is_terminal() {
        C::TerminalState
    } else {
        C::InvalidState
    };
    reject(code, format!("{what} is not allowed in {phase}"))
}

/// Logs the event, moves the phase, remembers the record.
fn finish(
    env: &Envelope,
    next: &mut Envelope,
    record: &Record,
    kind: EventKind,
    to: Option<Phase>,
    now: i64,
) {
    let to = to.unwrap_or(env.phase);
    next.phase = to;
    next.log.push(LogEntry {
        record: record.id,
        event: kind,
        from: env.phase,
        to,
        at: now,
    });
    next.history.push(record.id);
    next.updated_at = now;
}

/// The record ids a participant's copy must have before it may apply: its own ACK.
pub fn own_ack(env: &Envelope, participant: &str) -> Option<RecordId> {
    env.votes
        .get(participant)
        .filter(|(v, _)| *v == Vote::Ack)
        .map(|(_, r)| *r)
}
