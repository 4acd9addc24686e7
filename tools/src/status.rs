//! `accordctl status`: one node's health on one screen — log size, the latest checkpoint and
//! the witnesses that cosigned it, peers with their queue and breaker, the quarantine (from
//! `AdminService.GetStatus`).

use accord_proto::pb::admin::v1::{
    self as pb, GetPeerHealthResponse, admin_service_client::AdminServiceClient,
};
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

use crate::output::{self, Output};

/// `accordctl status` connection options (as `accordctl admin`).
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The node's endpoint, e.g. https://127.0.0.1:7443.
    #[arg(long, env = "ACCORD_NODE")]
    pub node: String,
    /// PEM CA of the node's TLS certificate (the node's tls/ca.pem).
    #[arg(long, env = "ACCORD_CA")]
    pub ca: PathBuf,
    /// File holding the operator token (the node's admin.token).
    #[arg(long, env = "ACCORD_ADMIN_TOKEN_FILE")]
    pub token_file: PathBuf,
    /// The TLS name to expect (default: the endpoint's host).
    #[arg(long)]
    pub domain: Option<String>,
}

/// Runs `accordctl status`.
pub async fn run(a: StatusArgs, out: Output) -> Result<()> {
    let token = crate::admin::read_token(&a.token_file)?;
    let ch = crate::admin::connect(&a.node, &a.ca, a.domain.as_deref()).await?;
    let mut req = tonic::Request::new(pb::GetStatusRequest {});
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}")
            .parse()
            .context("--token-file: the token is not ASCII")?,
    );
    let s = AdminServiceClient::new(ch)
        .get_status(req)
        .await
        .map_err(|s| {
            crate::hints::status_error(
                &s,
                "--token-file <node dir>/admin.token (the operator token)",
            )
        })?
        .into_inner();
    print(&s, out == Output::Json);
    Ok(())
}

/// A peer's health as JSON (the fields of `GetPeerHealthResponse`).
pub fn health_json(peer: &str, h: &GetPeerHealthResponse) -> serde_json::Value {
    serde_json::json!({
        "peer": peer,
        "queue_depth": h.queue_depth,
        "oldest_queued_age_ms": h.oldest_queued_age_ms,
        "last_success_unix_ms": h.last_success_unix_ms,
        "breaker": h.breaker,
        "last_error": h.last_error,
        "queue_max": h.queue_max,
        "queue_full": h.queue_full,
        "backfilling": h.backfilling,
        "backfill_from_sequence": h.backfill_from_sequence,
    })
}

/// Prints a status as JSON or on one screen.
pub fn print(s: &pb::GetStatusResponse, json: bool) {
    let default = GetPeerHealthResponse::default();
    if json {
        let peers: Vec<_> = s
            .peers
            .iter()
            .map(|p| {
                let mut v = health_json(&p.name, p.health.as_ref().unwrap_or(&default));
                v["name"] = p.name.clone().into();
                v["endpoint"] = p.endpoint.clone().into();
                v["enabled"] = p.enabled.into();
                v
            })
            .collect();
        output::json(&serde_json::json!({
            "name": s.name,
            "origin": s.origin,
            "vkey": s.vkey,
            "ledger_size": s.ledger_size,
            "checkpoint_size": s.checkpoint_size,
            "checkpoint_age_ms": s.checkpoint_age_ms,
            "witnessed_size": s.witnessed_size,
            "witnesses_required": s.witnesses_required,
            "witnessed_by": s.witnessed_by,
            "quarantine_size": s.quarantine_size,
            "peers": peers,
        }));
        return;
    }
    let witnessed = if s.witnesses_required == 0 {
        "witnessing off (witnesses.k = 0)".to_string()
    } else if s.witnessed_by.is_empty() {
        format!("none yet (needs {} cosignatures)", s.witnesses_required)
    } else {
        format!(
            "size {} — cosigned by {} (needs {})",
            s.witnessed_size,
            s.witnessed_by.join(", "),
            s.witnesses_required
        )
    };
    output::fields(&[
        ("node", format!("{} ({})", s.name, s.origin)),
        ("vkey", s.vkey.clone()),
        ("log size", format!("{} records", s.ledger_size)),
        (
            "checkpoint",
            format!(
                "size {} (current as of {:.1}s ago)",
                s.checkpoint_size,
                s.checkpoint_age_ms as f64 / 1000.0
            ),
        ),
        ("witnessed", witnessed),
        ("quarantine", format!("{} records", s.quarantine_size)),
    ]);
    println!();
    let rows: Vec<Vec<String>> = s
        .peers
        .iter()
        .map(|p| {
            let h = p.health.as_ref().unwrap_or(&default);
            vec![
                p.name.clone(),
                if p.enabled { "enabled" } else { "disabled" }.to_string(),
                h.queue_depth.to_string(),
                format!("{:.1}s", h.oldest_queued_age_ms as f64 / 1000.0),
                h.breaker.clone(),
                h.last_error.clone(),
            ]
        })
        .collect();
    output::table(
        &["PEER", "STATE", "QUEUED", "OLDEST", "BREAKER", "LAST ERROR"],
        &rows,
    );
}
