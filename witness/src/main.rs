//! The `accord-witness` binary: `init` and `serve` (see witness/README.md).

#![forbid(unsafe_code)]

/// mimalloc, as in `accord-node` (ARCHITECTURE.md, "Allocator and CPU features").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;

use accord_daemon::logging::{self, LogFormat};
use accord_witness::init::{InitOptions, KeyAlg, init_with};
use accord_witness::{Config, Listeners};
use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;

/// An independent C2SP tlog-witness.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a witness directory: cosigner key, TLS material, admin token, commented config.
    /// Prints the witness's verifier key (vkey) on stdout.
    Init {
        /// The directory to create.
        #[arg(long)]
        dir: PathBuf,
        /// The witness name (its cosigner key name), e.g. witness.example.com/w1.
        #[arg(long)]
        name: String,
        /// Extra DNS name or IP address for the TLS certificate (repeatable).
        #[arg(long = "san")]
        sans: Vec<String>,
        /// The gRPC listen address to write into the config.
        #[arg(long, default_value = "127.0.0.1:7443")]
        grpc_listen: String,
        /// The HTTP listen address to write into the config.
        #[arg(long, default_value = "127.0.0.1:7080")]
        http_listen: String,
        /// The cosigner key type(s): Ed25519 (cosignature/v1), ML-DSA-44 (subtree/v1, which
        /// c2sp.org/tlog-witness recommends and sign-subtree needs) or both. One vkey line is
        /// printed per key.
        #[arg(long, value_enum, default_value_t = Alg::Ed25519)]
        alg: Alg,
    },
    /// Serve. Prints `listening grpc=ADDR http=ADDR` as the first line on stdout (and
    /// `metrics ADDR` as the second when `metrics_listen` is set); logs go to stderr.
    Serve {
        /// The config file.
        #[arg(long)]
        config: PathBuf,
        /// Log format.
        #[arg(long, value_enum, default_value_t = LogFormat::Human)]
        log_format: LogFormat,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Alg {
    Ed25519,
    #[value(name = "ml-dsa-44")]
    MlDsa44,
    Both,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Init {
            dir,
            name,
            sans,
            grpc_listen,
            http_listen,
            alg,
        } => {
            let algs: &[KeyAlg] = match alg {
                Alg::Ed25519 => &[KeyAlg::Ed25519],
                Alg::MlDsa44 => &[KeyAlg::MlDsa44],
                Alg::Both => &[KeyAlg::Ed25519, KeyAlg::MlDsa44],
            };
            let done = init_with(
                &InitOptions {
                    dir,
                    name,
                    sans,
                    grpc_listen,
                    http_listen,
                },
                algs,
            )?;
            for vkey in &done.vkeys {
                println!("{vkey}");
            }
            eprintln!(
                "wrote {} (admin token in admin.token, TLS CA in tls/ca.pem)",
                done.config_path.display()
            );
            Ok(())
        }
        Command::Serve { config, log_format } => {
            logging::init(log_format);
            let config = Config::load(&config)?;
            let listeners = Listeners::bind(&config).await?;
            println!(
                "listening grpc={} http={}",
                listeners.grpc_addr()?,
                listeners.http_addr()?
            );
            // The second line, when metrics are on: the metrics address.
            if let Some(m) = listeners.metrics_addr()? {
                println!("metrics {m}");
            }
            let shutdown = CancellationToken::new();
            tokio::spawn(accord_daemon::signal::cancel_on_signal(shutdown.clone()));
            accord_witness::run(config, listeners, shutdown)
                .await
                .context("witness failed")
        }
    }
}
