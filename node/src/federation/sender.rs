//! Delivery to peers (DESIGN.md, "Federation": "Delivery is durable and retried per peer with
//! backoff and a circuit breaker; an unreachable peer never blocks the others").
//!
//! One task per enabled peer takes a batch from the head of the peer's outbox, sends it as one
//! envelope signed by the node key (DSSE, `ENVELOPE_PAYLOAD_TYPE`), with the proof that our log
//! holds every record of it ([`super::logproof`]), over mutual TLS (the peer's CA and, if pinned,
//! its leaf: [`crate::tls::peer_channel`]), verifies the
//! receipts against the peer's keys, stores them, advances each record's durability
//! (federated → admitted, quarantined or rejected), and only then removes the batch from the
//! outbox — so a crash or a failed call re-sends it, and the receiver's dedup answers with the
//! original receipts. Failures back off behind a [`Breaker`]; `ResourceExhausted` halves the
//! batch and slows down. Receipts still lacking a decision or a proof are polled with
//! `GetReceipts`.

use super::FedContext;
use super::breaker::{Breaker, State};
use super::outbox::Item;
use super::peers::Peer;
use super::receipts;
use crate::error::Error;
use accord_proto::note::Verifier;
use accord_proto::pb::federation::v1::{
    DeliverRequest, Envelope, GetReceiptsRequest, ReceiptKind, Signed,
};
use accord_proto::signing::{self, ENVELOPE_PAYLOAD_TYPE, RecordId};
use prost::Message;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Most bytes of records in one envelope.
const MAX_ENVELOPE_BYTES: usize = 4 * 1024 * 1024;

/// A peer's delivery health (AdminService.GetPeerHealth).
#[derive(Debug)]
pub struct Health {
    last_success: AtomicI64,
    last_error: Mutex<String>,
    breaker: Mutex<State>,
    /// The size of our checkpoint the peer is believed to hold (the one of the last envelope it
    /// answered); 0 = unknown. Log proofs carry a consistency proof from it.
    log_size: AtomicU64,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            last_success: AtomicI64::new(0),
            last_error: Mutex::new(String::new()),
            breaker: Mutex::new(State::Closed),
            log_size: AtomicU64::new(0),
        }
    }
}

impl Health {
    /// Last successful delivery (Unix ms), 0 if never.
    pub fn last_success(&self) -> i64 {
        self.last_success.load(Ordering::Relaxed)
    }

    /// The last error, if any.
    pub fn last_error(&self) -> String {
        self.last_error
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default()
    }

    /// The breaker state.
    pub fn breaker(&self) -> State {
        self.breaker.lock().map(|b| *b).unwrap_or(State::Closed)
    }

    fn set_breaker(&self, s: State) {
        if let Ok(mut b) = self.breaker.lock() {
            *b = s;
        }
    }

    fn error(&self, e: String) {
        if let Ok(mut l) = self.last_error.lock() {
            *l = e;
        }
    }
}

enum Fail {
    /// The peer said ResourceExhausted: slow down.
    Exhausted(String),
    /// Anything else: back off.
    Other(String),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Other(e.to_string())
    }
}

fn status_fail(s: tonic::Status) -> Fail {
    let reason = s
        .metadata()
        .get("accord-reason")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if let Some(cause) = super::handshake::classify(&s) {
        return Fail::Other(cause);
    }
    let msg = format!("{:?}: {} {}", s.code(), reason, s.message());
    if s.code() == tonic::Code::ResourceExhausted {
        Fail::Exhausted(msg)
    } else {
        Fail::Other(msg)
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(e.to_string()))?
}

