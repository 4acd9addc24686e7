//! Delivery to peers (DESIGN.md, "Federation": "Delivery is durable and retried per peer with
//! backoff and a circuit breaker; an unreachable peer never blocks the others").
//!
//! One task per enabled peer takes batches from the peer's outbox and sends each as one
//! envelope signed by the node key, with the proof that our log holds every record of it, over
//! mutual TLS (the round trip's steps are in [`super::delivery`]). Up to
//! `federation.max_in_flight` envelopes are in flight at once (issue 14) once the peer answered
//! that it decides them in order (`DeliverResponse.sequenced`; each envelope names the one sent
//! before it); answers are acknowledged strictly in sending order — the receipts stored, each
//! record's durability advanced, the batch removed from the outbox — so the outbox only shrinks
//! from its head, and a crash or a failed call re-sends from there: the receiver's dedup
//! answers with the original receipts. A failure drops the envelopes in flight after it and
//! starts again from the head, behind a [`Breaker`]; `ResourceExhausted` halves the batch and
//! slows down. Receipts still lacking a decision or a proof are polled with `GetReceipts`.

use super::FedContext;
use super::breaker::{Breaker, State};
use super::delivery::{self, Answered, Fail, blocking, status_fail};
use super::peers::Peer;
use super::receipts;
use accord_proto::note::Verifier;
use accord_proto::pb::federation::v1::GetReceiptsRequest;
use accord_proto::signing::RecordId;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A peer's delivery health (AdminService.GetPeerHealth).
#[derive(Debug)]
pub struct Health {
    last_success: AtomicI64,
    last_error: Mutex<String>,
    breaker: Mutex<State>,
    /// The size of our checkpoint the peer is believed to hold (the one of the last envelope it
    /// answered); 0 = unknown. Log proofs carry a consistency proof from it.
    pub(super) log_size: AtomicU64,
    /// The peer's last answer said it decides pipelined envelopes in order
    /// (`DeliverResponse.sequenced`): more than one may be in flight.
    sequenced: AtomicBool,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            last_success: AtomicI64::new(0),
            last_error: Mutex::new(String::new()),
            breaker: Mutex::new(State::Closed),
            log_size: AtomicU64::new(0),
            sequenced: AtomicBool::new(false),
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

/// One envelope in flight: its outbox range and the checkpoint proving it.
struct Flight {
    first: u64,
    end: u64,
    checkpoint_size: u64,
    task: tokio::task::JoinHandle<Result<Answered, Fail>>,
}

/// The envelopes in flight to one peer, oldest first; dropped ones are aborted.
#[derive(Default)]
struct Flights(VecDeque<Flight>);

impl Flights {
    fn clear(&mut self) {
        for f in self.0.drain(..) {
            f.task.abort();
        }
    }
}

impl Drop for Flights {
    fn drop(&mut self) {
        self.clear();
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
    let mut flights = Flights::default();
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
        if flights.0.is_empty() {
            if let Some(wait) = breaker.ready_in(Instant::now()) {
                health.set_breaker(breaker.state());
                if !pause(&cancel, wait).await {
                    return;
                }
                continue;
            }
            health.set_breaker(breaker.state());
        }
        // Fill the window: one envelope until the peer said it keeps them in order.
        let window = match health.sequenced.load(Ordering::Relaxed) {
            true => cfg.max_in_flight.max(1),
            false => 1,
        };
        let mut fill_err = None;
        while flights.0.len() < window {
            let back = flights.0.back();
            let from = back.map_or(0, |f| f.end);
            let previous = back.map(|f| f.first);
            // The peer holds the checkpoint of the envelope before this one once it decides
            // this one (it decides them in order): prove from there.
            let held = back
                .map_or(0, |f| f.checkpoint_size)
                .max(health.log_size.load(Ordering::Relaxed));
            let (c, peer_name) = (cx.clone(), name.clone());
            let items = match blocking(move || {
                c.federation.outbox.peek_from(&peer_name, from, limit)
            })
            .await
            {
                Ok(i) => i,
                Err(e) => {
                    fill_err = Some(Fail::Other(format!("outbox read failed: {e}")));
                    break;
                }
            };
            if items.is_empty() {
                break;
            }
            let prepared = tokio::select! {
                _ = cancel.cancelled() => return,
                r = delivery::prepare(&cx, &peer, items, held, previous) => r,
            };
            match prepared {
                Ok(p) => {
                    let (c, pr) = (cx.clone(), peer.clone());
                    flights.0.push_back(Flight {
                        first: p.first_sequence(),
                        end: p.end_sequence(),
                        checkpoint_size: p.checkpoint_size,
                        task: tokio::spawn(async move { delivery::transmit(&c, &pr, p).await }),
                    });
                }
                Err(f) => {
                    fill_err = Some(f);
                    break;
                }
            }
        }
        let result = match flights.0.pop_front() {
            None => match fill_err {
                Some(f) => Err(f),
                None => {
                    // Idle: wait for new records (and look again now and then).
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = notify.notified() => {}
                        _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                    }
                    continue;
                }
            },
            Some(mut oldest) => {
                if let Some(f) = fill_err {
                    tracing::warn!(peer = %name, error = %f.into_message(), "next envelope not prepared");
                }
                // Answers are acknowledged in sending order, whatever order they come in.
                let answer = tokio::select! {
                    _ = cancel.cancelled() => return,
                    r = &mut oldest.task => r.unwrap_or_else(|e| Err(Fail::Other(format!("delivery task: {e}")))),
                };
                match answer {
                    Ok(a) => {
                        health.sequenced.store(a.sequenced, Ordering::Relaxed);
                        delivery::acknowledge(&cx, &name, a).await.map(|_| ())
                    }
                    Err(f) => Err(f),
                }
            }
        };
        match result {
            Ok(()) => {
                health
                    .last_success
                    .store(cx.clock.now_ms(), Ordering::Relaxed);
                limit = (limit * 2).min(cfg.batch_size);
                throttle /= 2;
                if throttle < Duration::from_millis(1) {
                    throttle = Duration::ZERO;
                }
                if breaker.state() != State::Closed || breaker.failures() > 0 {
                    tracing::info!(peer = %name, "peer reachable again");
                }
                breaker.success();
                health.set_breaker(State::Closed);
                if !throttle.is_zero() && !pause(&cancel, throttle).await {
                    return;
                }
            }
            Err(fail) => {
                // The envelopes sent after a failed one cannot be decided before it: start again
                // from the head of the queue (the receiver answers re-sent records with their
                // original receipts).
                flights.clear();
                match fail {
                    Fail::Exhausted(msg) => {
                        limit = (limit / 2).max(1);
                        throttle = (throttle * 2).clamp(base, max);
                        tracing::info!(peer = %name, batch = limit, delay_ms = throttle.as_millis() as u64, "peer is busy; slowing down");
                        health.error(msg);
                        if !pause(&cancel, throttle).await {
                            return;
                        }
                    }
                    Fail::Other(msg) => {
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
    let held = cx.federation.health(peer).log_size.load(Ordering::Relaxed);
    let round_trip = async {
        let prepared = delivery::prepare(cx, &p, items, held, None).await?;
        let answered = delivery::transmit(cx, &p, prepared).await?;
        delivery::acknowledge(cx, peer, answered).await
    };
    round_trip.await.map_err(Fail::into_message)
}

/// One receipt-polling step (see [`deliver_step`]): fetches newer receipts for every record of
/// `peer` still lacking a decision or a proof.
pub async fn poll_step(cx: &FedContext, peer: &str) -> Result<(), String> {
    let Some(p) = cx.federation.peers.get(peer).filter(|p| p.enabled()) else {
        return Ok(());
    };
    let mut cursor = None;
    loop {
        poll(cx, &p, &mut cursor)
            .await
            .map_err(Fail::into_message)?;
        if cursor.is_none() {
            return Ok(());
        }
    }
}
