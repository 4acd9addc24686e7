//! Envelope records, wire ↔ kernel (seed 003; `accord/envelope/v1/envelope_record.proto`). Part
//! of [`crate::convert`]: the same conventions (every error names its field, nothing large is
//! echoed back).

use crate::error::Error;
use accord_kernel as k;
use accord_kernel::envelope as ke;
use accord_proto::pb::envelope::v1 as epb;
use accord_proto::pb::record::v1::record::Operation as Op;

type R<T> = Result<T, Error>;
const F: &str = "record.payload.operation";

/// The kernel change a wire change names (`field` is where it sits, for errors).
pub fn change(field: &str, c: &epb::EnvelopeChange) -> R<ke::Change> {
    if c.kind == epb::ChangeKind::Record as i32 {
        return record_change(field, &c.signed_record);
    }
    crate::ident::id(&c.account).map_err(|r| Error::invalid(format!("{field}.account"), r))?;
    let account = c.account.clone();
    match epb::ChangeKind::try_from(c.kind) {
        Ok(epb::ChangeKind::Debit) => Ok(ke::Change::Debit {
            account,
            amount: c.amount,
        }),
        Ok(epb::ChangeKind::Credit) => Ok(ke::Change::Credit {
            account,
            amount: c.amount,
        }),
        _ => Err(Error::invalid(
            format!("{field}.kind"),
            "must be CHANGE_KIND_DEBIT, CHANGE_KIND_CREDIT or CHANGE_KIND_RECORD",
        )),
    }
}

/// The largest pre-signed record an envelope carries.
pub const MAX_SIGNED_RECORD: usize = 64 * 1024;

/// A `CHANGE_KIND_RECORD` change: the signed record decoded far enough to know its id and its
/// commitment (its signatures are checked by the participant whose party authored it).
fn record_change(field: &str, bytes: &[u8]) -> R<ke::Change> {
    use prost::Message;
    let f = format!("{field}.signed_record");
    if bytes.is_empty() || bytes.len() > MAX_SIGNED_RECORD {
        return Err(Error::invalid(f, "must hold 1 to 65536 bytes"));
    }
    let signed = accord_proto::pb::record::v1::SignedRecord::decode(bytes)
        .map_err(|_| Error::invalid(&f, "not an accord.record.v1.SignedRecord"))?;
    accord_proto::declaration::check_payload_type(&signed.payload_type)
        .map_err(|e| Error::invalid(format!("{f}.payload_type"), e))?;
    let record = accord_proto::pb::record::v1::Record::decode(signed.payload.as_ref())
        .map_err(|_| Error::invalid(format!("{f}.payload"), "not an accord.record.v1.Record"))?;
    accord_proto::declaration::check_matches(&signed.payload_type, &record)
        .map_err(|e| Error::invalid(format!("{f}.payload_type"), e))?;
    crate::ident::id(&record.commitment_id)
        .map_err(|r| Error::invalid(format!("{f}.payload.commitment_id"), r))?;
    Ok(ke::Change::Record {
        commitment: record.commitment_id,
        record: accord_proto::signing::record_id(&signed.payload_type, &signed.payload),
        signed: bytes.to_vec(),
    })
}

/// The kernel participants the wire participants name.
pub fn participants(
    field: &str,
    ps: &[epb::EnvelopeParticipant],
) -> R<Vec<ke::ParticipantChanges>> {
    ps.iter()
        .enumerate()
        .map(|(i, p)| {
            let f = format!("{field}[{i}]");
            crate::ident::id(&p.participant)
                .map_err(|r| Error::invalid(format!("{f}.participant"), r))?;
            let changes = p
                .changes
                .iter()
                .enumerate()
                .map(|(j, c)| change(&format!("{f}.changes[{j}]"), c))
                .collect::<R<Vec<_>>>()?;
            Ok(ke::ParticipantChanges {
                participant: p.participant.clone(),
                changes,
            })
        })
        .collect()
}

