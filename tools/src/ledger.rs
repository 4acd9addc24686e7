//! `accordctl ledger verify`: the offline audit replay of a node's data directory (issue 15,
//! item 2; the checks are `accord_node::audit`). Exit codes: 0 everything stored matches the
//! records, 1 a difference (reported with the first sequence where it appears), 2 the audit could
//! not run (bad flags, no such data dir, a running node holds it).

use crate::output::{self, Output};
use accord_node::audit::{self, Report};
use accord_node::config::Config;
use clap::{Args, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// `accordctl ledger ...`.
#[derive(Subcommand)]
pub enum LedgerCmd {
    /// Replay every record through the kernel, recompute the Merkle tree, and compare both with
    /// what is stored and with the latest signed checkpoints (offline; the node must be stopped).
    Verify(VerifyArgs),
}

/// `accordctl ledger verify`.
#[derive(Args)]
pub struct VerifyArgs {
    /// The node's data directory (default: the config's `data_dir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The node's config (default: `accord.toml` in the data directory's parent, as `init` lays
    /// it out): the organisation, parties and authorities the kernel replays with, and the log key.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print one JSON object (same as `--output json`).
    #[arg(long)]
    json: bool,
}

/// Runs a `ledger` command.
pub fn run(cmd: LedgerCmd, out: Output) -> ExitCode {
    match cmd {
        LedgerCmd::Verify(a) => {
            let json = out.or_json(a.json) == Output::Json;
            match verify(a) {
                Ok(r) => {
                    print(&r, json);
                    if r.ok() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(1)
                    }
                }
                Err(e) => {
                    if json {
                        output::json(
                            &serde_json::json!({ "ok": false, "error": format!("{e:#}") }),
                        );
                    }
                    eprintln!("accordctl: {e:#}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

fn verify(a: VerifyArgs) -> anyhow::Result<Report> {
    let config_path = match (&a.config, &a.data_dir) {
        (Some(c), _) => c.clone(),
        (None, Some(d)) => std::path::absolute(d)?
            .parent()
            .map(|p| p.join(accord_daemon::layout::node::CONFIG))
            .ok_or_else(|| {
                anyhow::anyhow!("--config: the data dir has no parent; pass --config")
            })?,
        (None, None) => anyhow::bail!("give --data-dir or --config"),
    };
    let config = Config::load(&config_path)
        .map_err(|e| anyhow::anyhow!("--config {}: {e}", config_path.display()))?;
    let data_dir = a.data_dir.unwrap_or_else(|| config.data_dir.clone());
    let bar = if std::io::stderr().is_terminal() {
        let b =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{bar:40}] {pos}/{len} records ({per_sec}, eta {eta})",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b.set_message("replaying");
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let r = audit::verify(&config, &data_dir, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    Ok(r?)
}

fn print(r: &Report, json: bool) {
    if json {
        output::json(&serde_json::json!({
            "ok": r.ok(),
            "records": r.records,
            "root": r.root,
            "checkpoints": r.checkpoints,
            "difference": r.difference,
        }));
        return;
    }
    match &r.difference {
        None => {
            let cps: Vec<String> = r
                .checkpoints
                .iter()
                .map(|c| format!("{} at size {}", c.which, c.size))
                .collect();
            println!(
                "ledger verified: {} records replayed, root {}, checkpoints: {}",
                r.records,
                r.root,
                if cps.is_empty() {
                    "(none)".to_string()
                } else {
                    cps.join(", ")
                }
            );
        }
        Some(d) => println!(
            "ledger DIFFERS at sequence {}: {}: {}",
            d.sequence, d.kind, d.detail
        ),
    }
}
