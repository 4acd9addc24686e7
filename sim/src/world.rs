//! The world of one run: three nodes, two witnesses, the network, the clock, the workload, and
//! the scheduler that picks each step from the seed.

use crate::fixture::{self, ORGS, Org, WITNESSES};
use crate::net::{Faults, Net, SimPeers, SimWitness};
use crate::workload::{Act, At, Class, Race, RaceKind};
use crate::workload::{Plan, Stage};
use crate::{Options, Report, SimError};
use accord_node::clock::{Clock, ManualClock, TimeSource};
use accord_node::embed::{EmbeddedNode, WitnessEndpoint, WitnessTransport};
use accord_proto::signing;
use accord_witness::{Limits, LogConfig, Witness, WitnessOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The simulated time the run starts at (2026-01-01).
const START_MS: i64 = 1_767_225_600_000;

/// The clock skew every node tolerates (`clock.skew_ms`, issue 26 item 2): two nodes' clocks
/// differ by at most this much in a run, so each node's offset is within half of it.
pub const SKEW_MS: i64 = 2_000;

/// A node's clock: the run's driven clock plus the node's fixed offset (issue 26 item 6(b)).
#[derive(Debug)]
pub struct OffsetClock {
    base: Arc<ManualClock>,
    offset: std::sync::atomic::AtomicI64,
}

impl OffsetClock {
    /// The offset in ms.
    pub fn offset(&self) -> i64 {
        self.offset.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Sets the offset (the checks read every node at one instant: offset 0).
    pub fn set_offset(&self, ms: i64) {
        self.offset.store(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl TimeSource for OffsetClock {
    fn now_ms(&self) -> i64 {
        self.base.now_ms() + self.offset()
    }
}

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
    /// Each node's clock (issue 26 item 6(b)).
    pub(crate) clocks: Vec<Arc<OffsetClock>>,
    /// The races' own RNG, so that the schedule of the faulty phase drawn from `rng` is the
    /// same with or without races (seeds 32, 43 and 90 stay the regression they were).
    race_rng: StdRng,
    /// The races (issue 26 item 6).
    pub(crate) races: Vec<Race>,
    /// The latest deadline a race set: quiescence runs past it on every clock.
    latest_deadline: i64,
    pub(crate) opts: Options,
}

impl World {
    /// Runs `seed`: set-up, the faulty phase, healing, quiescence, the invariants.
    pub async fn run(seed: u64, opts: Options, forge: bool) -> Result<Report, SimError> {
        let mut w = World::new(seed, opts).await?;
        if forge {
            w.acked.entry(0).or_default().push(([0xAB; 32], 0));
        }
        for step in 0..opts.steps {
            w.step(step, &opts).await?;
        }
        w.heal().await?;
        w.quiesce().await?;
        // Every node is read at one instant: the derived view depends on the reader's now.
        for c in &w.clocks {
            c.set_offset(0);
        }
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
            race_records: w.races.iter().map(|r| r.acked.len()).sum(),
            race_records_by_kind: w.races.iter().fold(Default::default(), |mut m, r| {
                let e: &mut (usize, usize) = m.entry(format!("{:?}", r.kind)).or_default();
                e.0 += 1;
                e.1 += r.acked.len();
                m
            }),
        };
        w.shutdown().await;
        Ok(report)
    }

    async fn new(seed: u64, opts: Options) -> Result<World, SimError> {
        let mut rng = StdRng::seed_from_u64(seed);
        // Issue 26: a separate stream ("26" in the high bits) for the races and clock offsets.
        let mut race_rng = StdRng::seed_from_u64(seed ^ 0x2626_0000_0000_0000);
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
        let skew = opts.classes & Class::Skew.bit() != 0 && opts.races > 0;
        let clocks: Vec<Arc<OffsetClock>> = (0..ORGS.len())
            .map(|_| {
                let offset = if skew {
                    race_rng.gen_range(-SKEW_MS / 2..=SKEW_MS / 2)
                } else {
                    0
                };
                Arc::new(OffsetClock {
                    base: manual.clone(),
                    offset: std::sync::atomic::AtomicI64::new(offset),
                })
            })
            .collect();
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
            clocks,
            race_rng,
            races: Vec::new(),
            latest_deadline: 0,
            opts,
        };
        let offsets: Vec<i64> = w.clocks.iter().map(|c| c.offset()).collect();
        w.net
            .note(&format!("seed {seed} k {k} offsets {offsets:?}"));
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
        let clock = Clock::from_source(self.clocks[i].clone());
        EmbeddedNode::open(o.config.clone(), clock, peers, witnesses)
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
        self.race_step().await;
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
        for i in [self.plans[p].obligee, self.plans[p].obligor] {
            if let Some(n) = self.node(i) {
                let v = n.commitment(&self.plans[p].id);
                self.plans[p].sync(v.as_ref());
            }
        }
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
        // Declared at the author's own clock (issue 26 item 6(b)).
        let now = self.clocks[author].now_ms();
        let Some(record) = self.plans[p].record(view.as_ref(), now, nonce) else {
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

    /// One step of the races (issue 26 item 6), from their own RNG: a new race, or the next
    /// move of an open one.
    async fn race_step(&mut self) {
        let kinds: Vec<(RaceKind, Class)> = RaceKind::ALL
            .iter()
            .flat_map(|&k| k.classes().iter().map(move |&c| (k, c)))
            .filter(|(_, c)| self.opts.classes & c.bit() != 0)
            .collect();
        if self.opts.races == 0 || kinds.is_empty() {
            return;
        }
        let r = self.race_rng.gen_range(0..100);
        let open: Vec<usize> = (0..self.races.len())
            .filter(|&k| self.races[k].next < self.races[k].moves().len())
            .collect();
        if self.races.len() < self.opts.races && (open.is_empty() || r < 20) {
            let (kind, class) = kinds[self.race_rng.gen_range(0..kinds.len())];
            let a = self.race_rng.gen_range(0..ORGS.len());
            let b = (a + 1 + self.race_rng.gen_range(0..ORGS.len() - 1)) % ORGS.len();
            let c = (0..ORGS.len()).find(|&x| x != a && x != b).unwrap_or(a);
            let delta = match class {
                Class::Skew => -self.race_rng.gen_range(500..=1500),
                _ => self.race_rng.gen_range(-1..=1),
            };
            let id = format!("r{}-{}", self.seed, self.races.len());
            self.net
                .note(&format!("race {id} {kind:?} {class:?} {a} {b} {c} {delta}"));
            self.races.push(Race {
                id,
                kind,
                class,
                a,
                b,
                c,
                next: 0,
                waited: 0,
                deadline: 0,
                delta,
                named: None,
                acked: Vec::new(),
            });
            self.race_move(self.races.len() - 1).await;
        } else if !open.is_empty() && r < 70 {
            let k = open[self.race_rng.gen_range(0..open.len())];
            self.race_move(k).await;
        }
    }

    /// The next move of race `k`, once what it needs holds (or after 40 tries: then its records
    /// go in anyway and the kernels decide).
    async fn race_move(&mut self, k: usize) {
        let moves = self.races[k].moves();
        let Some(m) = moves.get(self.races[k].next).cloned() else {
            return;
        };
        let id = self.races[k].id.clone();
        let ready = m.need.iter().all(|&(org, need)| {
            self.node(org)
                .is_some_and(|n| Race::meets(need, n.commitment(&id).as_ref()))
        });
        if !ready {
            self.races[k].waited += 1;
            if self.races[k].waited < 40 || self.races[k].next == 0 {
                return;
            }
        }
        if m.acts.iter().any(|a| self.node(a.org).is_none()) {
            return;
        }
        if let At::Deadline(org) = m.at {
            let target = self.races[k].deadline + self.races[k].delta;
            let now = self.clocks[org].now_ms();
            if target > now {
                self.advance(target - now);
            }
        }
        let mut acts: Vec<Act> = m.acts.clone();
        if acts.len() > 1 && self.race_rng.gen_bool(0.5) {
            acts.reverse();
        }
        for (j, act) in acts.iter().enumerate() {
            if j > 0 {
                // Within the same instant or a few ms apart, with no delivery in between.
                let gap = self.race_rng.gen_range(0..=3);
                if gap > 0 {
                    self.advance(gap);
                }
            }
            let Some(node) = self.node(act.org) else {
                continue;
            };
            let now = self.clocks[act.org].now_ms();
            if j == 0
                && let Some(d) = m.sets_deadline
            {
                self.races[k].deadline = now + d;
                self.latest_deadline = self.latest_deadline.max(now + d);
            }
            let view = node.commitment(&id);
            let nonce: [u8; 8] = self.race_rng.r#gen();
            let record = self.races[k].record(*act, view.as_ref(), now, nonce);
            let signed = signing::sign_record(&self.orgs[act.org].party_key, &record);
            let rid = signing::record_id(&signed.payload_type, &signed.payload);
            match node.submit(signed).await {
                Ok(resp) => {
                    let applied = resp.outcome.as_ref().is_some_and(|o| o.applied);
                    let code = resp
                        .outcome
                        .as_ref()
                        .map_or("", |o| o.rejection_code.as_str());
                    self.net.note(&format!(
                        "race {id} {:?} by {} seq {} applied {applied} {code}",
                        act.op, ORGS[act.org].0, resp.sequence
                    ));
                    self.acked
                        .entry(act.org)
                        .or_default()
                        .push((rid, resp.sequence));
                    self.races[k].acked.push((act.org, rid));
                    if Race::names(act.op) {
                        self.races[k].named = Some(rid.to_vec());
                    }
                }
                Err(s) => {
                    self.net.note(&format!(
                        "race {id} {:?} by {} refused {:?} {}",
                        act.op,
                        ORGS[act.org].0,
                        s.code(),
                        s.message()
                    ));
                    // Declared at its author's own node clock: within any skew tolerance.
                    if s.message().contains("clock_skew") {
                        self.net.violation(format!(
                            "{}: the record door refused a record declared at its own clock: {}",
                            ORGS[act.org].0,
                            s.message()
                        ));
                    }
                }
            }
        }
        if m.tick {
            let mut order: Vec<usize> = (0..ORGS.len()).collect();
            for x in (1..order.len()).rev() {
                order.swap(x, self.race_rng.gen_range(0..=x));
            }
            for i in order {
                let gap = self.race_rng.gen_range(0..=1);
                if gap > 0 {
                    self.advance(gap);
                }
                if let Some(n) = self.node(i) {
                    let written = n.service_tick().await;
                    self.net.note(&format!("race tick {} {written}", ORGS[i].0));
                }
            }
        }
        // Hand the records to the network (it may still lose or hold them).
        let mut authors: Vec<usize> = acts.iter().map(|a| a.org).collect();
        authors.sort_unstable();
        authors.dedup();
        for i in authors {
            let Some(n) = self.node(i) else { continue };
            self.expect(ORGS[i].0, "route", n.route().await);
            for p in n.peers() {
                let res = n.deliver_to(&p).await;
                self.net
                    .note(&format!("race deliver {}->{p} {res:?}", ORGS[i].0));
            }
        }
        self.races[k].next += 1;
        self.races[k].waited = 0;
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
                // The clock-driven records (issue 26 item 1) are part of quiescence.
                let written = n.service_tick().await;
                self.net.note(&format!("quiesce tick {org} {written}"));
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
            // Past every race's deadline on every node's clock, with a round to spare.
            let past = self.clock.now_ms() > self.latest_deadline + SKEW_MS + 1000;
            if before == after && empty && past {
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