/// The wire form of a change.
pub fn change_to_pb(c: &ke::Change) -> epb::EnvelopeChange {
    let (kind, account, amount) = match c {
        ke::Change::Debit { account, amount } => (epb::ChangeKind::Debit, account, amount),
        ke::Change::Credit { account, amount } => (epb::ChangeKind::Credit, account, amount),
        ke::Change::Record {
            commitment, signed, ..
        } => {
            return epb::EnvelopeChange {
                kind: epb::ChangeKind::Record as i32,
                account: commitment.clone(),
                amount: 0,
                signed_record: signed.clone().into(),
            };
        }
    };
    epb::EnvelopeChange {
        kind: kind as i32,
        account: account.clone(),
        amount: *amount,
        signed_record: Default::default(),
    }
}

/// The wire form of participants.
pub fn participants_to_pb(ps: &[ke::ParticipantChanges]) -> Vec<epb::EnvelopeParticipant> {
    ps.iter()
        .map(|p| epb::EnvelopeParticipant {
            participant: p.participant.clone(),
            changes: p.changes.iter().map(change_to_pb).collect(),
        })
        .collect()
}

/// The kernel operation of a wire envelope record or tick, if `op` is one.
pub fn operation(op: &Op) -> R<Option<k::Operation>> {
    Ok(Some(match op {
        Op::Envelope(e) => {
            let f = format!("{F}.envelope");
            crate::ident::id(&e.envelope)
                .map_err(|r| Error::invalid(format!("{f}.envelope"), r))?;
            if e.event.len() > 128 {
                return Err(Error::invalid(
                    format!("{f}.event"),
                    "longer than 128 bytes",
                ));
            }
            let step = match &e.step {
                Some(epb::envelope_record::Step::Start(s)) => {
                    crate::ident::id(&s.envelope_type)
                        .map_err(|r| Error::invalid(format!("{f}.start.envelope_type"), r))?;
                    ke::EnvelopeStep::Start(ke::EnvelopeStart {
                        envelope_type: s.envelope_type.clone(),
                        participants: participants(
                            &format!("{f}.start.participants"),
                            &s.participants,
                        )?,
                    })
                }
                Some(epb::envelope_record::Step::Prepare(_)) => ke::EnvelopeStep::Prepare,
                Some(epb::envelope_record::Step::Vote(v)) => {
                    crate::ident::id(&v.participant)
                        .map_err(|r| Error::invalid(format!("{f}.vote.participant"), r))?;
                    let vote = match epb::Vote::try_from(v.vote) {
                        Ok(epb::Vote::Ack) => ke::Vote::Ack,
                        Ok(epb::Vote::Nack) => ke::Vote::Nack,
                        _ => {
                            return Err(Error::invalid(
                                format!("{f}.vote.vote"),
                                "must be VOTE_ACK or VOTE_NACK",
                            ));
                        }
                    };
                    ke::EnvelopeStep::Vote {
                        participant: v.participant.clone(),
                        vote,
                        reason: v.reason.chars().take(256).collect(),
                    }
                }
                Some(epb::envelope_record::Step::Prepared(_)) => ke::EnvelopeStep::Prepared,
                Some(epb::envelope_record::Step::Commit(_)) => ke::EnvelopeStep::Commit,
                Some(epb::envelope_record::Step::Abort(a)) => {
                    let cause = match epb::AbortCause::try_from(a.cause) {
                        Ok(epb::AbortCause::Nack) => ke::AbortCause::Nack,
                        Ok(epb::AbortCause::Timeout) => ke::AbortCause::Timeout,
                        _ => {
                            return Err(Error::invalid(
                                format!("{f}.abort.cause"),
                                "must be ABORT_CAUSE_NACK or ABORT_CAUSE_TIMEOUT",
                            ));
                        }
                    };
                    ke::EnvelopeStep::Abort { cause }
                }
                None => return Err(Error::invalid(format!("{f}.step"), "missing")),
            };
            k::Operation::Envelope(Box::new(ke::EnvelopeOperation {
                envelope: e.envelope.clone(),
                event: e.event.clone(),
                step,
            }))
        }
        Op::Tick(t) => {
            crate::ident::id(&t.tick_id)
                .map_err(|r| Error::invalid(format!("{F}.tick.tick_id"), r))?;
            k::Operation::Tick(ke::Tick {
                tick_id: t.tick_id.clone(),
                instant_time: t.instant_time,
            })
        }
        _ => return Ok(None),
    }))
}

