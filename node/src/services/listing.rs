//! The `ListRecords` stream, pull-based (issue 8, "Bounded resources"): a chunk is read from
//! RocksDB only when the client has taken the previous one — tonic polls the stream only when
//! HTTP/2 flow control lets it send — so an unread stream holds at most one small chunk, and no
//! task reads ahead. Each stream holds a share of the stream quotas
//! ([`super::quota`]) until it ends or the client goes away. Chunk reads run on blocking threads, at most
//! [`readers`] at once node-wide: two thousand streams opened together would otherwise start
//! hundreds of blocking threads, each costing the node most of a megabyte of resident memory
//! (its stack, an allocator arena, RocksDB's thread-local state) until it idles out.

use super::visibility::Visibility;
use crate::auth::Caller;
use crate::error::Error;
use crate::node::Node;
use accord_proto::pb::work::v1::LedgerEntry;
use prost::Message;
use std::collections::VecDeque;
use std::sync::Arc;
use tonic::Status;

/// Most entries one chunk holds.
const CHUNK_ENTRIES: usize = 32;
/// A chunk stops growing once its entries reach this many encoded bytes.
const CHUNK_BYTES: usize = 16 * 1024;
/// Most entries one read step looks at (a party's filtered stream may skip many).
const SCAN: u64 = 1024;

/// How many chunk reads may run at once, node-wide: two per core, so that reads keep every core
/// busy while one waits on the disk, and no more.
pub fn readers() -> usize {
    2 * std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

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
    /// Whether the stream has handed out entries since it last read a chunk: the next read then
    /// waits for one more poll (see [`Listing::into_stream`]).
    pub handed_out: bool,
    /// The node-wide permits for chunk reads (see [`readers`]).
    pub readers: Arc<tokio::sync::Semaphore>,
    /// The stream's share of the stream quotas ([`super::quota`]), given back when the stream
    /// is dropped.
    pub _permit: super::quota::Share,
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
                if std::mem::take(&mut l.handed_out) {
                    // No read-ahead. tonic's encoder polls this stream again as soon as it has
                    // encoded what it was given, and a read started then would be held in memory
                    // while the chunk before it waits for flow control. Returning `Pending` once
                    // makes tonic hand its buffer to hyper, and hyper polls again only when
                    // HTTP/2 flow control has room: the read happens then.
                    tokio::task::yield_now().await;
                }
                let (node, rules, caller) = (l.node.clone(), l.rules.clone(), l.caller.clone());
                let (from, end) = (l.next, l.end);
                // The read waits for a permit in a task of its own, so that a permit granted to
                // a stream whose future is not being polled (its client stopped reading) is
                // still used and given back at once: it is never held by a stalled stream.
                let readers = l.readers.clone();
                let (chunk, next) = tokio::spawn(async move {
                    let _reading = readers
                        .acquire_owned()
                        .await
                        .map_err(|_| Error::Internal("the read permits are closed".into()))?;
                    tokio::task::spawn_blocking(move || {
                        read_chunk(&node, &rules, &caller, from, end)
                    })
                    .await
                    .map_err(|e| Error::Internal(e.to_string()))?
                })
                .await
                .map_err(|e| Status::from(Error::Internal(e.to_string())))?
                .map_err(Status::from)?;
                l.next = next;
                l.handed_out = !chunk.is_empty();
                l.buf.extend(chunk);
            }
        })
    }
}
