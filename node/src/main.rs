//! `accord-node`: `init` a node directory, `serve` one, or `tls reissue` its TLS material.

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
        /// A DNS name or IP address the TLS certificate also carries (repeatable), e.g. each
        /// instance of an HA pair.
        #[arg(long = "san")]
        sans: Vec<String>,
    },
    /// TLS material of an existing node directory.
    #[command(subcommand)]
    Tls(TlsCmd),
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

#[derive(Subcommand)]
enum TlsCmd {
    /// Replace the directory's CA and TLS certificate with ones every gRPC stack accepts (the
    /// CA of an `init` before issue 28 carries name constraints that gRPC's C core refuses).
    /// Keeps the node's keys, names, TLS key, config and ledger; copies the old files to
    /// tls/backup-<time>/ first. The CA changes: prints what peers and clients must update.
    Reissue {
        /// The node directory (the one given to `init`; holds accord.toml).
        #[arg(long)]
        dir: PathBuf,
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
            sans,
        } => {
            let made = init::init(&init::InitOptions {
                dir,
                name,
                parties,
                listen,
                sans,
            })?;
            println!("config: {}", made.config.display());
            println!("node vkey: {}", made.vkey);
            println!("admin token: in admin.token next to the config");
            for (p, vkey, _) in &made.parties {
                println!("party {p}: vkey {vkey} (skey and token under parties/)");
            }
            Ok(())
        }
        Cmd::Tls(TlsCmd::Reissue { dir }) => {
            let r = init::reissue_tls(&dir)?;
            println!("old TLS files copied to {}", r.backup.display());
            println!(
                "new CA: {} (SHA-256 {}); its key was not kept",
                r.ca.display(),
                r.ca_sha256
            );
            println!(
                "new certificate: {} for {} ({})",
                r.cert.display(),
                r.sans.join(", "),
                if r.key_kept {
                    "same TLS key"
                } else {
                    "new TLS key"
                }
            );
            println!("pin_sha256: {}", r.leaf_sha256);
            println!("node key, party keys, tokens, config and ledger are unchanged.");
            println!("next:");
            println!("  1. restart the node (accord-node serve) so it serves the new certificate;");
            println!(
                "  2. every peer replaces the CA it holds for {name} with the new {ca}: \
                 `accordctl admin peer remove {name}`, then `accordctl admin peer add --name {name} \
                 --tls-pem <new ca.pem> ...` (records for {name}'s parties are queued again), replaces the file its \
                 [[peers]] ca names if it lists {name} there, and sets pin_sha256 = \"{pin}\" if it pins {name}'s leaf;",
                name = r.name,
                ca = r.ca.display(),
                pin = r.leaf_sha256
            );
            println!(
                "  3. clients (SDKs, grpcurl, accordctl --ca) trust the new {}.",
                r.ca.display()
            );
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