/// Sends one envelope of the head of the queue; returns how many records it carried.
async fn send(cx: &FedContext, peer: &Peer, items: Vec<(u64, Item)>) -> Result<usize, Fail> {
    let n = cx.clone();
    let loaded = blocking(move || {
        let store = n.ledger.store();
        let mut out = Vec::with_capacity(items.len());
        let mut bytes = 0;
        for (seq, item) in items {
            let e = store.get(item.ledger_seq)?.ok_or_else(|| {
                Error::Storage(format!("outbox names missing sequence {}", item.ledger_seq))
            })?;
            let r = e
                .record
                .ok_or_else(|| Error::Storage("ledger entry without record".into()))?;
            bytes += r.encoded_len();
            if !out.is_empty() && bytes > MAX_ENVELOPE_BYTES {
                break;
            }
            out.push((seq, item, r));
        }
        Ok(out)
    })
    .await?;
    // The proof that we recorded every record we send (issue 8): a checkpoint covering the
    // batch — the latest, or one signed now — and each record's inclusion proof.
    let leaves: Vec<u64> = loaded.iter().map(|(_, i, _)| i.ledger_seq).collect();
    let need = leaves.iter().max().map_or(0, |m| m + 1);
    let cp = crate::log::covering(&cx.checkpoints, need).await?;
    let health = cx.federation.health(peer.name());
    let held = health.log_size.load(Ordering::Relaxed);
    let (n, cp2) = (cx.clone(), cp.clone());
    let log_proof = blocking(move || super::logproof::build(&n, &cp2, &leaves, held)).await?;
    let first_sequence = loaded.first().map(|(s, _, _)| *s).unwrap_or(0);
    let seqs: Vec<u64> = loaded.iter().map(|(s, _, _)| *s).collect();
    let ids: Vec<RecordId> = loaded.iter().map(|(_, i, _)| i.record_id).collect();
    let env = Envelope {
        sender: cx.name().to_string(),
        receiver: peer.name().to_string(),
        first_sequence,
        sent_at_unix_ms: cx.clock.now_ms(),
        records: loaded.into_iter().map(|(_, _, r)| r).collect(),
        log_proof: Some(log_proof),
    };
    let payload = env.encode_to_vec();
    let sig = signing::sign(&cx.signer, ENVELOPE_PAYLOAD_TYPE, &payload);
    let env_id = signing::record_id(ENVELOPE_PAYLOAD_TYPE, &payload);
    let req = DeliverRequest {
        envelope: Some(Signed {
            payload: payload.into(),
            payload_type: ENVELOPE_PAYLOAD_TYPE.into(),
            signatures: vec![sig],
        }),
    };
    let resp = cx.transport.deliver(peer, req).await.map_err(status_fail)?;
    let keys: Vec<Verifier> = peer.keys_at(cx.clock.now_ms()).cloned().collect();
    let first = resp
        .receipts
        .first()
        .ok_or_else(|| Fail::Other("no envelope receipt in the answer".into()))?;
    let mut all = receipts::verify_many(&resp.receipts, &keys, &[]).into_iter();
    let v = all
        .next()
        .unwrap_or_else(|| Err("missing".into()))
        .map_err(|e| Fail::Other(format!("envelope receipt: {e}")))?;
    let r = &v.receipt;
    if r.kind != ReceiptKind::EnvelopeRecorded as i32
        || r.envelope_id[..] != env_id[..]
        || r.receiver != peer.name()
        || r.sender != cx.name()
    {
        return Err(Fail::Other(
            "the envelope receipt is not about this envelope".into(),
        ));
    }
    let want: HashSet<RecordId> = ids.iter().copied().collect();
    let mut verified = Vec::new();
    for ((i, s), checked) in resp.receipts.iter().enumerate().skip(1).zip(all) {
        match checked {
            Ok(v)
                if v.decision.is_some()
                    && v.receipt.receiver == peer.name()
                    && v.receipt.sender == cx.name()
                    && <RecordId>::try_from(v.receipt.record_id.as_ref())
                        .is_ok_and(|id| want.contains(&id)) =>
            {
                verified.push((v, s.clone()))
            }
            Ok(_) => tracing::warn!(
                peer = peer.name(),
                index = i,
                "receipt is not about a record of this envelope; ignored"
            ),
            Err(e) => {
                tracing::warn!(peer = peer.name(), index = i, error = %e, "receipt does not verify; ignored")
            }
        }
    }
    // The peer verified our checkpoint (it answered): it holds at least this size now.
    health.log_size.fetch_max(cp.size, Ordering::Relaxed);
    let (n, peer_name, env_receipt, issued) = (
        cx.clone(),
        peer.name().to_string(),
        first.encode_to_vec(),
        r.issued_at_unix_ms,
    );
    let count = seqs.len();
    blocking(move || {
        let fed = &n.federation;
        let mut batch = crate::ledger::Batch::default();
        // A record with its admission receipt in this answer needs no `federated` state first
        // (the admission receipt replaces it in the same write): one read and write less each.
        let decided: HashSet<&[u8]> = verified
            .iter()
            .map(|(v, _)| v.receipt.record_id.as_ref())
            .collect();
        let undecided: Vec<RecordId> = ids
            .iter()
            .filter(|id| !decided.contains(&id[..]))
            .copied()
            .collect();
        fed.receipts.envelope_recorded(&mut batch, &peer_name, &undecided, &env_receipt, issued)?;
        for (v, s) in &verified {
            if let Some(d) = &v.decision {
                tracing::debug!(peer = %peer_name, record_id = %hex::encode(&v.receipt.record_id), decision = %d, "receipt");
            }
            fed.receipts.admission(&mut batch, &peer_name, v, s)?;
        }
        fed.outbox.remove(&mut batch, &peer_name, &seqs)?;
        super::db::write(n.ledger.store(), batch, true)?;
        fed.outbox.removed(&peer_name, &seqs);
        Ok(())
    })
    .await?;
    tracing::debug!(peer = peer.name(), records = count, envelope = %hex::encode(env_id), "envelope delivered");
    Ok(count)
}

