//! The node's side of the witness protocol: a K-of-N policy over configured witnesses.
//!
//! Each witness is configured with one cosigner vkey of either type of c2sp.org/tlog-cosignature:
//! Ed25519 `cosignature/v1` (type 0x04) or ML-DSA-44 `subtree/v1` (type 0x06). A witness that
//! holds both keys answers with both lines; the node keeps the line of the configured key, and
//! each witness counts once toward K whatever its key type.
//!
//! Each new checkpoint goes to every witness with a consistency proof from the size that witness
//! holds. The node learns that size from the witness's conflict answer (ABORTED with `tlog-size`)
//! and remembers it in `meta`. A failing witness is retried with exponential backoff. The policy
//! never fails open: fewer than K valid cosignatures and the checkpoint is not witnessed.

use super::{LogContext, StoredCheckpoint};
use crate::config::Config;
use crate::error::Error;
use crate::ledger::Store;
use accord_proto::checkpoint::{verify_cosignature, verify_subtree_cosignature};
use accord_proto::merkle;
use accord_proto::note::{KeyKind, NoteSignature, Verifier};
use accord_proto::pb::witness::v1::{
    AddCheckpointRequest, SignSubtreeRequest, witness_service_client::WitnessServiceClient,
};
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Channel;

/// Why a call to a witness did not give cosignatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WitnessCall {
    /// The witness holds another size (C2SP 409; gRPC ABORTED with `tlog-size`), if it said.
    Conflict(Option<u64>),
    /// Anything else (unreachable, refused, malformed), described.
    Failed(String),
}

/// How the node reaches one witness (issue 16: the same client runs over gRPC in the daemon and
/// over a simulated network in `accord-sim`). Answers are the witness's cosignature lines.
pub trait WitnessTransport: Send + Sync + std::fmt::Debug {
    /// c2sp.org/tlog-witness add-checkpoint.
    fn add_checkpoint(
        &self,
        req: AddCheckpointRequest,
    ) -> BoxFuture<'_, Result<String, WitnessCall>>;
    /// c2sp.org/tlog-witness sign-subtree.
    fn sign_subtree(&self, req: SignSubtreeRequest) -> BoxFuture<'_, Result<String, WitnessCall>>;
}

/// One witness as the client sees it: its cosigner key, a name for logs, and its transport.
pub type WitnessEndpoint = (Verifier, String, Arc<dyn WitnessTransport>);

/// The daemon's transport: the witness's gRPC service over TLS.
#[derive(Debug, Clone)]
pub struct GrpcWitness(Channel);

fn call_error(s: tonic::Status) -> WitnessCall {
    if s.code() == tonic::Code::Aborted {
        return WitnessCall::Conflict(
            s.metadata()
                .get("tlog-size")
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok()),
        );
    }
    WitnessCall::Failed(format!("{:?}: {}", s.code(), s.message()))
}

impl WitnessTransport for GrpcWitness {
    fn add_checkpoint(
        &self,
        req: AddCheckpointRequest,
    ) -> BoxFuture<'_, Result<String, WitnessCall>> {
        Box::pin(async move {
            WitnessServiceClient::new(self.0.clone())
                .add_checkpoint(req)
                .await
                .map(|r| r.into_inner().cosignatures)
                .map_err(call_error)
        })
    }

    fn sign_subtree(&self, req: SignSubtreeRequest) -> BoxFuture<'_, Result<String, WitnessCall>> {
        Box::pin(async move {
            WitnessServiceClient::new(self.0.clone())
                .sign_subtree(req)
                .await
                .map(|r| r.into_inner().cosignatures)
                .map_err(call_error)
        })
    }
}

struct Witness {
    verifier: Verifier,
    endpoint: String,
    transport: Arc<dyn WitnessTransport>,
    state: Mutex<State>,
}

#[derive(Clone, Copy)]
struct State {
    known_size: u64,
    failures: u32,
    /// Node-clock time (Unix ms) before which the witness is not asked again.
    retry_at: Option<i64>,
}

