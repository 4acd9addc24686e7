//! The simulated network: the in-memory [`PeerTransport`] and [`WitnessTransport`] the nodes
//! are opened with. Every message may be lost, delayed (kept and delivered by a later step, so
//! it arrives after newer ones), duplicated, or have its answer lost; links may be cut
//! (partitions) and nodes or witnesses may be down. Each choice is drawn from the run's seeded
//! RNG *before* the call's first await, so a run replays exactly.

use accord_node::embed::{EmbeddedNode, PeerTransport, WitnessCall, WitnessTransport};
use accord_proto::pb::federation::v1::{
    DeliverRequest, DeliverResponse, GetReceiptsRequest, GetReceiptsResponse,
};
use accord_proto::pb::log::v1::{GetConsistencyProofRequest, GetConsistencyProofResponse};
use accord_proto::pb::witness::v1::{AddCheckpointRequest, SignSubtreeRequest};
use accord_witness::{AddCheckpoint, Witness};
use futures::future::BoxFuture;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rustls::pki_types::CertificateDer;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use tonic::Status;

/// Fault probabilities of the network (0 when healed).
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// A request never arrives.
    pub loss: f64,
    /// A request is held back and delivered later.
    pub delay: f64,
    /// A request arrives twice.
    pub dup: f64,
    /// The request is handled but the answer is lost.
    pub lose_answer: f64,
}

/// An envelope held back by the network.
#[derive(Debug, Clone)]
pub struct Delayed {
    /// Sender.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// The request.
    pub req: DeliverRequest,
}

/// Counters of what the network did.
#[derive(Debug, Default, Clone, Copy)]
pub struct NetStats {
    /// Requests delivered (envelopes, receipt polls, proofs, checkpoints).
    pub delivered: u64,
    /// Requests lost.
    pub lost: u64,
    /// Requests refused by a partition or a down node.
    pub cut: u64,
    /// Envelopes held back.
    pub delayed: u64,
    /// Duplicated requests.
    pub duplicated: u64,
    /// Answers lost.
    pub answers_lost: u64,
}

enum Fate {
    Cut,
    Lost,
    Delay,
    Deliver { dup: bool, lose_answer: bool },
}

/// One direction of one link: its own RNG and trace, so that calls on different links (a
/// node's witnesses are asked concurrently) never shift each other's draws or events.
struct Link {
    rng: StdRng,
    trace: Sha256,
}