/// Fetches newer receipts for records still lacking a decision or a proof: up to
/// `POLL_PAGES` pages of 256 from `cursor` on, which then moves on (round-robin), so records that
/// stay undecided (a long quarantine) do not starve the others.
async fn poll(cx: &FedContext, peer: &Peer, cursor: &mut Option<RecordId>) -> Result<(), Fail> {
    for _ in 0..POLL_PAGES {
        let ids = cx
            .federation
            .receipts
            .pending(peer.name(), cursor.as_ref(), 256)?;
        *cursor = if ids.len() < 256 {
            None
        } else {
            ids.last().copied()
        };
        if ids.is_empty() {
            return Ok(());
        }
        poll_page(cx, peer, ids).await?;
        if cursor.is_none() {
            return Ok(());
        }
    }
    Ok(())
}

const POLL_PAGES: usize = 8;

async fn poll_page(cx: &FedContext, peer: &Peer, ids: Vec<RecordId>) -> Result<(), Fail> {
    let req = GetReceiptsRequest {
        record_ids: ids.iter().map(|i| i.to_vec().into()).collect(),
    };
    let resp = cx
        .transport
        .get_receipts(peer, req)
        .await
        .map_err(status_fail)?;
    let keys: Vec<Verifier> = peer.keys_at(cx.clock.now_ms()).cloned().collect();
    let want: HashSet<RecordId> = ids.into_iter().collect();
    let mut verified = Vec::new();
    let checked = receipts::verify_many(&resp.receipts, &keys, &[]);
    for (s, checked) in resp.receipts.into_iter().zip(checked) {
        match checked {
            Ok(v)
                if v.receipt.receiver == peer.name()
                    && v.receipt.sender == cx.name()
                    && <RecordId>::try_from(v.receipt.record_id.as_ref())
                        .is_ok_and(|id| want.contains(&id)) =>
            {
                verified.push((v, s))
            }
            Ok(_) => tracing::warn!(
                peer = peer.name(),
                "polled receipt is not about a pending record; ignored"
            ),
            Err(e) => {
                tracing::warn!(peer = peer.name(), error = %e, "polled receipt does not verify; ignored")
            }
        }
    }
    let (n, peer_name) = (cx.clone(), peer.name().to_string());
    blocking(move || {
        let fed = &n.federation;
        let mut batch = crate::ledger::Batch::default();
        for (v, s) in &verified {
            if let Some(st) = fed.receipts.admission(&mut batch, &peer_name, v, s)? {
                tracing::debug!(peer = %peer_name, record_id = %hex::encode(&v.receipt.record_id), durability = st.durability, proven = st.proven, "receipt updated");
            }
        }
        super::db::write(n.ledger.store(), batch, true)
    })
    .await?;
    Ok(())
}