/// The configured witnesses and the policy's K.
pub struct WitnessClient {
    k: usize,
    witnesses: Vec<Witness>,
    metrics: Option<crate::metrics::Metrics>,
}

impl std::fmt::Debug for WitnessClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WitnessClient")
            .field("k", &self.k)
            .field("n", &self.witnesses.len())
            .finish()
    }
}

fn size_key(v: &Verifier) -> String {
    format!("witness/{}/{}/size", v.name(), hex::encode(v.key_id()))
}

impl WitnessClient {
    /// Builds the client from the validated config; channels connect lazily.
    pub fn new(config: &Config, store: &Store) -> Result<WitnessClient, Error> {
        let mut witnesses = Vec::new();
        for (i, w) in config.witnesses.list.iter().enumerate() {
            let field = format!("witnesses.list[{i}]");
            let verifier = Verifier::from_vkey(&w.vkey)
                .map_err(|e| Error::invalid(format!("{field}.vkey"), e.to_string()))?;
            let uri: http::Uri = w
                .endpoint
                .parse()
                .map_err(|e| Error::invalid(format!("{field}.endpoint"), format!("{e}")))?;
            let mut tls = tonic::transport::ClientTlsConfig::new()
                .domain_name(uri.host().unwrap_or("localhost"));
            if let Some(ca) = &w.ca {
                let pem = std::fs::read(ca)
                    .map_err(|e| Error::invalid(format!("{field}.ca"), e.to_string()))?;
                tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(pem));
            }
            let channel = tonic::transport::Endpoint::from_shared(w.endpoint.clone())
                .map_err(|e| Error::invalid(format!("{field}.endpoint"), e.to_string()))?
                .tls_config(tls)
                .map_err(|e| Error::invalid(format!("{field}.ca"), e.to_string()))?
                .connect_timeout(Duration::from_secs(3))
                .timeout(Duration::from_secs(10))
                .connect_lazy();
            witnesses.push((
                verifier,
                w.endpoint.clone(),
                Arc::new(GrpcWitness(channel)) as Arc<dyn WitnessTransport>,
            ));
        }
        WitnessClient::with_transports(config.witnesses.k, witnesses, store)
    }

    /// A client over given transports: `(cosigner key, name for logs, transport)` per witness
    /// (the simulation's in-memory network; [`WitnessClient::new`] builds gRPC ones). The size
    /// each witness holds is read back from `store`.
    pub fn with_transports(
        k: usize,
        list: Vec<WitnessEndpoint>,
        store: &Store,
    ) -> Result<WitnessClient, Error> {
        let mut witnesses = Vec::new();
        for (verifier, endpoint, transport) in list {
            let known_size = match store.meta(&size_key(&verifier))? {
                Some(v) => v.as_slice().try_into().map(u64::from_be_bytes).unwrap_or(0),
                None => 0,
            };
            witnesses.push(Witness {
                verifier,
                endpoint,
                transport,
                state: Mutex::new(State {
                    known_size,
                    failures: 0,
                    retry_at: None,
                }),
            });
        }
        Ok(WitnessClient {
            k,
            witnesses,
            metrics: None,
        })
    }

    /// Counts cosignature failures per witness in `metrics`.
    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Cosignatures needed.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Takes `cp` to every witness that is not backing off, all at once (the requests are in
    /// flight together; the checkpoint waits for the slowest needed, not for their sum);
    /// returns the checkpoint with the cosignatures appended if at least K verified.
    pub async fn witness(
        &self,
        node: &LogContext,
        cp: &StoredCheckpoint,
    ) -> Option<StoredCheckpoint> {
        let body = match accord_proto::note::Note::parse(cp.note.as_bytes()) {
            Ok(n) => n.text().to_string(),
            Err(e) => {
                tracing::error!(error = %e, "own checkpoint does not parse");
                return None;
            }
        };
        let calls = self.witnesses.iter().map(|w| self.ask(node, w, cp, &body));
        let lines: Vec<NoteSignature> = futures::future::join_all(calls)
            .await
            .into_iter()
            .flatten()
            .collect();
        if lines.len() < self.k {
            tracing::debug!(
                size = cp.size,
                got = lines.len(),
                k = self.k,
                "not enough cosignatures yet"
            );
            return None;
        }
        let mut note = cp.note.clone();
        for l in &lines {
            note.push_str(&l.to_line());
        }
        Some(StoredCheckpoint {
            note,
            size: cp.size,
            root: cp.root,
            cosignatures: lines.len() as u32,
        })
    }

    async fn ask(
        &self,
        node: &LogContext,
        w: &Witness,
        cp: &StoredCheckpoint,
        body: &str,
    ) -> Option<NoteSignature> {
        let st = *w.state.lock().ok()?;
        let now = node.clock.now_ms();
        if st.retry_at.is_some_and(|t| now < t) {
            return None;
        }
        let mut known = st.known_size;
        // A conflict tells us the witness's size; one more try with the right proof.
        for _ in 0..3 {
            if known > cp.size {
                tracing::warn!(witness = %w.endpoint, known, size = cp.size, "witness holds a larger tree than ours");
                self.failed(w, known, now);
                return None;
            }
            let proof = if known == 0 {
                Vec::new()
            } else {
                match super::consistency_proof(node.ledger.store(), known, cp.size) {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::error!(error = %e, "consistency proof");
                        return None;
                    }
                }
            };
            let req = AddCheckpointRequest {
                old_size: known,
                consistency_proof: proof.iter().map(|h| h.to_vec().into()).collect(),
                checkpoint: cp.note.clone(),
            };
            match w.transport.add_checkpoint(req).await {
                Ok(text) => {
                    let found = text
                        .lines()
                        .filter_map(|l| NoteSignature::parse_line(l).ok())
                        .find_map(|sig| {
                            verify_cosignature(&w.verifier, body, &sig)
                                .ok()
                                .map(|_| sig)
                        });
                    match found {
                        Some(sig) => {
                            self.succeeded(node, w, cp.size).await;
                            return Some(sig);
                        }
                        None => {
                            tracing::warn!(witness = %w.endpoint, "witness answered without a valid cosignature");
                            self.failed(w, known, now);
                            return None;
                        }
                    }
                }
                Err(WitnessCall::Conflict(held)) => match held {
                    Some(h) if h != known => known = h,
                    _ => {
                        self.failed(w, known, now);
                        return None;
                    }
                },
                Err(WitnessCall::Failed(e)) => {
                    tracing::warn!(witness = %w.endpoint, error = %e, "add-checkpoint failed");
                    self.failed(w, known, now);
                    return None;
                }
            }
        }
        self.failed(w, known, now);
        None
    }

    async fn succeeded(&self, node: &LogContext, w: &Witness, size: u64) {
        if let Ok(mut s) = w.state.lock() {
            *s = State {
                known_size: size,
                failures: 0,
                retry_at: None,
            };
        }
        // The remembered size only spares a round trip after a restart (a wrong one is
        // corrected by the witness's ABORTED `tlog-size` answer). Its synced write runs off the
        // async workers (issue 14) but is awaited, so the witnesses' answers, which are joined
        // on one task, do not queue behind each other's fsync and a simulated crash (accord-sim)
        // never races it.
        let (store, key) = (node.ledger.store().clone(), size_key(&w.verifier));
        let wrote =
            tokio::task::spawn_blocking(move || store.put_meta(&key, &size.to_be_bytes())).await;
        if let Ok(Err(e)) = wrote {
            tracing::warn!(error = %e, "remember witness size");
        }
    }

    fn failed(&self, w: &Witness, known: u64, now: i64) {
        if let Some(m) = &self.metrics {
            m.cosignature_failed(w.verifier.name());
        }
        if let Ok(mut s) = w.state.lock() {
            s.known_size = known;
            s.failures = s.failures.saturating_add(1);
            // 0.5 s, 1 s, 2 s, ... capped at 60 s, with jitter so witnesses are not hit in step.
            let base = 500u64.saturating_mul(1 << s.failures.min(7)).min(60_000);
            // The jitter derives from the witness, the failure count and the time (on the node's
            // clock), so a simulation on a driven clock replays exactly.
            let mut h = (now as u64) ^ u64::from(s.failures).rotate_left(32);
            for b in w.verifier.key_id() {
                h = h.rotate_left(8) ^ u64::from(b);
            }
            h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let jitter = (h >> 11) % (base / 4 + 1);
            s.retry_at = Some(now.saturating_add((base / 2 + jitter) as i64));
        }
    }
}

