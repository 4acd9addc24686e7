//! The `ListRecords` stream, pull-based (issue 8, "Bounded resources"): a chunk is read from
//! RocksDB only when the client has taken the previous one — tonic polls the stream only when
//! HTTP/2 flow control lets it send — so an unread stream holds at most one small chunk, and no
//! task reads ahead. Each stream holds a permit of the node-wide `limits.list_streams`
//! semaphore until it ends or the client goes away.

use super::visibility::Visibility;
use crate::auth::Caller;
use crate::error::Error;
use crate::node::Node;
use accord_proto::pb::work::v1::LedgerEntry;
use prost::Message;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;
use tonic::Status;

/// Most entries one chunk holds.
const CHUNK_ENTRIES: usize = 32;
/// A chunk stops growing once its entries reach this many encoded bytes.
const CHUNK_BYTES: usize = 16 * 1024;
/// Most entries one read step looks at (a party's filtered stream may skip many).
const SCAN: u64 = 1024;

/// One open `ListRecords` call.
pub struct Listing {
    /// The node.
    pub node: Arc<Node>,
    /// What the caller may read.
    pub rules: Arc<Visibility>,
    /// Who is reading.
    pub caller: Caller,
    /// The next sequence to look at.
    pub next: u64,
    /// One past the last sequence to look at (the ledger's length when the call began).
    pub end: u64,
    /// Entries still to send (the request's `limit`; `u64::MAX` for none).
    pub remaining: u64,
    /// The chunk read and not sent yet.
    pub buf: VecDeque<LedgerEntry>,
    /// The stream's share of `limits.list_streams`, released when the stream is dropped.
    pub _permit: OwnedSemaphorePermit,
}

/// Reads the visible entries of `[from, end)`, stopping at [`CHUNK_ENTRIES`], [`CHUNK_BYTES`]
/// or after [`SCAN`] entries looked at; returns them and the next sequence to look at.
fn read_chunk(
    node: &Node,
    rules: &Visibility,
    caller: &Caller,
    from: u64,
    end: u64,
) -> Result<(Vec<LedgerEntry>, u64), Error> {
    let filter = rules.filter(node, caller)?;
    let store = node.ledger.store();
    let (mut out, mut bytes, mut seq) = (Vec::new(), 0usize, from);
    while seq < end && seq - from < SCAN && out.len() < CHUNK_ENTRIES && bytes < CHUNK_BYTES {
        let Some(e) = store.get(seq)? else {
            // The ledger is contiguous up to its length; nothing more to read.
            return Ok((out, end));
        };
        seq += 1;
        if filter.as_ref().is_none_or(|f| f.allows(&e)) {
            bytes += e.encoded_len();
            out.push(e);
        }
    }
    Ok((out, seq))
}

impl Listing {
    /// The entries as a stream that reads a chunk only when it is polled with nothing buffered.
    pub fn into_stream(self) -> impl futures::Stream<Item = Result<LedgerEntry, Status>> + Send {
        futures::stream::try_unfold(self, |mut l| async move {
            loop {
                if l.remaining == 0 {
                    return Ok(None);
                }
                if let Some(e) = l.buf.pop_front() {
                    l.remaining -= 1;
                    return Ok(Some((e, l)));
                }
                if l.next >= l.end {
                    return Ok(None);
                }
                let (node, rules, caller) = (l.node.clone(), l.rules.clone(), l.caller.clone());
                let (from, end) = (l.next, l.end);
                let (chunk, next) = tokio::task::spawn_blocking(move || {
                    read_chunk(&node, &rules, &caller, from, end)
                })
                .await
                .map_err(|e| Status::from(Error::Internal(e.to_string())))?
                .map_err(Status::from)?;
                l.next = next;
                l.buf.extend(chunk);
            }
        })
    }
}
