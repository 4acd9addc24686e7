//! A steady background load for the latency benches (issue 32, item 5: recorded → witnessed
//! "at half load"): `SubmitBatch` calls of pre-signed records at a fixed rate, paced by a
//! 10 ms tick, until stopped. The records are signed before the load starts so that signing
//! does not compete with the measurement; each is a new commitment, so every one is applied.

use accord_proto::note::Signer;
use accord_proto::pb::record::v1::{
    self as rec, PartyRef, Record, SignedRecord, record::Operation,
};
use accord_proto::pb::work::v1::SubmitBatchRequest;
use accord_proto::signing;
use anyhow::Result;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A running load; [`Load::stop`] ends it and returns the rate it reached.
pub struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    started: Instant,
    task: tokio::task::JoinHandle<Result<()>>,
}

/// A request by `author` of `org` opening `commitment`, `candidate` (of `org`) asked.
pub fn request(org: &str, author: &str, candidate: &str, commitment: String) -> Record {
    let party = |name: &str| PartyRef {
        organisation: org.into(),
        name: name.into(),
    };
    Record {
        author: Some(party(author)),
        commitment_id: commitment,
        operation: Some(Operation::Request(rec::Request {
            candidate: Some(party(candidate)),
            terms: Some(rec::Terms {
                title: "bench".into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// `n` records by `author` (party `name` of `org`), each opening commitment `load-<i>`.
pub fn records(author: &Signer, org: &str, name: &str, n: u64) -> Vec<SignedRecord> {
    (0..n)
        .map(|i| signing::sign_record(author, &request(org, name, name, format!("load-{i}"))))
        .collect()
}

impl Load {
    /// Submits `records` at `per_s` records per second through `client` (a batch every 10 ms),
    /// until stopped or the records run out.
    pub fn start(client: crate::creds::WorkClient, records: Vec<SignedRecord>, per_s: u64) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (s, n) = (stop.clone(), sent.clone());
        let task = tokio::spawn(async move {
            let mut client = client;
            let per_tick = (per_s / 100).max(1) as usize;
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            for batch in records.chunks(per_tick) {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                tick.tick().await;
                client
                    .submit_batch(SubmitBatchRequest {
                        records: batch.to_vec(),
                    })
                    .await?;
                n.fetch_add(batch.len() as u64, Ordering::Relaxed);
            }
            Ok(())
        });
        Load {
            stop,
            sent,
            started: Instant::now(),
            task,
        }
    }

    /// Stops the load; the rate it kept, records per second.
    pub async fn stop(self) -> Result<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let secs = self.started.elapsed().as_secs_f64();
        self.task.await??;
        Ok(self.sent.load(Ordering::Relaxed) as f64 / secs.max(1e-9))
    }
}
