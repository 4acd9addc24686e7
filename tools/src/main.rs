//! `accordctl`: the Accord operator CLI.
//!
//! The offline commands (`tlog`, `note`, `key`, `receipt verify`) use protocol code only
//! (`accord-proto`). Everything that runs or talks to a node or witness sits behind the default
//! cargo feature `node`, which links `accord-node` and `accord-witness` (and so RocksDB):
//! `cargo build -p accordctl --no-default-features` is the offline verifier alone.

#![forbid(unsafe_code)]

/// mimalloc, as in `accord-node` (ARCHITECTURE.md, "Allocator and CPU features").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "node")]
mod admin;
#[cfg(feature = "node")]
mod bench;
#[cfg(feature = "node")]
mod bench_envelope;
#[cfg(feature = "node")]
mod bench_federation;
#[cfg(feature = "node")]
mod bench_load;
#[cfg(feature = "node")]
mod bench_log;
#[cfg(feature = "node")]
mod bench_scale;
#[cfg(feature = "node")]
mod bench_stages;
#[cfg(feature = "node")]
mod bench_witness;
#[cfg(feature = "node")]
mod creds;
#[cfg(feature = "node")]
mod declare;
#[cfg(feature = "node")]
mod demo;
#[cfg(feature = "node")]
mod envelope;
/// `envelope start --delegate`: the pre-signed halves of a cross-organisation delegate.
#[cfg(feature = "node")]
mod envelope_delegate;
/// Checked flag values and the answers of the write commands (`work declare`, run writes).
#[cfg(feature = "node")]
mod flags;
#[cfg(feature = "node")]
mod health;
#[cfg(feature = "node")]
mod hints;
#[cfg(feature = "node")]
mod inproc;
#[cfg(feature = "node")]
mod ledger;
mod offline;
// Progress bars and spinners serve the online commands only.
#[cfg_attr(not(feature = "node"), allow(dead_code))]
mod output;
mod receipt;
mod run;
/// The run writes as a party (`run create|move|...`) and `run show`.
#[cfg(feature = "node")]
mod run_write;
#[cfg(feature = "node")]
mod status;
#[cfg(feature = "node")]
mod work;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Accord's operator CLI: demo, benchmarks, offline verification and admin.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// How read commands print: a table for people, or JSON for scripts.
    #[arg(long, global = true, value_enum, default_value_t = output::Output::Table)]
    output: output::Output,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run Accord's main job end to end on this machine (nodes on ephemeral ports, temp dirs).
    #[cfg(feature = "node")]
    Demo,
    #[command(flatten)]
    Offline(offline::OfflineCommand),
    /// Benchmarks (figures for BENCHMARKS.md).
    #[cfg(feature = "node")]
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Node administration over AdminService: peers, quarantine, health, refusals.
    #[cfg(feature = "node")]
    Admin(admin::AdminArgs),
    /// Federation receipts: fetch one, or verify one offline.
    #[command(subcommand)]
    Receipt(receipt::ReceiptCmd),
    /// Runs: start and write runs as a party, show one, its receipt, offline verification.
    #[command(subcommand)]
    Run(run::RunCmd),
    /// One node's health on one screen: log size, checkpoint and witnesses, peers, quarantine.
    #[cfg(feature = "node")]
    Status(status::StatusArgs),
    /// Work state: a commitment, what needs a party, and a live feed of changes.
    #[cfg(feature = "node")]
    #[command(subcommand)]
    Work(work::WorkCmd),
    /// Commit envelopes: start one, show one, list them by age.
    #[cfg(feature = "node")]
    #[command(subcommand)]
    Envelope(envelope::EnvelopeCmd),
    /// gRPC health check over TLS (for probes): exit 0 when SERVING.
    #[cfg(feature = "node")]
    Health(health::HealthArgs),
    /// The node's ledger, offline: `verify` replays it and compares with what is stored.
    #[cfg(feature = "node")]
    #[command(subcommand)]
    Ledger(ledger::LedgerCmd),
    /// Print a shell completion script: `accordctl completions bash > /etc/bash_completion.d/accordctl`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[cfg(feature = "node")]
