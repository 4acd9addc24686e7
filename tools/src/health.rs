//! `accordctl health`: a gRPC health check (grpc.health.v1) over TLS, for probes (Kubernetes exec
//! probes, compose healthchecks) and people. Exit 0 when the node (or witness) answers SERVING,
//! 1 otherwise, with what to check next. `--alive` also accepts NOT_SERVING (a standby).

use anyhow::{Result, anyhow};
use clap::Args;
use std::path::PathBuf;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::output::{self, Output};

/// `accordctl health` options.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The endpoint, e.g. https://127.0.0.1:7443 (a node, or a witness's gRPC listener).
    #[arg(long, env = "ACCORD_NODE")]
    pub node: String,
    /// PEM CA of its TLS certificate (its tls/ca.pem).
    #[arg(long, env = "ACCORD_CA")]
    pub ca: PathBuf,
    /// The TLS name to expect (default: the endpoint's host).
    #[arg(long)]
    pub domain: Option<String>,
    /// The service to ask about (default: the server as a whole).
    #[arg(long, default_value = "")]
    pub service: String,
    /// Exit 0 when the server answers at all, SERVING or NOT_SERVING: a liveness probe, which a
    /// standby waiting for the writer's lease (NOT_SERVING) passes (issue 31).
    #[arg(long)]
    pub alive: bool,
}

/// Runs the check.
pub async fn run(a: HealthArgs, out: Output) -> Result<()> {
    let ch = crate::admin::connect(&a.node, &a.ca, a.domain.as_deref()).await?;
    let r = HealthClient::new(ch)
        .check(HealthCheckRequest {
            service: a.service.clone(),
        })
        .await
        .map_err(|s| crate::hints::status_error(&s, "no token (health is open)"))?
        .into_inner();
    let status = r.status().as_str_name().to_string();
    if out == Output::Json {
        output::json(
            &serde_json::json!({"endpoint": a.node, "service": a.service, "status": status}),
        );
    } else {
        println!("{}: {status}", a.node);
    }
    use tonic_health::pb::health_check_response::ServingStatus;
    if r.status() == ServingStatus::Serving || (a.alive && r.status() == ServingStatus::NotServing)
    {
        Ok(())
    } else {
        Err(anyhow!("{} is not serving ({status})", a.node))
    }
}
