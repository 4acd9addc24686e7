//! `accordctl admin ...`: the operator's commands over `accord.admin.v1.AdminService` (bearer
//! operator token): status; peers (add, list, enable/disable, remove, rotate a key with a
//! validity overlap, health); the federation quarantine (list, admit, reject); refusals.
//!
//! Admission outcomes are printed as the seed writes them: `admitted`,
//! `["quarantined", code]`, `["rejected", code]` (seed 000, "Federation admission").

use accord_proto::codes::Decision;
use accord_proto::pb::admin::v1::{self as pb, admin_service_client::AdminServiceClient};
use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use tonic::transport::Channel;

use crate::output::{self, Output};

/// `accordctl admin [connection] <command>`.
#[derive(Debug, Args)]
pub struct AdminArgs {
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
    /// Print JSON (the same as `--output json`).
    #[arg(long, hide = true)]
    pub json: bool,
    #[command(subcommand)]
    pub cmd: AdminCmd,
}

/// Admin commands.
#[derive(Debug, Subcommand)]
pub enum AdminCmd {
    /// Node status on one screen: log size, checkpoints and witnesses, peers, quarantine.
    Status,
    /// Federation peers.
    #[command(subcommand)]
    Peer(PeerCmd),
    /// Records quarantined by federation admission.
    #[command(subcommand)]
    Quarantine(QuarantineCmd),
    /// Refused envelopes and calls, newest first (fetched page by page).
    Refusals {
        /// At most this many; 0 = all the node keeps.
        #[arg(long, default_value_t = 0)]
        limit: u32,
    },
}

/// `admin peer ...`
#[derive(Debug, Subcommand)]
pub enum PeerCmd {
    /// Add a peer organisation.
    Add {
        /// Its organisation name.
        #[arg(long)]
        name: String,
        /// Its endpoint (https://host:port).
        #[arg(long)]
        endpoint: String,
        /// A vkey that signs its records and envelopes (its node key, its parties' keys); repeatable.
        #[arg(long = "vkey", visible_alias = "vkeys", required = true)]
        vkeys: Vec<String>,
        /// PEM file of its TLS identity: its CA (or its pinned certificate).
        #[arg(long)]
        tls_pem: PathBuf,
        /// Pin it to its leaf certificate: hex SHA-256 of the DER leaf (as `[[peers]] pin_sha256`).
        #[arg(long = "pin-sha256", default_value = "")]
        pin_sha256: String,
        /// Add it disabled.
        #[arg(long)]
        disabled: bool,
    },
    /// List peers.
    List,
    /// Enable delivery to and from a peer.
    Enable {
        /// The peer.
        name: String,
    },
    /// Disable delivery to and from a peer (its envelopes are refused, `peer_disabled`).
    Disable {
        /// The peer.
        name: String,
    },
    /// Remove a peer (its envelopes are refused, `unknown_peer`; its queue is dropped).
    Remove {
        /// The peer.
        name: String,
    },
    /// Add a new key; the old keys stay valid for the overlap, then expire.
    RotateKey {
        /// The peer.
        name: String,
        /// The new vkey.
        #[arg(long)]
        new_vkey: String,
        /// How long the old keys stay valid, seconds from now.
        #[arg(long, default_value_t = 86_400)]
        overlap_secs: u64,
    },
    /// A peer's delivery health: queue depth, oldest queued, last success, breaker.
    Health {
        /// The peer.
        name: String,
    },
}

/// `admin quarantine ...`
#[derive(Debug, Subcommand)]
pub enum QuarantineCmd {
    /// List quarantined records with their code and age.
    List,
    /// Admit a quarantined record by hand (the kernel still decides; declared by `<org>/operator`).
    Admit {
        /// The record id (hex).
        record: String,
        /// Why.
        #[arg(long)]
        reason: String,
    },
    /// Reject a quarantined record by hand (`["rejected", "operator"]`).
    Reject {
        /// The record id (hex).
        record: String,
        /// Why.
        #[arg(long)]
        reason: String,
    },
}

/// A TLS channel to a node; a failure says what to check (`--node`, `--ca`, `--domain`).
pub async fn connect(endpoint: &str, ca: &Path, domain: Option<&str>) -> Result<Channel> {
    connect_with(endpoint, ca, domain, None).await
}

