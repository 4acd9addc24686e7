//! The world of one run: three nodes, two witnesses, the network, the clock, the workload, and
//! the scheduler that picks each step from the seed.

use crate::fixture::{self, ORGS, Org, WITNESSES};
use crate::net::{Faults, Net, SimPeers, SimWitness};
use crate::workload::{Plan, Stage};
use crate::{Options, Report, SimError};
use accord_node::clock::{Clock, ManualClock};
use accord_node::embed::{EmbeddedNode, WitnessEndpoint, WitnessTransport};
use accord_proto::signing;
use accord_witness::{Limits, LogConfig, Witness, WitnessOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The simulated time the run starts at (2026-01-01).
const START_MS: i64 = 1_767_225_600_000;

/// One acknowledged record: its id and sequence.
pub type Acked = ([u8; 32], u64);

/// Everything of one run.
pub struct World {
    pub(crate) seed: u64,
    rng: StdRng,
    pub(crate) net: Arc<Net>,
    clock: Clock,
    manual: Arc<ManualClock>,
    wclock: Arc<accord_witness::ManualClock>,
    pub(crate) orgs: Vec<Org>,
    tmp: tempfile::TempDir,
    pub(crate) acked: BTreeMap<usize, Vec<Acked>>,
    pub(crate) crashes: usize,
    pub(crate) plans: Vec<Plan>,
    down: BTreeSet<usize>,
    witness_sizes: BTreeMap<(String, String), u64>,
}

impl World {
    /// Runs `seed`: set-up, the faulty phase, healing, quiescence, the invariants.
    pub async fn run(seed: u64, opts: Options, forge: bool) -> Result<Report, SimError> {
        let mut w = World::new(seed).await?;
        if forge {
            w.acked.entry(0).or_default().push(([0xAB; 32], 0));
        }
        for step in 0..opts.steps {
            w.step(step, &opts).await?;
        }
        w.heal().await?;
        w.quiesce().await?;
        crate::check::all(&w).await;
        let accepted = w
            .plans
            .iter()
            .filter(|p| {
                p.orgs().iter().all(|&i| {
                    w.net
                        .node(ORGS[i].0)
                        .and_then(|n| n.commitment(&p.id))
                        .is_some_and(|c| c.state == "accepted")
                })
            })
            .count();
        let report = Report {
            seed,
            violations: w.net.violations(),
            trace: w.net.trace(),
            acked: w.acked.values().map(Vec::len).sum(),
            crashes: w.crashes,
            accepted,
            deliveries: w.net.checked(),
            net: w.net.stats(),
        };
        w.shutdown().await;
        Ok(report)
    }

    async fn new(seed: u64) -> Result<World, SimError> {
        let mut rng = StdRng::seed_from_u64(seed);
        // On a RAM file system when there is one: a crash here is a process crash (what was
        // written survives, synced or not), so synced writes need not wait for a disk.
        // `SIM_DIR` overrides.
        let base = std::env::var_os("SIM_DIR")
            .map(std::path::PathBuf::from)
            .or_else(|| Some(std::path::PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
            .unwrap_or_else(std::env::temp_dir);
        let tmp = tempfile::Builder::new()
            .prefix("accord-sim-")
            .tempdir_in(base)
            .map_err(|e| SimError::Setup(format!("temporary directory: {e}")))?;
        let k = rng.gen_range(1..=2);
        let orgs = fixture::orgs(tmp.path(), k)?;
        let chains = orgs
            .iter()
            .map(|o| (o.name.clone(), o.chain.clone()))
            .collect();
        let net = Arc::new(Net::new(seed, chains));
        let (clock, manual) = Clock::manual(START_MS);
        let wclock = Arc::new(accord_witness::ManualClock::new((START_MS / 1000) as u64));
        let w = World {
            seed,
            rng,
            net,
            clock,
            manual,
            wclock,
            orgs,
            tmp,
            acked: BTreeMap::new(),
            crashes: 0,
            plans: Vec::new(),
            down: BTreeSet::new(),
            witness_sizes: BTreeMap::new(),
        };
        w.net.note(&format!("seed {seed} k {k}"));
        for (j, &name) in WITNESSES.iter().enumerate() {
            let wt = w.open_witness(j)?;
            w.net.set_witness(name, Some(wt));
        }
        for (i, &(org, _)) in ORGS.iter().enumerate() {
            let n = w.open_node(i).await?;
            w.net.set_node(org, Some(n));
        }
        Ok(w)
    }

    fn open_witness(&self, j: usize) -> Result<Arc<Witness>, SimError> {
        let name = WITNESSES[j];
        let key = fixture::witness_key(name)?;
        let logs = self
            .orgs
            .iter()
            .map(|o| LogConfig::from_verifiers(&o.config.origin(), vec![o.node_key.verifier()]))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SimError::Setup(format!("witness logs: {e}")))?;
        Witness::open(WitnessOptions {
            data_dir: self.tmp.path().join(name),
            cosigners: vec![key],
            logs,
            limits: Limits::default(),
            clock: self.wclock.clone(),
        })
        .map(Arc::new)
        .map_err(|e| SimError::Open {
            what: name.into(),
            detail: e.to_string(),
        })
    }

    async fn open_node(&self, i: usize) -> Result<Arc<EmbeddedNode>, SimError> {
        let o = &self.orgs[i];
        let peers = Arc::new(SimPeers {
            net: self.net.clone(),
            from: o.name.clone(),
        });
        let mut witnesses: Vec<WitnessEndpoint> = Vec::new();
        for name in WITNESSES {
            let key = fixture::witness_key(name)?;
            let t: Arc<dyn WitnessTransport> = Arc::new(SimWitness {
                net: self.net.clone(),
                from: o.name.clone(),
                witness: name.to_string(),
            });
            witnesses.push((key.verifier(), name.to_string(), t));
        }
        EmbeddedNode::open(o.config.clone(), self.clock.clone(), peers, witnesses)
            .await
            .map(Arc::new)
            .map_err(|e| SimError::Open {
                what: o.name.clone(),
                detail: e.to_string(),
            })
    }

    /// The node of organisation `i`, if up.
    pub(crate) fn node(&self, i: usize) -> Option<Arc<EmbeddedNode>> {
        self.net.node(ORGS[i].0)
    }

    fn other(&mut self, i: usize) -> usize {
        (i + 1 + self.rng.gen_range(0..ORGS.len() - 1)) % ORGS.len()
    }

    fn advance(&mut self, ms: i64) {
        self.manual.advance(ms);
        self.wclock.set((self.clock.now_ms() / 1000) as u64);
    }

    async fn step(&mut self, step: usize, opts: &Options) -> Result<(), SimError> {
        let dt = self.rng.gen_range(1..=400);
        self.advance(dt);
        let r = self.rng.gen_range(0..100);
        let i = self.rng.gen_range(0..ORGS.len());
        let j = self.other(i);
        let (a, b) = (ORGS[i].0, ORGS[j].0);
        self.net.note(&format!("step {step} r {r} {a} {b}"));
        match r {
            0..=34 => self.work(opts).await,
            35..=39 => {
                if let Some(n) = self.node(i) {
                    self.expect(a, "route", n.route().await);
                }
            }
            40..=57 => {
                if let Some(n) = self.node(i) {
                    let res = n.deliver_to(b).await;
                    self.net.note(&format!("deliver {a}->{b} {res:?}"));
                }
            }
            58..=62 => {
                if let Some(n) = self.node(i) {
                    let res = n.poll_receipts(b).await;
                    self.net.note(&format!("poll {a}->{b} {}", res.is_ok()));
                }
            }
            63..=72 => {
                if let Some(n) = self.node(i) {
                    self.expect(a, "checkpoint", n.checkpoint().await);
                }
            }
            73..=77 => {
                if let Some(n) = self.node(i) {
                    self.expect(a, "quarantine", n.quarantine().await);
                }
            }
            78..=79 => {
                if let Some(n) = self.node(i) {
                    let written = n.service_tick().await;
                    self.net.note(&format!("tick {a} {written}"));
                }
            }
            80..=84 => {
                let mut held = self.net.take_delayed();
                if !held.is_empty() {
                    let d = held.remove(self.rng.gen_range(0..held.len()));
                    for rest in held {
                        // Put the others back, in order.
                        self.net.set_delayed_back(rest);
                    }
                    self.net.deliver_late(d).await;
                }
            }
            85..=88 => {
                let ends: Vec<&str> = ORGS.iter().map(|o| o.0).chain(WITNESSES).collect();
                let x = ends[self.rng.gen_range(0..ends.len())];
                let y = ends[self.rng.gen_range(0..ends.len())];
                let cut = self.rng.gen_bool(0.6);
                if x != y {
                    self.net.set_cut(x, y, cut);
                }
            }
            89..=91 => {
                let restart_now = self.rng.gen_bool(0.5);
                self.crash(i).await?;
                if restart_now {
                    self.restart(i).await?;
                }
            }
            92..=93 => {
                if let Some(&d) = self.down.iter().next() {
                    self.restart(d).await?;
                }
            }
            94 => {
                let k = self.rng.gen_range(0..WITNESSES.len());
                self.crash_witness(k).await?;
            }
            _ => {
                let f = Faults {
                    loss: self.rng.gen_range(0.0..0.3),
                    delay: self.rng.gen_range(0.0..0.2),
                    dup: self.rng.gen_range(0.0..0.2),
                    lose_answer: self.rng.gen_range(0.0..0.2),
                };
                self.net.note(&format!("faults {f:?}"));
                self.net.set_faults(f);
            }
        }
        self.witness_sizes_grow().await;
        Ok(())
    }

    fn expect<T, E: std::fmt::Display>(&self, org: &str, what: &str, r: Result<T, E>) {
        if let Err(e) = r {
            self.net.violation(format!("{org}: {what} failed: {e}"));
        }
    }

    /// One workload record: a new commitment, or the next record of an open one.
    async fn work(&mut self, opts: &Options) {
        let open: Vec<usize> = (0..self.plans.len())
            .filter(|&p| self.plans[p].stage != Stage::Done)
            .collect();
        let new =
            self.plans.len() < opts.commitments && (open.is_empty() || self.rng.gen_bool(0.3));
        let p = if new {
            let obligee = self.rng.gen_range(0..ORGS.len());
            let obligor = self.other(obligee);
            let third = (0..ORGS.len()).find(|&x| x != obligee && x != obligor);
            let principal = third.filter(|_| self.rng.gen_bool(0.35));
            self.plans.push(Plan {
                id: format!("c{}-{}", self.seed, self.plans.len()),
                obligee,
                obligor,
                principal,
                stage: Stage::Request,
            });
            self.plans.len() - 1
        } else if open.is_empty() {
            return;
        } else {
            open[self.rng.gen_range(0..open.len())]
        };
        let author = self.plans[p].author();
        let Some(node) = self.node(author) else {
            return;
        };
        let view = node.commitment(&self.plans[p].id);
        let in_turn = self.plans[p].in_turn(view.as_ref());
        let out_of_turn = self.rng.gen_bool(0.1);
        let nonce: [u8; 8] = self.rng.r#gen();
        if !in_turn && !out_of_turn {
            return;
        }
        let Some(record) = self.plans[p].record(view.as_ref(), self.clock.now_ms(), nonce) else {
            return;
        };
        let signed = signing::sign_record(&self.orgs[author].party_key, &record);
        let id = signing::record_id(&signed.payload_type, &signed.payload);
        match node.submit(signed).await {
            Ok(resp) => {
                let applied = resp.outcome.as_ref().is_some_and(|o| o.applied);
                self.net.note(&format!(
                    "submit {} {:?} seq {} applied {applied}",
                    self.plans[p].id, self.plans[p].stage, resp.sequence
                ));
                self.acked
                    .entry(author)
                    .or_default()
                    .push((id, resp.sequence));
                if applied && in_turn {
                    self.plans[p].advance();
                }
            }
            Err(s) => self.net.violation(format!(
                "{}: the record door refused a well-formed record: {:?} {}",
                ORGS[author].0,
                s.code(),
                s.message()
            )),
        }
    }

    /// Drops a node's memory (its store stays) and takes it off the network.
    async fn crash(&mut self, i: usize) -> Result<(), SimError> {
        let Some(n) = self.net.take_node(ORGS[i].0) else {
            return Ok(());
        };
        self.crashes += 1;
        match Arc::try_unwrap(n) {
            Ok(n) => n.close().await,
            Err(_) => {
                return Err(SimError::Setup(format!(
                    "{} is still referenced between steps",
                    ORGS[i].0
                )));
            }
        }
        self.down.insert(i);
        Ok(())
    }

    /// Reopens a crashed node from its store and checks that every record it acknowledged is
    /// there.
    async fn restart(&mut self, i: usize) -> Result<(), SimError> {
        if !self.down.remove(&i) {
            return Ok(());
        }
        let n = self.open_node(i).await?;
        crate::check::acked_present(self, i, &n);
        self.net.set_node(ORGS[i].0, Some(n));
        Ok(())
    }

    async fn crash_witness(&mut self, k: usize) -> Result<(), SimError> {
        let name = WITNESSES[k];
        if let Some(w) = self.net.witness(name) {
            self.net.set_witness(name, None);
            let _ = w.flush();
            drop(w);
        }
        let w = self.open_witness(k)?;
        self.net.set_witness(name, Some(w));
        Ok(())
    }

    /// No witness's size for any log goes back (also across its restarts).
    async fn witness_sizes_grow(&mut self) {
        for name in WITNESSES {
            let Some(w) = self.net.witness(name) else {
                continue;
            };
            for o in &self.orgs {
                let origin = o.config.origin();
                let size = match w.latest(&origin).await {
                    Ok(l) => l.map_or(0, |l| l.size),
                    Err(e) => {
                        self.net
                            .violation(format!("witness {name}: latest {origin}: {e}"));
                        continue;
                    }
                };
                let key = (name.to_string(), origin.clone());
                let before = self.witness_sizes.get(&key).copied().unwrap_or(0);
                if size < before {
                    self.net.violation(format!(
                        "witness {name} went back for {origin}: {before} -> {size}"
                    ));
                }
                self.witness_sizes.insert(key, size.max(before));
            }
        }
    }

    /// Heals the network, restarts every node, delivers what was held back.
    async fn heal(&mut self) -> Result<(), SimError> {
        self.net.heal();
        let down: Vec<usize> = self.down.iter().copied().collect();
        for i in down {
            self.restart(i).await?;
        }
        for d in self.net.take_delayed() {
            self.net.deliver_late(d).await;
        }
        Ok(())
    }

    fn fingerprint(&self) -> Vec<u64> {
        let mut f = Vec::new();
        for i in 0..ORGS.len() {
            if let Some(n) = self.node(i) {
                f.push(n.ledger_len());
                for p in n.peers() {
                    f.push(n.queued(&p));
                }
                f.push(n.quarantined().unwrap_or(u64::MAX as usize) as u64);
            }
        }
        f
    }

    /// Runs every node's steps until nothing changes (at most 40 rounds).
    async fn quiesce(&mut self) -> Result<(), SimError> {
        for round in 0..40 {
            self.advance(1000);
            let before = self.fingerprint();
            for (i, &(org, _)) in ORGS.iter().enumerate() {
                let Some(n) = self.node(i) else { continue };
                self.expect(org, "route", n.route().await);
                self.expect(org, "quarantine", n.quarantine().await);
            }
            for (i, &(org, _)) in ORGS.iter().enumerate() {
                let Some(n) = self.node(i) else { continue };
                for p in n.peers() {
                    for _ in 0..50 {
                        match n.deliver_to(&p).await {
                            Ok(0) => break,
                            Ok(_) => {}
                            Err(e) => {
                                self.net.violation(format!(
                                    "{} -> {p}: delivery failed on a healed network: {e}",
                                    org
                                ));
                                break;
                            }
                        }
                    }
                }
            }
            for (i, &(org, _)) in ORGS.iter().enumerate() {
                let Some(n) = self.node(i) else { continue };
                self.expect(org, "checkpoint", n.checkpoint().await);
                for p in n.peers() {
                    self.expect(org, "poll", n.poll_receipts(&p).await);
                }
            }
            let after = self.fingerprint();
            let empty = (0..ORGS.len())
                .filter_map(|i| self.node(i))
                .all(|n| n.peers().iter().all(|p| n.queued(p) == 0));
            self.net.note(&format!("quiesce {round} {after:?}"));
            if before == after && empty {
                return Ok(());
            }
        }
        self.net
            .violation("the federation is not quiet after 40 rounds on a healed network".into());
        Ok(())
    }

    async fn shutdown(self) {
        for &(org, _) in &ORGS {
            if let Some(n) = self.net.take_node(org)
                && let Ok(n) = Arc::try_unwrap(n)
            {
                n.close().await;
            }
        }
        for name in WITNESSES {
            self.net.set_witness(name, None);
        }
        drop(self.tmp);
    }
}