async fn pause(cancel: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

/// Delivers to one peer until cancelled, or until the peer is disabled or removed.
pub async fn run_peer(cx: FedContext, name: String, cancel: CancellationToken) {
    let fed = &cx.federation;
    let cfg = cx.config.clone();
    let health = fed.health(&name);
    let base = Duration::from_millis(cfg.retry_base_ms);
    let max = Duration::from_millis(cfg.retry_max_ms);
    let mut breaker = Breaker::new(cfg.breaker_failures, base, max);
    let mut limit = cfg.batch_size;
    let mut throttle = Duration::ZERO;
    let notify = fed.outbox.notify(&name);
    // Receipts are polled by a task of their own, so polling never holds up delivery.
    let poller = cancel.child_token();
    let _stop_poller = poller.clone().drop_guard();
    tokio::spawn(run_poller(cx.clone(), name.clone(), poller));
    tracing::info!(peer = %name, "federation sender started");
    loop {
        if cancel.is_cancelled() {
            return;
        }
        let Some(peer) = fed.peers.get(&name).filter(|p| p.enabled()) else {
            tracing::info!(peer = %name, "federation sender stopped: peer disabled or removed");
            return;
        };
        if let Some(wait) = breaker.ready_in(Instant::now()) {
            health.set_breaker(breaker.state());
            if !pause(&cancel, wait).await {
                return;
            }
            continue;
        }
        health.set_breaker(breaker.state());
        let fed2 = cx.clone();
        let (peer_name, lim) = (name.clone(), limit);
        let items = match blocking(move || fed2.federation.outbox.peek(&peer_name, lim)).await {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!(peer = %name, error = %e, "outbox read failed");
                if !pause(&cancel, Duration::from_secs(1)).await {
                    return;
                }
                continue;
            }
        };
        let mut result = Ok(());
        if !items.is_empty() {
            let sent = tokio::select! {
                _ = cancel.cancelled() => return,
                r = send(&cx, &peer, items) => r,
            };
            result = match sent {
                Ok(_) => {
                    health
                        .last_success
                        .store(cx.clock.now_ms(), Ordering::Relaxed);
                    limit = (limit * 2).min(cfg.batch_size);
                    throttle /= 2;
                    if throttle < Duration::from_millis(1) {
                        throttle = Duration::ZERO;
                    }
                    Ok(())
                }
                Err(f) => Err(f),
            };
        }
        match result {
            Ok(()) => {
                if breaker.state() != State::Closed || breaker.failures() > 0 {
                    tracing::info!(peer = %name, "peer reachable again");
                }
                breaker.success();
                health.set_breaker(State::Closed);
                if !items_left(&cx, &name) {
                    // Idle: wait for new records (and look again now and then).
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = notify.notified() => {}
                        _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                    }
                }
                if !throttle.is_zero() && !pause(&cancel, throttle).await {
                    return;
                }
            }
            Err(Fail::Exhausted(msg)) => {
                limit = (limit / 2).max(1);
                throttle = (throttle * 2).clamp(base, max);
                tracing::info!(peer = %name, batch = limit, delay_ms = throttle.as_millis() as u64, "peer is busy; slowing down");
                health.error(msg);
                if !pause(&cancel, throttle).await {
                    return;
                }
            }
            Err(Fail::Other(msg)) => {
                let msg = match super::handshake::is_transport(&msg) {
                    true => super::handshake::probe(&cx, &peer, Duration::from_secs(3))
                        .await
                        .unwrap_or(msg),
                    false => msg,
                };
                let w = breaker.failure(Instant::now());
                health.set_breaker(breaker.state());
                tracing::warn!(peer = %name, error = %msg, failures = breaker.failures(), breaker = breaker.state().as_str(), retry_in_ms = w.as_millis() as u64, "delivery failed");
                health.error(msg);
            }
        }
    }
}

