//! `accord-sim`: a deterministic simulation of Accord federation (issue 16, item 2).
//!
//! Three organisations' nodes ([`fixture::ORGS`]) and two witnesses run in one process, each
//! on its own RocksDB directory, on one driven clock, over the in-memory network of [`net`]
//! that loses, delays, duplicates and reorders messages, loses answers and partitions links.
//! Nothing runs in the background: the [`world::World`] drives every node step by step
//! through `accord_node::embed` (the record door, routing, one delivery, a receipt poll, a
//! checkpoint round, the quarantine's work, a Work service tick), crashes nodes (their memory
//! is dropped and they reopen from their directory) and witnesses, and submits a workload of
//! cross-organisation commitments through their lifecycle ([`workload`]). Every choice comes
//! from the seed, so a run replays exactly.
//!
//! After the faulty phase the network heals and the world runs until it is quiet; then
//! [`check`] verifies the invariants: every acknowledged record is in its author's ledger at
//! its sequence (also after every crash); each record reaches each organisation that needs it
//! and is decided there exactly once (one opening admission declaration), in its author's
//! commitment order; every organisation derives the same state for every shared commitment;
//! stored receipts verify; no witness co-signs two roots for one size, and no witness's size
//! goes back.
//!
//! Issue 26 (item 6) adds races ([`workload::Race`]): deadlines landing within a tick of a
//! party's record, per-node clock offsets, organisations joining mid-way and concurrent
//! conflicting records; and the invariant that after quiescence every organisation holding a
//! commitment shows the same view of it (`check::same_view`) and every party's record is
//! decided (`check::decided`).
//!
//! `SIM_SEED=<seed> cargo test -p accord-sim` replays one seed; `scripts/simulate.sh --seeds N`
//! runs many.
#![forbid(unsafe_code)]

pub mod check;
pub mod fixture;
pub mod net;
pub mod workload;
pub mod world;

/// Why a run could not be carried out (as opposed to an invariant it found broken).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Setting up the organisations, witnesses or directories failed.
    #[error("setup: {0}")]
    Setup(String),
    /// A node or witness could not be (re)opened.
    #[error("open {what}: {detail}")]
    Open {
        /// Which node or witness.
        what: String,
        /// Why.
        detail: String,
    },
}

/// How a run is shaped.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Steps of the faulty phase.
    pub steps: usize,
    /// Commitments the workload opens (at most).
    pub commitments: usize,
    /// Races the workload opens (at most; issue 26 item 6).
    pub races: usize,
    /// The race classes drawn from ([`workload::Class::bit`]s); `Skew` also gives each node a
    /// fixed clock offset within half of [`world::SKEW_MS`].
    pub classes: u8,
    /// A deliberate break of what the checks read (tests only: the checks can fire).
    pub tamper: Tamper,
}

/// What [`check`] is handed broken on purpose, to show that the convergence checks fire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Tamper {
    /// Nothing.
    #[default]
    None,
    /// One holder's view of one shared commitment shows another state.
    View,
    /// One holder of one shared commitment does not show it.
    Missing,
    /// One acknowledged race record shows as still waiting for its order at its author.
    Pending,
    /// One peer record is missing from the ledger a receiver shows (`delivered_once_in_order`).
    Undelivered,
    /// One opening admission declaration shows twice in its receiver's ledger
    /// (`delivered_once_in_order`).
    DecidedTwice,
    /// Two records of one author and commitment show swapped in a receiver's ledger
    /// (`delivered_once_in_order`).
    Reordered,
    /// One stored receipt has a byte flipped (`receipts_verify`).
    Receipt,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            steps: 120,
            commitments: 4,
            races: 3,
            classes: workload::Class::ALL.iter().fold(0, |m, c| m | c.bit()),
            tamper: Tamper::None,
        }
    }
}

/// What one run did and found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Broken invariants (empty: the run passed).
    pub violations: Vec<String>,
    /// Hash of every event of the run (equal for two runs of one seed).
    pub trace: [u8; 32],
    /// Records acknowledged by the record door.
    pub acked: usize,
    /// Node crashes (each followed by a restart from the store).
    pub crashes: usize,
    /// Commitments that reached `accepted` everywhere.
    pub accepted: usize,
    /// Peer records checked at their receivers (delivered, decided once, in order).
    pub deliveries: u64,
    /// What the network did.
    pub net: net::NetStats,
    /// Records the races (issue 26) had acknowledged.
    pub race_records: usize,
    /// By race kind (`RaceKind`'s debug name): how many races ran, and how many records they
    /// had acknowledged.
    pub race_records_by_kind: std::collections::BTreeMap<String, (usize, usize)>,
}

/// Runs one seed on a fresh current-thread runtime; directories are removed afterwards.
pub fn run(seed: u64, opts: Options) -> Result<Report, SimError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SimError::Setup(format!("runtime: {e}")))?;
    rt.block_on(world::World::run(seed, opts, false))
}

/// [`run`] with one forged acknowledgement (a record id no node has, at sequence 0): the run
/// must report it — the test that the invariants can fail.
pub fn run_with_forged_ack(seed: u64, opts: Options) -> Result<Report, SimError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SimError::Setup(format!("runtime: {e}")))?;
    rt.block_on(world::World::run(seed, opts, true))
}

/// Runs `seeds` on `jobs` threads (each seed on its own runtime and directories, so the results
/// do not depend on the threads); results in seed order.
pub fn run_many(
    seeds: std::ops::Range<u64>,
    opts: Options,
    jobs: usize,
) -> Vec<(u64, Result<Report, SimError>)> {
    let next = std::sync::atomic::AtomicU64::new(seeds.start);
    let out = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if seed >= seeds.end {
                        return;
                    }
                    let r = run(seed, opts);
                    out.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((seed, r));
                }
            });
        }
    });
    let mut v = out.into_inner().unwrap_or_else(|p| p.into_inner());
    v.sort_by_key(|(s, _)| *s);
    v
}

/// Threads for [`run_many`]: `SIM_JOBS`, else the machine's parallelism (at least 2: a run
/// waits on its stores more than it computes).
pub fn default_jobs() -> usize {
    std::env::var("SIM_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .max(2)
        })
}