/// A TLS channel to a node, presenting a client certificate (PEM cert, key) when given.
pub async fn connect_with(
    endpoint: &str,
    ca: &Path,
    domain: Option<&str>,
    identity: Option<(&[u8], &[u8])>,
) -> Result<Channel> {
    let pem = std::fs::read(ca).with_context(|| {
        format!(
            "--ca {}: cannot read it (pass the node's tls/ca.pem)",
            ca.display()
        )
    })?;
    let uri: tonic::transport::Uri = endpoint
        .parse()
        .with_context(|| format!("--node {endpoint:?}: expected https://host:port"))?;
    let host = uri
        .host()
        .unwrap_or("localhost")
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let domain = domain.map(str::to_string).unwrap_or(host);
    let mut tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(pem))
        .domain_name(domain);
    if let Some((cert, key)) = identity {
        tls = tls.identity(tonic::transport::Identity::from_pem(cert, key));
    }
    tonic::transport::Endpoint::from_shared(endpoint.to_string())
        .with_context(|| format!("--node {endpoint:?}: expected https://host:port"))?
        .tls_config(tls)
        .with_context(|| format!("--ca {}", ca.display()))?
        .connect_timeout(std::time::Duration::from_secs(5))
        .tcp_nodelay(true)
        .connect()
        .await
        .map_err(|e| crate::hints::connect_error(endpoint, ca, &e))
}

struct Client {
    c: AdminServiceClient<Channel>,
    token: String,
}

impl Client {
    fn req<T>(&self, t: T) -> Result<tonic::Request<T>> {
        let mut r = tonic::Request::new(t);
        r.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.token)
                .parse()
                .context("token is not ASCII")?,
        );
        Ok(r)
    }
}

fn status(s: tonic::Status) -> anyhow::Error {
    crate::hints::status_error(
        &s,
        "--token-file <node dir>/admin.token (the operator token)",
    )
}

fn id_arg(s: &str) -> Result<Vec<u8>> {
    let b = hex::decode(s.trim()).context("record id: not hex")?;
    if b.len() != 32 {
        return Err(anyhow!("record id: must be 32 bytes (64 hex digits)"));
    }
    Ok(b)
}

fn ago(ms: i64) -> String {
    if ms <= 0 {
        "never".into()
    } else {
        format!(
            "{:.1}s ago",
            (accord_node::clock::Clock::system().now_ms() - ms) as f64 / 1000.0
        )
    }
}

/// Reads the operator token file.
pub fn read_token(path: &Path) -> Result<String> {
    let token = std::fs::read_to_string(path).with_context(|| {
        format!(
            "--token-file {}: cannot read it (the node's admin.token, next to its accord.toml)",
            path.display()
        )
    })?;
    Ok(token.trim().to_string())
}