/// The network and everything on it.
pub struct Net {
    seed: u64,
    links: Mutex<BTreeMap<(String, String), Link>>,
    faults: Mutex<Faults>,
    cut: Mutex<BTreeSet<(String, String)>>,
    nodes: Mutex<BTreeMap<String, Arc<EmbeddedNode>>>,
    witnesses: Mutex<BTreeMap<String, Arc<Witness>>>,
    chains: BTreeMap<String, Vec<CertificateDer<'static>>>,
    delayed: Mutex<Vec<Delayed>>,
    /// (witness, origin, size) → the root it co-signed.
    cosigned: Mutex<BTreeMap<(String, String, u64), [u8; 32]>>,
    violations: Mutex<Vec<String>>,
    checked: std::sync::atomic::AtomicU64,
    trace: Mutex<Sha256>,
    stats: Mutex<NetStats>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn pair(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

impl Net {
    /// A network whose choices come from `seed`; `chains` are the organisations' TLS client
    /// certificate chains.
    pub fn new(seed: u64, chains: BTreeMap<String, Vec<CertificateDer<'static>>>) -> Net {
        Net {
            seed,
            links: Mutex::new(BTreeMap::new()),
            faults: Mutex::new(Faults::default()),
            cut: Mutex::new(BTreeSet::new()),
            nodes: Mutex::new(BTreeMap::new()),
            witnesses: Mutex::new(BTreeMap::new()),
            chains,
            delayed: Mutex::new(Vec::new()),
            cosigned: Mutex::new(BTreeMap::new()),
            violations: Mutex::new(Vec::new()),
            checked: std::sync::atomic::AtomicU64::new(0),
            trace: Mutex::new(Sha256::new()),
            stats: Mutex::new(NetStats::default()),
        }
    }

    /// Sets the fault probabilities.
    pub fn set_faults(&self, f: Faults) {
        *lock(&self.faults) = f;
    }

    /// Cuts or heals the link between `a` and `b` (organisations or witnesses).
    pub fn set_cut(&self, a: &str, b: &str, cut: bool) {
        self.note(&format!("cut {a} {b} {cut}"));
        let mut c = lock(&self.cut);
        if cut {
            c.insert(pair(a, b));
        } else {
            c.remove(&pair(a, b));
        }
    }

    /// Heals every link.
    pub fn heal(&self) {
        self.note("heal");
        lock(&self.cut).clear();
        self.set_faults(Faults::default());
    }

    /// Puts a node on the network (`None`: down).
    pub fn set_node(&self, name: &str, node: Option<Arc<EmbeddedNode>>) {
        self.note(&format!("node {name} {}", node.is_some()));
        let mut n = lock(&self.nodes);
        match node {
            Some(x) => n.insert(name.to_string(), x),
            None => n.remove(name),
        };
    }

    /// The node, if up.
    pub fn node(&self, name: &str) -> Option<Arc<EmbeddedNode>> {
        lock(&self.nodes).get(name).cloned()
    }

    /// Takes a node off the network, returning it.
    pub fn take_node(&self, name: &str) -> Option<Arc<EmbeddedNode>> {
        self.note(&format!("take {name}"));
        lock(&self.nodes).remove(name)
    }

    /// Puts a witness on the network (`None`: down).
    pub fn set_witness(&self, name: &str, w: Option<Arc<Witness>>) {
        self.note(&format!("witness {name} {}", w.is_some()));
        let mut m = lock(&self.witnesses);
        match w {
            Some(x) => m.insert(name.to_string(), x),
            None => m.remove(name),
        };
    }

    /// The witness, if up.
    pub fn witness(&self, name: &str) -> Option<Arc<Witness>> {
        lock(&self.witnesses).get(name).cloned()
    }

    /// Adds an event to the run's trace (two runs of one seed must have equal traces).
    pub fn note(&self, event: &str) {
        let mut t = lock(&self.trace);
        t.update(event.as_bytes());
        t.update(b"\n");
    }

    /// The trace's hash so far: the world's events and every link's.
    pub fn trace(&self) -> [u8; 32] {
        let mut t = lock(&self.trace).clone();
        for ((from, to), l) in lock(&self.links).iter() {
            t.update(format!("{from}->{to}").as_bytes());
            t.update(l.trace.clone().finalize());
        }
        t.finalize().into()
    }

    /// Runs `f` on the link `from` → `to` (created on first use, its RNG seeded from the run's
    /// seed and the link's name).
    fn link<T>(&self, from: &str, to: &str, f: impl FnOnce(&mut Link) -> T) -> T {
        let mut links = lock(&self.links);
        let l = links
            .entry((from.to_string(), to.to_string()))
            .or_insert_with(|| {
                let h: [u8; 32] = Sha256::digest(format!("{}/{from}->{to}", self.seed)).into();
                let mut s = [0u8; 8];
                s.copy_from_slice(&h[..8]);
                Link {
                    rng: StdRng::seed_from_u64(u64::from_le_bytes(s)),
                    trace: Sha256::new(),
                }
            });
        f(l)
    }

    /// Adds an event to the trace of the link `from` → `to`.
    pub fn note_link(&self, from: &str, to: &str, event: &str) {
        self.link(from, to, |l| {
            l.trace.update(event.as_bytes());
            l.trace.update(b"\n");
        });
    }

    /// A broken invariant, kept for the report.
    pub fn violation(&self, v: String) {
        self.note(&format!("violation {v}"));
        lock(&self.violations).push(v);
    }

    /// Counts one peer record checked at its receiver (delivered, decided once, in order).
    pub fn checked_one(&self) {
        self.checked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Peer records checked at their receivers.
    pub fn checked(&self) -> u64 {
        self.checked.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The broken invariants so far.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.violations).clone()
    }

    /// What the network did.
    pub fn stats(&self) -> NetStats {
        *lock(&self.stats)
    }

    /// Every (witness, origin, size) co-signed, with its root.
    pub fn cosigned(&self) -> BTreeMap<(String, String, u64), [u8; 32]> {
        lock(&self.cosigned).clone()
    }

    /// Takes the held-back envelopes.
    pub fn take_delayed(&self) -> Vec<Delayed> {
        std::mem::take(&mut *lock(&self.delayed))
    }

    /// Holds an envelope back again (after [`Net::take_delayed`]).
    pub fn set_delayed_back(&self, d: Delayed) {
        lock(&self.delayed).push(d);
    }

    /// Envelopes held back now.
    pub fn delayed_len(&self) -> usize {
        lock(&self.delayed).len()
    }

    fn fate(&self, from: &str, to: &str, may_delay: bool) -> Fate {
        let f = *lock(&self.faults);
        let cut = lock(&self.cut).contains(&pair(from, to));
        // Draw every number whatever the outcome, so one choice never shifts the others.
        let (l, d, u, a): (f64, f64, f64, f64) = self.link(from, to, |l| {
            (l.rng.r#gen(), l.rng.r#gen(), l.rng.r#gen(), l.rng.r#gen())
        });
        let mut s = lock(&self.stats);
        let fate = if cut {
            s.cut += 1;
            Fate::Cut
        } else if l < f.loss {
            s.lost += 1;
            Fate::Lost
        } else if may_delay && d < f.delay {
            s.delayed += 1;
            Fate::Delay
        } else {
            s.delivered += 1;
            let dup = u < f.dup;
            let lose_answer = a < f.lose_answer;
            s.duplicated += u64::from(dup);
            s.answers_lost += u64::from(lose_answer);
            Fate::Deliver { dup, lose_answer }
        };
        drop(s);
        self.note_link(
            from,
            to,
            &match &fate {
                Fate::Cut => "cut".to_string(),
                Fate::Lost => "lost".to_string(),
                Fate::Delay => "delay".to_string(),
                Fate::Deliver { dup, lose_answer } => format!("ok dup={dup} lose={lose_answer}"),
            },
        );
        fate
    }

    fn chain(&self, org: &str) -> Vec<CertificateDer<'static>> {
        self.chains.get(org).cloned().unwrap_or_default()
    }

    /// Delivers a held-back envelope now (its answer goes nowhere).
    pub async fn deliver_late(&self, d: Delayed) {
        self.note(&format!("late {}->{}", d.from, d.to));
        if lock(&self.cut).contains(&pair(&d.from, &d.to)) {
            return;
        }
        if let Some(node) = self.node(&d.to) {
            let r = node.deliver(d.req, self.chain(&d.from)).await;
            self.note(&format!("late answer ok={}", r.is_ok()));
        }
    }
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net").finish()
    }
}

fn unavailable(what: &str) -> Status {
    Status::unavailable(format!("sim: {what}"))
}

/// An organisation's way to its peers over the [`Net`].
#[derive(Debug, Clone)]
pub struct SimPeers {
    /// The network.
    pub net: Arc<Net>,
    /// The organisation calling.
    pub from: String,
}

impl SimPeers {
    async fn call<T, F, Fut>(&self, to: String, fate: Fate, f: F) -> Result<T, Status>
    where
        F: Fn(Arc<EmbeddedNode>) -> Fut,
        Fut: std::future::Future<Output = Result<T, Status>>,
    {
        let (dup, lose_answer) = match fate {
            Fate::Cut => return Err(unavailable("partitioned")),
            Fate::Lost | Fate::Delay => return Err(unavailable("request lost")),
            Fate::Deliver { dup, lose_answer } => (dup, lose_answer),
        };
        let Some(node) = self.net.node(&to) else {
            return Err(unavailable("peer down"));
        };
        let r = f(node.clone()).await;
        let r = if dup { f(node).await } else { r };
        self.net
            .note_link(&self.from, &to, &format!("answer ok={}", r.is_ok()));
        if lose_answer {
            return Err(unavailable("answer lost"));
        }
        r
    }
}

impl PeerTransport for SimPeers {
    fn deliver(
        &self,
        peer: &accord_node::embed::Peer,
        req: DeliverRequest,
    ) -> BoxFuture<'_, Result<DeliverResponse, Status>> {
        let to = peer.name().to_string();
        let fate = self.net.fate(&self.from, &to, true);
        if matches!(fate, Fate::Delay) {
            lock(&self.net.delayed).push(Delayed {
                from: self.from.clone(),
                to: to.clone(),
                req: req.clone(),
            });
        }
        let chain = self.net.chain(&self.from);
        Box::pin(async move {
            self.call(to, fate, |n| {
                let (req, chain) = (req.clone(), chain.clone());
                async move { n.deliver(req, chain).await }
            })
            .await
        })
    }

