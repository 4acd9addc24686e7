//! `ListAttention` and `WatchAttention` (issue 11, item 7: kernel `Notify` effects reach the
//! parties). The lists are derived state of the projection ([`crate::projection::Attention`]),
//! persisted with the records that raise them and paged from RocksDB (`pj_attention`, keyed by
//! party and sequence), so they survive a restart. A party reads only its own list; the
//! operator reads any party's.

use super::commitments::{page_size, parse_token, token_of};
use crate::auth::Caller;
use crate::convert::party_to_pb;
use crate::error::Error;
use crate::node::Node;
use crate::projection::Attention;
use accord_kernel as k;
use accord_proto::pb::record::v1::PartyRef;
use accord_proto::pb::work::v1 as pb;
use std::sync::Arc;

/// Whose list `caller` asks for: a party its own (empty = itself), the operator a named party.
pub fn whose(node: &Node, caller: &Caller, asked: &Option<PartyRef>) -> Result<k::Party, Error> {
    let asked = asked
        .as_ref()
        .filter(|p| !(p.organisation.is_empty() && p.name.is_empty()));
    if let Some(p) = asked {
        crate::ident::name(&p.organisation).map_err(|r| Error::invalid("party.organisation", r))?;
        crate::ident::name(&p.name).map_err(|r| Error::invalid("party.name", r))?;
    }
    match (caller, asked) {
        (Caller::Operator, Some(p)) => Ok(k::Party::new(&p.organisation, &p.name)),
        (Caller::Operator, None) => Err(Error::invalid(
            "party",
            "required: the operator names whose attention list to read",
        )),
        (Caller::Party(me), asked) => {
            let me = k::Party::new(node.name(), me.as_str());
            match asked {
                Some(p) if p.organisation != me.organisation || p.name != me.name => {
                    Err(Error::PermissionDenied(
                        "party: a party reads only its own attention list".into(),
                    ))
                }
                _ => Ok(me),
            }
        }
    }
}

/// The wire form of one notification for `to`.
pub fn to_pb(a: &Attention, to: &k::Party) -> pb::AttentionItem {
    let (about, detail) = match &a.about {
        k::Notification::Notice { notice_type, text } => (
            "notice",
            format!(
                "{}: {text}",
                notice_type.wire_name().unwrap_or("unspecified")
            ),
        ),
        k::Notification::AdministrativelyClosed { reason } => {
            ("administratively_closed", reason.clone())
        }
        k::Notification::RevokeRequested { kind } => {
            ("revoke_requested", kind.wire_name().to_string())
        }
        k::Notification::DisputeMarked { disputed } => ("dispute_marked", hex::encode(disputed)),
        k::Notification::StopRequested { mode } => (
            "stop_requested",
            mode.wire_name().unwrap_or("unspecified").to_string(),
        ),
        k::Notification::StopRefused { reason } => ("stop_refused", reason.clone()),
        k::Notification::ControlTaken { holder } => ("control_taken", holder.to_string()),
        k::Notification::RecordRejected { code } => ("record_rejected", code.clone()),
    };
    pb::AttentionItem {
        sequence: a.sequence,
        commitment_id: a.commitment.clone(),
        record_id: a.record.to_vec().into(),
        from: Some(party_to_pb(&a.from)),
        to: Some(party_to_pb(to)),
        at_unix_ms: a.at,
        about: about.to_string(),
        detail,
    }
}

fn read(
    node: &Node,
    who: &k::Party,
    after: Option<u64>,
    max: usize,
) -> Result<Vec<pb::AttentionItem>, Error> {
    let p = node
        .projection
        .read()
        .map_err(|_| Error::Internal("projection lock poisoned".into()))?;
    Ok(p.attention(who, after, max)
        .iter()
        .map(|a| to_pb(a, who))
        .collect())
}

/// One page of `ListAttention`.
pub fn page(
    node: &Node,
    caller: &Caller,
    req: &pb::ListAttentionRequest,
) -> Result<pb::ListAttentionResponse, Error> {
    let who = whose(node, caller, &req.party)?;
    let after = match parse_token("page_token", &req.page_token)? {
        t if t.is_empty() => None,
        t => Some(
            t.parse::<u64>()
                .map_err(|_| Error::invalid("page_token", "not a page token this node issued"))?,
        ),
    };
    let size = page_size(req.page_size);
    let items = read(node, &who, after, size)?;
    let next_page_token = match items.last() {
        Some(l) if items.len() == size => token_of(&l.sequence.to_string()),
        _ => String::new(),
    };
    Ok(pb::ListAttentionResponse {
        items,
        next_page_token,
    })
}

/// Notifications read per step of `WatchAttention`: the most a slow client's stream holds in
/// memory besides its channel.
const WATCH_CHUNK: usize = 64;

/// The loop of `WatchAttention`: what is there from `from_sequence`, then each new notification
/// once the ledger has published its record. Ends when the client goes away.
///
/// Unlike `WatchCommitments` it keeps no pending set: the list is stored (`pj_attention`), so
/// the watch reads it from where its client is, one chunk at a time, only as the client takes
/// what was read. A slow client is behind in the stored list, never in memory (at most one
/// chunk), loses nothing and needs no `watch_lagged`; the writer never waits on it (the ledger
/// length is a `watch` channel, which keeps only the latest value).
pub async fn watch(
    node: Arc<Node>,
    who: k::Party,
    from_sequence: u64,
    tx: tokio::sync::mpsc::Sender<Result<pb::AttentionItem, tonic::Status>>,
) {
    let mut len = node.ledger.watch_len();
    let mut after = from_sequence.checked_sub(1);
    loop {
        let items = match read(&node, &who, after, WATCH_CHUNK) {
            Ok(i) => i,
            Err(e) => {
                let _ = tx.send(Err(e.into())).await;
                return;
            }
        };
        let more = items.len() == WATCH_CHUNK;
        for i in items {
            after = Some(i.sequence);
            if tx.send(Ok(i)).await.is_err() {
                return;
            }
        }
        if more {
            continue;
        }
        tokio::select! {
            _ = tx.closed() => return,
            r = len.changed() => if r.is_err() { return },
        }
    }
}