/// The wire step of a kernel step.
pub fn step_to_pb(s: &ke::EnvelopeStep) -> epb::envelope_record::Step {
    use epb::envelope_record::Step as S;
    match s {
        ke::EnvelopeStep::Start(st) => S::Start(epb::EnvelopeStart {
            envelope_type: st.envelope_type.clone(),
            participants: participants_to_pb(&st.participants),
        }),
        ke::EnvelopeStep::Prepare => S::Prepare(epb::EnvelopePrepare {}),
        ke::EnvelopeStep::Vote {
            participant,
            vote,
            reason,
        } => S::Vote(epb::EnvelopeVote {
            participant: participant.clone(),
            vote: match vote {
                ke::Vote::Ack => epb::Vote::Ack,
                ke::Vote::Nack => epb::Vote::Nack,
            } as i32,
            reason: reason.clone(),
        }),
        ke::EnvelopeStep::Prepared => S::Prepared(epb::EnvelopePrepared {}),
        ke::EnvelopeStep::Commit => S::Commit(epb::EnvelopeCommit {}),
        ke::EnvelopeStep::Abort { cause } => S::Abort(epb::EnvelopeAbort {
            cause: match cause {
                ke::AbortCause::Nack => epb::AbortCause::Nack,
                ke::AbortCause::Timeout => epb::AbortCause::Timeout,
            } as i32,
        }),
    }
}

/// The wire operation of a kernel envelope operation.
pub fn envelope_op(e: &ke::EnvelopeOperation) -> Op {
    Op::Envelope(epb::EnvelopeRecord {
        envelope: e.envelope.clone(),
        event: e.event.clone(),
        step: Some(step_to_pb(&e.step)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_round_trips_and_bad_input_names_its_field() {
        let steps = [
            ke::EnvelopeStep::Start(ke::EnvelopeStart {
                envelope_type: "budget_transfer".into(),
                participants: vec![ke::ParticipantChanges {
                    participant: "acme".into(),
                    changes: vec![
                        ke::Change::Debit {
                            account: "c-1".into(),
                            amount: 5,
                        },
                        ke::Change::Credit {
                            account: "c-2".into(),
                            amount: 7,
                        },
                    ],
                }],
            }),
            ke::EnvelopeStep::Prepare,
            ke::EnvelopeStep::Vote {
                participant: "acme".into(),
                vote: ke::Vote::Nack,
                reason: "no".into(),
            },
            ke::EnvelopeStep::Prepared,
            ke::EnvelopeStep::Commit,
            ke::EnvelopeStep::Abort {
                cause: ke::AbortCause::Timeout,
            },
        ];
        for step in steps {
            let e = ke::EnvelopeOperation {
                envelope: "e-1".into(),
                event: "X".into(),
                step,
            };
            let back = operation(&envelope_op(&e)).unwrap().unwrap();
            assert_eq!(back, k::Operation::Envelope(Box::new(e)));
        }
        let bad = Op::Envelope(epb::EnvelopeRecord {
            envelope: "e-1".into(),
            event: String::new(),
            step: Some(epb::envelope_record::Step::Vote(epb::EnvelopeVote {
                participant: "acme".into(),
                vote: 0,
                reason: String::new(),
            })),
        });
        let e = operation(&bad).unwrap_err().to_string();
        assert!(
            e.contains("record.payload.operation.envelope.vote.vote"),
            "{e}"
        );
        let empty = Op::Envelope(epb::EnvelopeRecord::default());
        let e = operation(&empty).unwrap_err().to_string();
        assert!(e.contains("operation.envelope.envelope"), "{e}");
    }
}
