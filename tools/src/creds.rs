//! Credentials for WorkService and LogService reads (issue 8: every read needs one): a bearer
//! token (a party's `parties/<p>.token` or the operator's `admin.token`) or a TLS client
//! certificate the node's config maps to a party or the operator.

use accord_proto::pb::work::v1::work_service_client::WorkServiceClient;
use anyhow::{Context, Result, anyhow};
use clap::Args;
use std::path::{Path, PathBuf};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// Adds `authorization: Bearer <token>` to every call (nothing when there is no token; a request
/// that carries its own `authorization` keeps it).
#[derive(Clone, Debug, Default)]
pub struct Bearer(Option<tonic::metadata::AsciiMetadataValue>);

impl Bearer {
    /// The interceptor for `token` (surrounding whitespace, as in token files, is ignored).
    pub fn new(token: &str) -> Result<Bearer> {
        let t = token.trim();
        if t.is_empty() {
            return Ok(Bearer(None));
        }
        Ok(Bearer(Some(
            format!("Bearer {t}")
                .parse()
                .context("token is not ASCII")?,
        )))
    }

    /// The interceptor for the token in `path`.
    pub fn from_file(path: &Path) -> Result<Bearer> {
        let t = std::fs::read_to_string(path)
            .with_context(|| format!("--token-file {}", path.display()))?;
        Self::new(&t)
    }
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0
            && !req.metadata().contains_key("authorization")
        {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// A channel whose calls carry a bearer token.
pub type Authed = InterceptedService<Channel, Bearer>;
/// A WorkService client whose calls carry a bearer token.
pub type WorkClient = WorkServiceClient<Authed>;

/// How to reach a node and who to be: `--node`, `--ca`, `--domain`, and a credential
/// (`--token-file`, or `--cert`/`--key` for a client certificate).
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The node's endpoint, e.g. https://127.0.0.1:7443.
    #[arg(long, env = "ACCORD_NODE")]
    pub node: String,
    /// PEM CA of the node's TLS certificate (the node's tls/ca.pem).
    #[arg(long, env = "ACCORD_CA")]
    pub ca: PathBuf,
    /// The TLS name to expect (default: the endpoint's host).
    #[arg(long)]
    pub domain: Option<String>,
    /// File holding a bearer token: a party's (parties/<p>.token) or the operator's
    /// (admin.token).
    #[arg(long, env = "ACCORD_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// PEM client certificate mapped to a party or the operator (`cert_sha256` in the node's
    /// config); with --key.
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,
}

impl ReadArgs {
    /// A WorkService client with the given credential.
    pub async fn work(&self) -> Result<WorkClient> {
        let (ch, bearer) = self.channel().await?;
        Ok(WorkServiceClient::with_interceptor(ch, bearer))
    }

    /// A channel to the node and the bearer interceptor for any service's client.
    pub async fn channel(&self) -> Result<(Channel, Bearer)> {
        if self.token_file.is_none() && self.cert.is_none() {
            return Err(anyhow!(
                "reads need a credential: --token-file FILE (a party's or the operator's token) or --cert/--key"
            ));
        }
        let identity = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some((
                std::fs::read(c).with_context(|| format!("--cert {}", c.display()))?,
                std::fs::read(k).with_context(|| format!("--key {}", k.display()))?,
            )),
            _ => None,
        };
        let ch = crate::admin::connect_with(
            &self.node,
            &self.ca,
            self.domain.as_deref(),
            identity.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice())),
        )
        .await?;
        let bearer = match &self.token_file {
            Some(p) => Bearer::from_file(p)?,
            None => Bearer::default(),
        };
        Ok((ch, bearer))
    }
}
