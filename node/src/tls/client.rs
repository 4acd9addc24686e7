//! Client channels over TLS: to an Accord service ([`connect`]) and to a peer, held to its pinned
//! certificate when it has one ([`peer_channel`]).

use super::{load_certs, load_key, provider};
use crate::error::Error;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
/// A tonic client channel to an Accord service over TLS, trusting `ca_pem`, optionally with a
/// client identity (mutual TLS). `domain` is the name the server certificate must carry.
pub async fn connect(
    endpoint: &str,
    ca_pem: &[u8],
    identity: Option<(&[u8], &[u8])>,
    domain: &str,
) -> Result<tonic::transport::Channel, Error> {
    let mut tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(ca_pem))
        .domain_name(domain);
    if let Some((cert, key)) = identity {
        tls = tls.identity(tonic::transport::Identity::from_pem(cert, key));
    }
    tonic::transport::Endpoint::from_shared(endpoint.to_string())
        .map_err(|e| Error::invalid("endpoint", e.to_string()))?
        .tls_config(tls)
        .map_err(|e| Error::Tls(e.to_string()))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .connect()
        .await
        .map_err(|e| Error::Unavailable(format!("{endpoint}: {e}")))
}

/// The server-certificate check when this node connects to a peer (issue 8): the chain verifies
/// against the peer's CA for the endpoint's name (WebPKI), and, when the peer is pinned
/// (`pin_sha256`), the leaf is exactly the pinned certificate.
use rustls::client::danger::ServerCertVerifier;

#[derive(Debug)]
struct PeerServerVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    pin: Option<[u8; 32]>,
}

impl ServerCertVerifier for PeerServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use sha2::{Digest, Sha256};
        if let Some(pin) = &self.pin
            && Sha256::digest(end_entity.as_ref()).as_slice() != pin
        {
            return Err(rustls::Error::General(
                "the peer's server certificate is not its pinned certificate (pin_sha256)".into(),
            ));
        }
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A lazy mutual-TLS channel to a peer at `endpoint` (`https://host:port`): this node's
/// identity (`cert`, `key`), the peer's CA (`ca_pem`) and, if not empty, its leaf pin
/// (`pin_sha256`, hex). The TLS is done by our own connector (tonic's cannot pin), so tonic sees
/// an `http://` endpoint over an already-secured stream.
pub fn peer_channel(
    endpoint: &str,
    ca_pem: &str,
    pin_sha256: &str,
    cert: &Path,
    key: &Path,
    connect_timeout: Duration,
    request_timeout: Duration,
) -> Result<tonic::transport::Channel, Error> {
    let uri: http::Uri = endpoint
        .parse()
        .map_err(|e| Error::invalid("peer.endpoint", format!("{e}")))?;
    let host = uri
        .host()
        .ok_or_else(|| Error::invalid("peer.endpoint", "no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let mut roots = RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        let c = c.map_err(|e| Error::Tls(format!("peer CA: {e}")))?;
        roots
            .add(c)
            .map_err(|e| Error::Tls(format!("peer CA: {e}")))?;
    }
    let inner =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| Error::Tls(format!("peer CA: {e}")))?;
    let pin = if pin_sha256.is_empty() {
        None
    } else {
        Some(
            hex::decode(pin_sha256)
                .ok()
                .and_then(|p| <[u8; 32]>::try_from(p).ok())
                .ok_or_else(|| Error::invalid("peer.pin_sha256", "expected 64 hex digits"))?,
        )
    };
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PeerServerVerifier { inner, pin }))
        .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
        .map_err(|e| Error::Tls(e.to_string()))?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| Error::invalid("peer.endpoint", e.to_string()))?;
    let connect = tower::service_fn(move |_: http::Uri| {
        let (connector, name, host) = (connector.clone(), name.clone(), host.clone());
        async move {
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let tls = connector.connect(name, tcp).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
        }
    });
    Ok(tonic::transport::Endpoint::from_shared(format!(
        "http://{}",
        uri.authority().map_or("localhost", |a| a.as_str())
    ))
    .map_err(|e| Error::invalid("peer.endpoint", e.to_string()))?
    .connect_timeout(connect_timeout)
    .timeout(request_timeout)
    .tcp_nodelay(true)
    .connect_with_connector_lazy(connect))
}
