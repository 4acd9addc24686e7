//! `accord-sim --seeds N [--from S]`: runs seeds S..S+N of the deterministic simulation and
//! prints one line per failing seed (with the command that replays it) and a summary line.
//! `--steps`, `--commitments`, `--races N`, `--class C` (issue 26: deadline, skew, join,
//! conflict; repeatable) shape each run; `--jobs` (default `SIM_JOBS` or the machine's
//! parallelism) runs seeds side by side.

use std::process::ExitCode;
use std::time::Instant;

fn arg(args: &[String], name: &str) -> Option<u64> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let seeds = arg(&args, "--seeds").unwrap_or(100);
    let from = arg(&args, "--from").unwrap_or(0);
    let mut opts = accord_sim::Options::default();
    if let Some(s) = arg(&args, "--steps") {
        opts.steps = s as usize;
    }
    if let Some(c) = arg(&args, "--commitments") {
        opts.commitments = c as usize;
    }
    if let Some(r) = arg(&args, "--races") {
        opts.races = r as usize;
    }
    // `--class deadline|skew|join|conflict` (repeatable): only those race classes (issue 26).
    let classes: Vec<&str> = args
        .iter()
        .zip(args.iter().skip(1))
        .filter(|(a, _)| *a == "--class")
        .map(|(_, v)| v.as_str())
        .collect();
    if !classes.is_empty() {
        opts.classes = 0;
        for c in classes {
            match accord_sim::workload::Class::parse(c) {
                Some(c) => opts.classes |= c.bit(),
                None => {
                    eprintln!("unknown class {c} (deadline, skew, join, conflict)");
                    return ExitCode::from(2);
                }
            }
        }
    }
    let started = Instant::now();
    let (mut failed, mut acked, mut crashes, mut accepted, mut deliveries) =
        (0u64, 0usize, 0usize, 0usize, 0u64);
    let jobs = arg(&args, "--jobs").map_or_else(accord_sim::default_jobs, |j| j as usize);
    for (seed, r) in accord_sim::run_many(from..from + seeds, opts, jobs) {
        match r {
            Ok(r) => {
                acked += r.acked;
                crashes += r.crashes;
                accepted += r.accepted;
                deliveries += r.deliveries;
                if !r.violations.is_empty() {
                    failed += 1;
                    println!(
                        "seed {seed} FAILED (replay: SIM_SEED={seed} cargo test -p accord-sim --test seeds):"
                    );
                    for v in &r.violations {
                        println!("  {v}");
                    }
                }
            }
            Err(e) => {
                failed += 1;
                println!("seed {seed} could not run: {e}");
            }
        }
    }
    println!(
        "{seeds} seeds from {from}: {failed} failed; {acked} records acknowledged, {deliveries} peer deliveries checked, {crashes} node crashes, {accepted} commitments accepted everywhere; {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