    fn get_receipts(
        &self,
        peer: &accord_node::embed::Peer,
        req: GetReceiptsRequest,
    ) -> BoxFuture<'_, Result<GetReceiptsResponse, Status>> {
        let to = peer.name().to_string();
        let fate = self.net.fate(&self.from, &to, false);
        let chain = self.net.chain(&self.from);
        Box::pin(async move {
            self.call(to, fate, |n| {
                let (req, chain) = (req.clone(), chain.clone());
                async move { n.get_receipts(req, chain).await }
            })
            .await
        })
    }

    fn consistency_proof(
        &self,
        peer: &accord_node::embed::Peer,
        req: GetConsistencyProofRequest,
    ) -> BoxFuture<'_, Result<GetConsistencyProofResponse, Status>> {
        let to = peer.name().to_string();
        let fate = self.net.fate(&self.from, &to, false);
        Box::pin(async move {
            self.call(to, fate, |n| async move { n.consistency_proof(req).await })
                .await
        })
    }
}

/// An organisation's way to one witness over the [`Net`].
#[derive(Debug, Clone)]
pub struct SimWitness {
    /// The network.
    pub net: Arc<Net>,
    /// The organisation calling.
    pub from: String,
    /// The witness.
    pub witness: String,
}

fn call_error(s: Status) -> WitnessCall {
    if s.code() == tonic::Code::Aborted {
        return WitnessCall::Conflict(
            s.metadata()
                .get("tlog-size")
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok()),
        );
    }
    WitnessCall::Failed(format!("{:?}: {}", s.code(), s.message()))
}