/// Runs an admin command, printing as `output` says.
pub async fn run(a: AdminArgs, output: Output) -> Result<()> {
    let token = read_token(&a.token_file)?;
    let ch = connect(&a.node, &a.ca, a.domain.as_deref()).await?;
    let mut cl = Client {
        c: AdminServiceClient::new(ch),
        token,
    };
    let json = output.or_json(a.json) == Output::Json;
    match a.cmd {
        AdminCmd::Status => {
            let s =
                cl.c.get_status(cl.req(pb::GetStatusRequest {})?)
                    .await
                    .map_err(status)?
                    .into_inner();
            crate::status::print(&s, json);
        }
        AdminCmd::Peer(PeerCmd::Add {
            name,
            endpoint,
            vkeys,
            tls_pem,
            pin_sha256,
            disabled,
        }) => {
            // The node checks the same (issue 8); checking here gives the flag's name.
            accord_node::ident::name(&name).map_err(|r| anyhow!("--name (peer.name): {r}"))?;
            accord_node::ident::endpoint(&endpoint)
                .map_err(|r| anyhow!("--endpoint (peer.endpoint): {r}"))?;
            let pem = std::fs::read_to_string(&tls_pem)
                .with_context(|| format!("--tls-pem {}", tls_pem.display()))?;
            let peer = pb::Peer {
                name: name.clone(),
                endpoint,
                keys: vkeys
                    .into_iter()
                    .map(|v| pb::PeerKey {
                        vkey: v.trim().to_string(),
                        valid_until_unix_ms: 0,
                    })
                    .collect(),
                tls_certificate_pem: pem,
                enabled: !disabled,
                pin_sha256,
            };
            cl.c.add_peer(cl.req(pb::AddPeerRequest { peer: Some(peer) })?)
                .await
                .map_err(status)?;
            println!("peer {name} added");
        }
        AdminCmd::Peer(PeerCmd::List) => {
            let r =
                cl.c.list_peers(cl.req(pb::ListPeersRequest {})?)
                    .await
                    .map_err(status)?
                    .into_inner();
            if json {
                let v: Vec<_> = r
                    .peers
                    .iter()
                    .map(|p| {
                        serde_json::json!({"name": p.name, "endpoint": p.endpoint, "enabled": p.enabled,
                            "keys": p.keys.iter().map(|k| serde_json::json!({"vkey": k.vkey, "valid_until_unix_ms": k.valid_until_unix_ms})).collect::<Vec<_>>()})
                    })
                    .collect();
                output::json(&serde_json::Value::Array(v));
            } else {
                let rows: Vec<Vec<String>> = r
                    .peers
                    .iter()
                    .flat_map(|p| {
                        p.keys.iter().enumerate().map(move |(i, k)| {
                            let until = if k.valid_until_unix_ms == 0 {
                                "no end".to_string()
                            } else {
                                format!("until {}", k.valid_until_unix_ms)
                            };
                            let (name, endpoint, state) = if i == 0 {
                                (
                                    p.name.clone(),
                                    p.endpoint.clone(),
                                    if p.enabled { "enabled" } else { "disabled" }.to_string(),
                                )
                            } else {
                                Default::default()
                            };
                            vec![name, endpoint, state, format!("{} ({until})", k.vkey)]
                        })
                    })
                    .collect();
                output::table(&["PEER", "ENDPOINT", "STATE", "KEYS"], &rows);
            }
        }
        AdminCmd::Peer(PeerCmd::Enable { name }) => {
            cl.c.set_peer_enabled(cl.req(pb::SetPeerEnabledRequest {
                name: name.clone(),
                enabled: true,
            })?)
            .await
            .map_err(status)?;
            println!("peer {name} enabled");
        }
        AdminCmd::Peer(PeerCmd::Disable { name }) => {
            cl.c.set_peer_enabled(cl.req(pb::SetPeerEnabledRequest {
                name: name.clone(),
                enabled: false,
            })?)
            .await
            .map_err(status)?;
            println!("peer {name} disabled");
        }
        AdminCmd::Peer(PeerCmd::Remove { name }) => {
            cl.c.remove_peer(cl.req(pb::RemovePeerRequest { name: name.clone() })?)
                .await
                .map_err(status)?;
            println!("peer {name} removed");
        }
        AdminCmd::Peer(PeerCmd::RotateKey {
            name,
            new_vkey,
            overlap_secs,
        }) => {
            let until = accord_node::clock::Clock::system().now_ms() + (overlap_secs as i64) * 1000;
            let r = pb::RotatePeerKeyRequest {
                name: name.clone(),
                new_vkey,
                old_valid_until_unix_ms: until,
            };
            cl.c.rotate_peer_key(cl.req(r)?).await.map_err(status)?;
            println!("peer {name}: new key added; the old keys stay valid until {until} (Unix ms)");
        }
        AdminCmd::Peer(PeerCmd::Health { name }) => {
            let h =
                cl.c.get_peer_health(cl.req(pb::GetPeerHealthRequest { name: name.clone() })?)
                    .await
                    .map_err(status)?
                    .into_inner();
            if json {
                output::json(&crate::status::health_json(&name, &h));
            } else {
                let mut f = vec![
                    ("peer", name.clone()),
                    (
                        "queue depth",
                        format!("{} of {}", h.queue_depth, h.queue_max),
                    ),
                    (
                        "routing",
                        if h.queue_full {
                            "paused: queue full".to_string()
                        } else if h.backfilling {
                            format!("backfilling from sequence {}", h.backfill_from_sequence)
                        } else {
                            "live".to_string()
                        },
                    ),
                    ("oldest queued", format!("{} ms", h.oldest_queued_age_ms)),
                    ("last success", ago(h.last_success_unix_ms)),
                    ("breaker", h.breaker.clone()),
                ];
                if !h.last_error.is_empty() {
                    f.push(("last error", h.last_error.clone()));
                }
                output::fields(&f);
            }
        }
        AdminCmd::Quarantine(QuarantineCmd::List) => {
            let r =
                cl.c.list_quarantine(cl.req(pb::ListQuarantineRequest {})?)
                    .await
                    .map_err(status)?
                    .into_inner();
            let rows: Vec<_> = r
                .records
                .iter()
                .map(|q| {
                    let author = q
                        .author
                        .as_ref()
                        .map(|a| format!("{}/{}", a.organisation, a.name))
                        .unwrap_or_default();
                    (
                        hex::encode(&q.record_id),
                        q.peer.clone(),
                        Decision::Quarantined(q.code.clone()),
                        q.age_ms,
                        author,
                    )
                })
                .collect();
            if json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|(id, peer, d, age, author)| serde_json::json!({"record_id": id, "peer": peer, "outcome": d.to_json(), "code": d.code(), "age_ms": age, "author": author}))
                    .collect();
                output::json(&serde_json::Value::Array(v));
            } else {
                let rows: Vec<Vec<String>> = rows
                    .into_iter()
                    .map(|(id, peer, d, age, author)| {
                        vec![
                            id,
                            peer,
                            author,
                            d.to_string(),
                            format!("{:.1}s", age as f64 / 1000.0),
                        ]
                    })
                    .collect();
                output::table(&["RECORD", "PEER", "AUTHOR", "OUTCOME", "AGE"], &rows);
            }
        }
        AdminCmd::Quarantine(QuarantineCmd::Admit { record, reason }) => {
            decide(&mut cl, &record, reason, true).await?
        }
        AdminCmd::Quarantine(QuarantineCmd::Reject { record, reason }) => {
            decide(&mut cl, &record, reason, false).await?
        }
        AdminCmd::Refusals { limit } => {
            const PAGE: u32 = 500;
            let mut token = String::new();
            let mut shown = 0u32;
            let mut all = Vec::new();
            loop {
                let page_size = match limit {
                    0 => PAGE,
                    n => (n - shown).min(PAGE),
                };
                let r =
                    cl.c.list_refusals(cl.req(pb::ListRefusalsRequest {
                        limit: 0,
                        page_token: token.clone(),
                        page_size,
                    })?)
                    .await
                    .map_err(status)?
                    .into_inner();
                shown += r.refusals.len() as u32;
                all.extend(r.refusals);
                token = r.next_page_token;
                if token.is_empty() || (limit != 0 && shown >= limit) {
                    break;
                }
            }
            if json {
                let v: Vec<_> = all
                    .iter()
                    .map(|x| serde_json::json!({"peer": x.peer, "code": x.code, "detail": x.detail, "at_unix_ms": x.at_unix_ms}))
                    .collect();
                output::json(&serde_json::Value::Array(v));
            } else {
                let rows: Vec<Vec<String>> = all
                    .iter()
                    .map(|x| {
                        vec![
                            ago(x.at_unix_ms),
                            x.peer.clone(),
                            x.code.clone(),
                            x.detail.clone(),
                        ]
                    })
                    .collect();
                output::table(&["WHEN", "PEER", "CODE", "DETAIL"], &rows);
            }
        }
    }
    Ok(())
}

async fn decide(cl: &mut Client, record: &str, reason: String, admit: bool) -> Result<()> {
    if reason.trim().is_empty() {
        return Err(anyhow!("--reason is required"));
    }
    let r = pb::DecideQuarantinedRequest {
        record_id: id_arg(record)?.into(),
        admit,
        reason,
    };
    let resp =
        cl.c.decide_quarantined(cl.req(r)?)
            .await
            .map_err(status)?
            .into_inner();
    println!(
        "decided; admission declaration {}",
        hex::encode(resp.admission_record_id)
    );
    Ok(())
}
