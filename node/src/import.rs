//! Bulk import of signed records through the node's real write path, without gRPC (issue 15,
//! item 6: `accordctl bench scale` builds ledgers of 10^5–10^7 records). Each record is checked
//! exactly as `Submit` checks it (payload, author of this organisation, Ed25519 signature by
//! one of the author's configured keys), converted at the node's edge, decided by the kernel and
//! written by the ledger's group-commit writer with its derived state. Nothing is served while
//! it runs: it opens the node's data directory itself (the node must not be running).

use crate::clock::Clock;
use crate::config::Config;
use crate::error::Error;
use accord_proto::pb::record::v1::SignedRecord;
use futures::StreamExt;

/// What [`bulk`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Imported {
    /// Records appended (new to the ledger).
    pub records: u64,
    /// Of which the kernel applied.
    pub applied: u64,
}

/// Sequences per chunk: one message to the writer (one or a few group commits).
const CHUNK: u64 = 512;

/// Chunks in flight: being signed/checked while earlier ones are written, so that both cores
/// work (the writer thread on one, signing and verification on the other).
const IN_FLIGHT: usize = 4;

/// Appends the record sequences `make(0) .. make(count - 1)` to the node configured by `config`:
/// the records of one sequence in order (a commitment's lifecycle). Sequences are taken in
/// chunks of [`CHUNK`]: a chunk's records are made (signed, by `make`) on a blocking worker
/// thread, checked exactly as `SubmitBatch` checks them (envelope, signatures with one Ed25519
/// batch verification on a verifier thread, author), converted at the edge, and sent to the
/// ledger's writer in one message, in order — the kernel applies every record and the group
/// commit writes it with its derived state, synced, as for any append. [`IN_FLIGHT`] chunks are
/// prepared while earlier ones are written. Stops at the first record refused before the kernel
/// (a bad signature, another organisation's author).
pub async fn bulk<F>(
    config: Config,
    count: u64,
    concurrency: usize,
    make: F,
) -> Result<Imported, Error>
where
    F: Fn(u64) -> Vec<SignedRecord> + Send + Sync + 'static,
{
    let opened = crate::node::open(config, Clock::system()).await?;
    let node = opened.node;
    let verifier = crate::services::submit::BatchVerifier::start(1, 2 * CHUNK as usize * 4)?;
    let make = std::sync::Arc::new(make);
    let chunks = count.div_ceil(CHUNK);
    let results: Vec<Result<Imported, Error>> = futures::stream::iter(0..chunks)
        .map(|c| {
            let (node, make, verifier) = (node.clone(), make.clone(), &verifier);
            async move {
                let (from, to) = (c * CHUNK, ((c + 1) * CHUNK).min(count));
                let signed: Vec<SignedRecord> =
                    tokio::task::spawn_blocking(move || (from..to).flat_map(|i| make(i)).collect())
                        .await
                        .map_err(|e| Error::Internal(format!("record maker: {e}")))?;
                append_chunk(&node, verifier, signed).await
            }
        })
        .buffered(concurrency.clamp(1, IN_FLIGHT))
        .collect()
        .await;
    close(node, opened.writer).await?;
    let mut total = Imported::default();
    for r in results {
        let r = r?;
        total.records += r.records;
        total.applied += r.applied;
    }
    Ok(total)
}

/// Checks `signed` as `SubmitBatch` does and appends it in one message to the writer.
async fn append_chunk(
    node: &crate::node::Node,
    verifier: &crate::services::submit::BatchVerifier,
    signed: Vec<SignedRecord>,
) -> Result<Imported, Error> {
    let mut pending = signed
        .into_iter()
        .map(|s| crate::services::submit::Pending::new(node, s))
        .collect::<Result<Vec<_>, Error>>()?;
    let checks = pending.iter_mut().map(|p| p.check()).collect();
    for v in verifier.verify(checks).await {
        v?;
    }
    let appends = pending
        .into_iter()
        .map(|p| {
            let (id, record, signed) = p.finish(node)?;
            let input = crate::convert::record_from_pb(id, &record)?;
            Ok(crate::ledger::Append {
                id,
                signed,
                input,
                at: None,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let mut done = Imported::default();
    for r in node.ledger.append_many(appends).await {
        let r = r?;
        done.records += 1;
        done.applied += u64::from(r.outcome.applied);
    }
    Ok(done)
}

/// What one Work service clock tick costs on the node configured by `config` with nothing due
/// (issue 15, item 3: O(due), not O(open commitments)): opens the node, runs the tick's scan
/// (`service_party::scan`, the deadline-index read and the kernel on what it returns) `samples`
/// times at the node's now, and returns the mean microseconds and how many actions were due.
/// The node must not be running.
pub async fn tick_us(config: Config, samples: u32) -> Result<(f64, usize), Error> {
    let opened = crate::node::open(config, Clock::system()).await?;
    let node = opened.node;
    let now = node.clock.now_ms();
    let mut due = 0;
    let started = std::time::Instant::now();
    for _ in 0..samples.max(1) {
        due = crate::service_party::scan(&node, now).len();
    }
    let us = started.elapsed().as_secs_f64() * 1e6 / f64::from(samples.max(1));
    close(node, opened.writer).await?;
    Ok((us, due))
}

/// Compacts every column family of the store in `data_dir` to its bottommost level (for
/// `bench scale`'s bytes on disk once the data is cold). The node must not be running.
pub fn compact(data_dir: &std::path::Path) -> Result<(), Error> {
    let names = rocksdb::DB::list_cf(&rocksdb::Options::default(), data_dir)
        .map_err(|e| Error::Storage(e.into_string()))?;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    crate::ledger::Store::open(data_dir, &names)?.compact()
}

/// Marks the stored projection in `data_dir` stale, so that the node's next start-up clears the
/// projection's column families and rebuilds them by replaying every record from sequence 0
/// through the kernel (after an upgrade that changes derived state, and in the tests that
/// compare the stored projection with a full replay). The node must not be running.
pub fn forget_projection(data_dir: &std::path::Path) -> Result<(), Error> {
    // Every existing column family must be named to open the database.
    let names = rocksdb::DB::list_cf(&rocksdb::Options::default(), data_dir)
        .map_err(|e| Error::Storage(e.into_string()))?;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let store = crate::ledger::Store::open(data_dir, &names)?;
    store.put_meta(crate::projection::store::LAYOUT, b"stale")
}

/// Stops the ledger writer of a node opened here and waits until its last batch is synced.
async fn close(
    node: std::sync::Arc<crate::node::Node>,
    writer: std::thread::JoinHandle<()>,
) -> Result<(), Error> {
    node.ledger.stop().await;
    drop(node);
    writer
        .join()
        .map_err(|_| Error::Internal("ledger writer panicked".into()))
}