impl WitnessTransport for SimWitness {
    fn add_checkpoint(
        &self,
        req: AddCheckpointRequest,
    ) -> BoxFuture<'_, Result<String, WitnessCall>> {
        let fate = self.net.fate(&self.from, &self.witness, false);
        Box::pin(async move {
            let lose_answer = match fate {
                Fate::Cut | Fate::Lost | Fate::Delay => {
                    return Err(WitnessCall::Failed("sim: unreachable".into()));
                }
                Fate::Deliver { lose_answer, .. } => lose_answer,
            };
            let Some(w) = self.net.witness(&self.witness) else {
                return Err(WitnessCall::Failed("sim: witness down".into()));
            };
            let parsed =
                AddCheckpoint::from_grpc(req.old_size, &req.consistency_proof, req.checkpoint)
                    .map_err(|e| call_error(e.into()))?;
            let r = w.add_checkpoint(parsed).await;
            let r = match r {
                Ok(c) => {
                    let key = (self.witness.clone(), c.origin.clone(), c.size);
                    let mut m = lock(&self.net.cosigned);
                    if let Some(root) = m.get(&key)
                        && *root != c.root
                    {
                        let v = format!(
                            "witness {} co-signed two roots for {} size {}",
                            self.witness, c.origin, c.size
                        );
                        drop(m);
                        self.net.violation(v);
                    } else {
                        m.insert(key, c.root);
                    }
                    Ok(c.cosignatures)
                }
                Err(e) => Err(call_error(e.into())),
            };
            self.net.note_link(
                &self.from,
                &self.witness,
                &format!("answer ok={}", r.is_ok()),
            );
            if lose_answer {
                return Err(WitnessCall::Failed("sim: answer lost".into()));
            }
            r
        })
    }

    fn sign_subtree(&self, _req: SignSubtreeRequest) -> BoxFuture<'_, Result<String, WitnessCall>> {
        Box::pin(async {
            Err(WitnessCall::Failed(
                "sim: sign-subtree is not simulated".into(),
            ))
        })
    }
}