/// Polls `GetReceipts` every `federation.receipt_poll_ms` for the peer's records whose receipt
/// still lacks a decision or a proof; stops with its sender.
async fn run_poller(cx: FedContext, name: String, cancel: CancellationToken) {
    let every = Duration::from_millis(cx.config.receipt_poll_ms);
    let mut cursor: Option<RecordId> = None;
    loop {
        if !pause(&cancel, every).await {
            return;
        }
        let Some(peer) = cx.federation.peers.get(&name).filter(|p| p.enabled()) else {
            return;
        };
        let r = tokio::select! {
            _ = cancel.cancelled() => return,
            r = poll(&cx, &peer, &mut cursor) => r,
        };
        if let Err(Fail::Other(e) | Fail::Exhausted(e)) = r {
            tracing::debug!(peer = %name, error = %e, "receipt poll failed");
        }
    }
}

fn items_left(cx: &FedContext, peer: &str) -> bool {
    cx.federation.outbox.depth(peer) > 0
}

/// Keeps one sender task per enabled peer, following peer changes, until `shutdown`.
pub async fn run(cx: FedContext, shutdown: CancellationToken) {
    let mut changes = cx.federation.peers.subscribe();
    let mut tasks: HashMap<String, (CancellationToken, tokio::task::JoinHandle<()>)> =
        HashMap::new();
    loop {
        changes.borrow_and_update();
        let wanted: HashSet<String> = cx
            .federation
            .peers
            .list()
            .into_iter()
            .filter(|p| p.enabled())
            .map(|p| p.name().to_string())
            .collect();
        tasks.retain(|name, (tok, h)| {
            let keep = wanted.contains(name) && !h.is_finished();
            if !keep {
                tok.cancel();
            }
            keep
        });
        for name in wanted {
            if let std::collections::hash_map::Entry::Vacant(slot) = tasks.entry(name.clone()) {
                let tok = shutdown.child_token();
                let h = tokio::spawn(run_peer(cx.clone(), name, tok.clone()));
                slot.insert((tok, h));
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            r = changes.changed() => if r.is_err() { break },
        }
    }
    for (_, (tok, h)) in tasks {
        tok.cancel();
        let _ = h.await;
    }
}

/// One delivery step (the simulation and embedding surface, issue 16): sends one envelope from
/// the head of `peer`'s outbox, if there is one, exactly as the sender task does, and returns
/// how many records it carried (0: nothing queued, or the peer is not enabled). A failure is
/// described; nothing is removed from the outbox then.
pub async fn deliver_step(cx: &FedContext, peer: &str) -> Result<usize, String> {
    let Some(p) = cx.federation.peers.get(peer).filter(|p| p.enabled()) else {
        return Ok(0);
    };
    let (c, name, limit) = (cx.clone(), peer.to_string(), cx.config.batch_size);
    let items = blocking(move || c.federation.outbox.peek(&name, limit))
        .await
        .map_err(|e| e.to_string())?;
    if items.is_empty() {
        return Ok(0);
    }
    send(cx, &p, items).await.map_err(|f| match f {
        Fail::Exhausted(m) | Fail::Other(m) => m,
    })
}

/// One receipt-polling step (see [`deliver_step`]): fetches newer receipts for every record of
/// `peer` still lacking a decision or a proof.
pub async fn poll_step(cx: &FedContext, peer: &str) -> Result<(), String> {
    let Some(p) = cx.federation.peers.get(peer).filter(|p| p.enabled()) else {
        return Ok(());
    };
    let mut cursor = None;
    loop {
        poll(cx, &p, &mut cursor).await.map_err(|f| match f {
            Fail::Exhausted(m) | Fail::Other(m) => m,
        })?;
        if cursor.is_none() {
            return Ok(());
        }
    }
}
