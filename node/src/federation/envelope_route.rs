//! Where a local envelope record goes (issue 13 item 3), for the federation router
//! ([`crate::federation::route`]): a record of an envelope goes to its coordinator's and every
//! participant's organisation — lifecycle records so participants stage, apply or clean up;
//! votes so every participant holds every answer the coordinator's prepared record names in its
//! basis (federation quarantines a record until its basis is in the ledger); a tick to the
//! organisations of the envelopes it lists (an abort on timeout names the tick); a record an
//! envelope staged (e.g. one half of a delegate) to every organisation of its envelope, so each
//! participant's copy of the commitment follows it (the old obligor's included).

use crate::projection::Projection;
use accord_proto::pb::envelope::v1 as epb;
use accord_proto::pb::record::v1::{Record, record::Operation};
use std::collections::BTreeSet;

/// The organisations `r` concerns (this one included; the router removes it and unknown peers).
pub fn destinations(
    projection: &std::sync::RwLock<Projection>,
    r: &Record,
    record_id: &[u8],
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ids: Vec<&str> = match &r.operation {
        Some(Operation::Envelope(e)) => {
            // The start names its participants itself (it may be routed before it is read).
            if let Some(epb::envelope_record::Step::Start(s)) = &e.step {
                out.extend(s.participants.iter().map(|p| p.participant.clone()));
            }
            vec![e.envelope.as_str()]
        }
        Some(Operation::Tick(_)) => {
            // Only the envelopes the tick's organisation coordinates: a following participant's
            // own ticks (which end its holds, issue 27) concern nobody else.
            let org = r.author.as_ref().map(|a| a.organisation.as_str());
            if let Ok(p) = projection.read() {
                for id in &r.items {
                    if let Some(env) = p.envelopes.get(id)
                        && Some(env.coordinator.organisation.as_str()) == org
                    {
                        out.insert(env.coordinator.organisation.clone());
                        out.extend(env.participants.iter().map(|x| x.participant.clone()));
                    }
                }
            }
            return out;
        }
        _ => {
            if let (Ok(p), Ok(id)) = (projection.read(), <[u8; 32]>::try_from(record_id))
                && let Some(env) = p.envelopes.staged_envelope(&id)
            {
                out.insert(env.coordinator.organisation.clone());
                out.extend(env.participants.iter().map(|x| x.participant.clone()));
            }
            return out;
        }
    };
    if let Ok(p) = projection.read() {
        for id in ids {
            if let Some(env) = p.envelopes.get(id) {
                out.insert(env.coordinator.organisation.clone());
                out.extend(env.participants.iter().map(|x| x.participant.clone()));
            }
        }
    }
    out
}
