//! What the envelopes owe (issue 13): each coordinated envelope's next lifecycle record and
//! this organisation's vote, derived from the published envelope state alone — never
//! remembered, so a node that crashed between two records owes the same after replay. The
//! node's envelope driver (`crate::envelope_driver`) writes them.

use super::Envelopes;
use accord_kernel::envelope::{self as ke, Phase};
use accord_proto::signing::RecordId;

/// One record an envelope owes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owed {
    /// The record's operation.
    pub op: ke::EnvelopeOperation,
    /// Its basis (the cause first).
    pub basis: Vec<RecordId>,
}

/// Validates an envelope's staged records against this node's state (`staged.rs`): `Err` is
/// the NACK's reason.
pub type Validate<'a> = &'a dyn Fn(&ke::Envelope) -> Result<(), String>;

/// What `envs` owes now: each coordinated envelope's next lifecycle record, and this
/// organisation's vote on every envelope it stages for and has not answered in its ledger. The
/// vote on an envelope carrying records is the book's answer and `validate`'s.
pub fn owed(envs: &Envelopes, validate: Validate<'_>) -> Vec<Owed> {
    let org = envs.org();
    let mut out = Vec::new();
    // Only the open envelopes: a terminal one owes nothing (review: O(open), not O(history)).
    for env in envs.open() {
        if envs.coordinates(env)
            && let Some(ke::EnvelopeEffect::Emit {
                envelope,
                event,
                step,
                basis,
                ..
            }) = env.due()
        {
            let mut all = vec![basis];
            if step == ke::EnvelopeStep::Prepared {
                // Every ACK, not only the completing one, so a participant admits prepared only
                // once it holds every answer (federation quarantines a record until its basis is
                // in the ledger) and follows the coordinator to COMMITTING.
                for (v, r) in env.votes.values() {
                    if *v == ke::Vote::Ack && !all.contains(r) {
                        all.push(*r);
                    }
                }
            }
            if matches!(step, ke::EnvelopeStep::Abort { .. })
                && let Some(p) = env.prepare
                && !all.contains(&p)
            {
                // The prepare too (which names the start): a participant admits the abort only
                // once it knows the envelope, whatever the order of delivery.
                all.push(p);
            }
            out.push(Owed {
                op: ke::EnvelopeOperation {
                    envelope,
                    event,
                    step,
                },
                basis: all,
            });
        }
        if env.phase == Phase::Preparing
            && envs.own_vote(&env.id).is_none()
            && let (Some(vote), Some(prepare)) = (envs.book().votes.get(&env.id), env.prepare)
        {
            let (vote, reason) = match vote {
                // Not known, or not the author's to change: one answer (issue 27).
                ke::Vote::Nack if envs.declined(&env.id) => {
                    (ke::Vote::Nack, super::NACK_NOT_FOUND.to_string())
                }
                // The author may change every account: it may read them, so the reason is told
                // (the book's: `insufficient_budget`, `no_rule`, `unknown_envelope_type`).
                ke::Vote::Nack => (
                    ke::Vote::Nack,
                    envs.book()
                        .reasons
                        .get(&env.id)
                        .cloned()
                        .unwrap_or_else(|| {
                            "insufficient_budget: a debit exceeds what the account has available"
                                .to_string()
                        }),
                ),
                ke::Vote::Ack if super::records(env).next().is_some() => match validate(env) {
                    Ok(()) => (ke::Vote::Ack, String::new()),
                    Err(e) => (ke::Vote::Nack, e.chars().take(256).collect()),
                },
                ke::Vote::Ack => (ke::Vote::Ack, String::new()),
            };
            out.push(Owed {
                op: ke::EnvelopeOperation {
                    envelope: env.id.clone(),
                    event: String::new(),
                    step: ke::EnvelopeStep::Vote {
                        participant: org.to_string(),
                        vote,
                        reason,
                    },
                },
                basis: vec![prepare],
            });
        }
    }
    out
}