#[derive(Subcommand)]
enum BenchCmd {
    /// Recorded appends per second with group commit, and latency at half load.
    Append(bench::AppendArgs),
    /// Merkle proof time at several tree sizes, and checkpoint signing cost.
    Log(bench_log::LogArgs),
    /// Witness add-checkpoint per second, and recorded → witnessed time.
    Witness(bench_witness::WitnessArgs),
    /// Records per second federated A→B end to end, and submit→admitted latency.
    Federation(bench_federation::FederationArgs),
    /// Commit envelopes committed per second across two organisations, start → COMMITTED.
    Envelope(bench_envelope::EnvelopeArgs),
    /// A ledger of N records: start-up, memory, bytes per record, cold GetCommitment p99.
    Scale(bench_scale::ScaleArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let out = cli.output;
    match cli.cmd {
        // Offline verification needs no runtime and has its own exit codes (0 valid, 1 invalid, 2 usage).
        Cmd::Offline(c) => offline::run(c, out),
        Cmd::Receipt(receipt::ReceiptCmd::Verify(a)) => receipt::verify(a, out),
        Cmd::Run(run::RunCmd::VerifyReceipt(a)) => run::verify_receipt(a, out),
        Cmd::Completions { shell } => {
            // Into a buffer first: clap_complete panics when its writer fails (`| head`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "accordctl", &mut script);
            use std::io::Write as _;
            let _ = std::io::stdout().write_all(&script);
            ExitCode::SUCCESS
        }
        // Offline too (a stopped node's data dir), with the exit codes of `ledger.rs`.
        #[cfg(feature = "node")]
        Cmd::Ledger(c) => ledger::run(c, out),
        #[cfg(feature = "node")]
        other => online(other, out),
    }
}

/// The commands that talk to (or run) nodes and witnesses, on a tokio runtime.
#[cfg(feature = "node")]
fn online(cmd: Cmd, out: output::Output) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("accordctl: {e}");
            return ExitCode::from(1);
        }
    };
    let r = rt.block_on(async {
        match cmd {
            Cmd::Demo => demo::run().await,
            Cmd::Bench(BenchCmd::Append(a)) => bench::append(a, out).await,
            Cmd::Bench(BenchCmd::Log(a)) => bench_log::run(a).await,
            Cmd::Bench(BenchCmd::Witness(a)) => bench_witness::run(a, out).await,
            Cmd::Bench(BenchCmd::Federation(a)) => bench_federation::run(a, out).await,
            Cmd::Bench(BenchCmd::Envelope(a)) => bench_envelope::run(a, out).await,
            Cmd::Bench(BenchCmd::Scale(a)) => bench_scale::run(a, out).await,
            Cmd::Admin(a) => admin::run(a, out).await,
            Cmd::Status(a) => status::run(a, out).await,
            Cmd::Work(c) => work::run(c, out).await,
            Cmd::Envelope(c) => envelope::run(c, out).await,
            Cmd::Health(a) => health::run(a, out).await,
            Cmd::Receipt(receipt::ReceiptCmd::Fetch(a)) => receipt::fetch(a, out).await,
            Cmd::Receipt(receipt::ReceiptCmd::Verify(_)) => Ok(()),
            Cmd::Run(c) => run::online(c, out).await,
            Cmd::Offline(_) | Cmd::Completions { .. } | Cmd::Ledger(_) => Ok(()),
        }
    });
    match r {
        Ok(()) => ExitCode::SUCCESS,
        // Already reported (a refused flag, a rejected record): only the exit code is left.
        Err(e) if e.downcast_ref::<flags::Exit>().is_some() => {
            ExitCode::from(e.downcast_ref::<flags::Exit>().map_or(1, |x| x.0))
        }
        Err(e) => {
            eprintln!("accordctl: {e:#}");
            ExitCode::from(1)
        }
    }
}