/// A verified subtree cosignature (c2sp.org/tlog-witness "sign-subtree").
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(dead_code)] // the node's API for asking subtree cosignatures; not yet called (issue 17)
pub struct SubtreeCosignature {
    /// The subtree's first leaf.
    pub start: u64,
    /// One past its last leaf.
    pub end: u64,
    /// `MTH(D[start:end])`.
    pub hash: [u8; 32],
    /// The witness's `subtree/v1` line (timestamp 0).
    pub line: NoteSignature,
}

impl WitnessClient {
    /// Asks every witness configured with an ML-DSA-44 key to co-sign the (at most two) subtrees
    /// that cover `[start, end)` (draft-ietf-plants-merkle-tree-certs, "Selecting Two
    /// Subtrees") of `cp`, a checkpoint those witnesses co-signed (e.g. the witnessed one), e.g.
    /// the records of one commitment envelope or one run. Returns the lines that verified;
    /// witnesses that fail are skipped (logged), as in [`WitnessClient::witness`].
    #[allow(dead_code)]
    pub async fn subtree_cosignatures(
        &self,
        store: &Store,
        cp: &StoredCheckpoint,
        start: u64,
        end: u64,
    ) -> Result<Vec<SubtreeCosignature>, Error> {
        if end > cp.size {
            return Err(Error::invalid(
                "end",
                format!("{end} is beyond the checkpoint size {}", cp.size),
            ));
        }
        let body = accord_proto::note::Note::parse(cp.note.as_bytes())
            .map_err(|e| Error::Internal(format!("stored checkpoint: {e}")))?;
        let origin = accord_proto::checkpoint::Checkpoint::parse(body.text())
            .map_err(|e| Error::Internal(format!("stored checkpoint: {e}")))?
            .origin;
        let (left, right) = merkle::covering_subtrees(start, end)
            .map_err(|e| Error::invalid("start", e.to_string()))?;
        let mut out = Vec::new();
        for (s, e) in [left, right] {
            if s == e {
                continue;
            }
            let nodes = crate::ledger::TreeNodes(store);
            let hash = merkle::subtree_hash(&nodes, s, e)
                .map_err(|e| Error::FailedPrecondition(e.to_string()))?;
            let proof = merkle::subtree_consistency_proof(&nodes, s, e, cp.size)
                .map_err(|e| Error::FailedPrecondition(e.to_string()))?;
            for w in self
                .witnesses
                .iter()
                .filter(|w| w.verifier.kind() == KeyKind::MlDsa44)
            {
                let req = SignSubtreeRequest {
                    start: s,
                    end: e,
                    subtree_hash: hash.to_vec().into(),
                    consistency_proof: proof.iter().map(|h| h.to_vec().into()).collect(),
                    checkpoint: cp.note.clone(),
                };
                let text = match w.transport.sign_subtree(req).await {
                    Ok(t) => t,
                    Err(st) => {
                        tracing::warn!(witness = %w.endpoint, error = ?st, "sign-subtree failed");
                        continue;
                    }
                };
                let found = text
                    .lines()
                    .filter_map(|l| NoteSignature::parse_line(l).ok())
                    .find(|sig| {
                        verify_subtree_cosignature(&w.verifier, &origin, s, e, &hash, sig).is_ok()
                    });
                match found {
                    Some(line) => out.push(SubtreeCosignature {
                        start: s,
                        end: e,
                        hash,
                        line,
                    }),
                    None => {
                        tracing::warn!(witness = %w.endpoint, "sign-subtree answer without a valid cosignature")
                    }
                }
            }
        }
        Ok(out)
    }
}
