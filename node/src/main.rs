//! `accord-node`: `init` a node directory, or `serve` one.

/// mimalloc, not glibc malloc: the record path allocates on the async workers and frees on the
/// ledger writer (and the reverse), which glibc's arenas handle poorly (issue 14, BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use accord_daemon::logging::{self, LogFormat};
use accord_node::{config::Config, init};
use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// An organisation's Accord node: a signed-record ledger, Merkle log and federation endpoint.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create a node directory: keys, TLS material, party credentials and a commented config.
    Init {
        /// The directory to create (must be absent or empty).
        #[arg(long)]
        dir: PathBuf,
        /// The organisation's name.
        #[arg(long)]
        name: String,
        /// A party of the organisation to create credentials for (repeatable).
        #[arg(long = "party")]
        parties: Vec<String>,
        /// The listen address written into the config.
        #[arg(long, default_value = "127.0.0.1:7443")]
        listen: String,
    },
    /// Serve a node.
    Serve {
        /// The config file.
        #[arg(long)]
        config: PathBuf,
        /// Log format.
        #[arg(long, value_enum, default_value_t = LogFormat::Human)]
        log_format: LogFormat,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Init {
            dir,
            name,
            parties,
            listen,
        } => {
            let made = init::init(&init::InitOptions {
                dir,
                name,
                parties,
                listen,
            })?;
            println!("config: {}", made.config.display());
            println!("node vkey: {}", made.vkey);
            println!("admin token: in admin.token next to the config");
            for (p, vkey, _) in &made.parties {
                println!("party {p}: vkey {vkey} (skey and token under parties/)");
            }
            Ok(())
        }
        Cmd::Serve { config, log_format } => {
            logging::init(log_format);
            let cfg = Config::load(&config).map_err(|e| anyhow::anyhow!("{e}"))?;
            let listener = tokio::net::TcpListener::bind(cfg.listen)
                .await
                .with_context(|| format!("listen: cannot bind {}", cfg.listen))?;
            let metrics = match cfg.metrics_listen {
                Some(addr) => Some(
                    tokio::net::TcpListener::bind(addr)
                        .await
                        .with_context(|| format!("metrics_listen: cannot bind {addr}"))?,
                ),
                None => None,
            };
            // The first line on stdout is the bound address, for scripts and tests (port 0);
            // the second, when metrics are on, the metrics address.
            println!("listening {}", listener.local_addr()?);
            if let Some(m) = &metrics {
                println!("metrics {}", m.local_addr()?);
            }
            let token = CancellationToken::new();
            tokio::spawn(accord_daemon::signal::cancel_on_signal(token.clone()));
            let listeners = accord_node::Listeners {
                grpc: listener,
                metrics,
            };
            accord_node::run(cfg, listeners, token)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))
        }
    }
}
