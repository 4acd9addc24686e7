//! TLS for the node's listener (rustls), with optional or required client certificates (mutual
//! TLS). The node runs its own TLS acceptor rather than tonic's so that handshakes happen off the
//! accept loop (a slow client cannot stall others) and so that client verification can trust the
//! peers' CAs. The client-certificate verifier is dynamic ([`DynamicClientVerifier`]): it
//! accepts certificates chaining to a configured `tls.client_ca` or to any enabled peer's CA,
//! and follows peer changes without a restart.
//!
//! Outgoing connections to peers ([`peer_channel`]) use our own rustls connector too, so that a
//! peer pinned to its leaf certificate (`pin_sha256`, issue 8) is held to it as a server.

use crate::error::Error;
use futures::Stream;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};
use std::path::Path;
use std::sync::Arc;
use std::sync::RwLock;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// Reads every certificate in a PEM file.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let pem = std::fs::read(path).map_err(|e| Error::Tls(format!("{}: {e}", path.display())))?;
    let certs = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls(format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::Tls(format!(
            "{}: no certificate found",
            path.display()
        )));
    }
    Ok(certs)
}

/// Reads a PEM private key.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    let pem = std::fs::read(path).map_err(|e| Error::Tls(format!("{}: {e}", path.display())))?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| Error::Tls(format!("{}: {e}", path.display())))?
        .ok_or_else(|| Error::Tls(format!("{}: no private key found", path.display())))
}

/// The crypto provider every TLS config of the node uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The listener's client-certificate verifier: certificates chaining to one of the static CAs
/// (`tls.client_ca`) or to a peer's CA, or equal to a peer's pinned certificate. The peer set is
/// replaced whenever peers change ([`DynamicClientVerifier::set_peer_certs`]); a handshake uses
/// the set current at that moment.
#[derive(Debug)]
pub struct DynamicClientVerifier {
    static_cas: Vec<CertificateDer<'static>>,
    required: bool,
    provider: Arc<rustls::crypto::CryptoProvider>,
    current: RwLock<Trusted>,
}

#[derive(Debug, Default)]
struct Trusted {
    webpki: Option<Arc<dyn ClientCertVerifier>>,
    pinned: Vec<CertificateDer<'static>>,
}

impl DynamicClientVerifier {
    /// Trusts `static_cas`; client certificates are required when `required`.
    pub fn new(static_cas: Vec<CertificateDer<'static>>, required: bool) -> Arc<Self> {
        let v = Arc::new(Self {
            static_cas,
            required,
            provider: provider(),
            current: RwLock::new(Trusted::default()),
        });
        v.set_peer_certs(Vec::new());
        v
    }

    /// Replaces the peers' certificates (CAs, or pinned leaves).
    pub fn set_peer_certs(&self, peer_certs: Vec<CertificateDer<'static>>) {
        let mut roots = RootCertStore::empty();
        for c in self.static_cas.iter().chain(&peer_certs) {
            if let Err(e) = roots.add(c.clone()) {
                tracing::debug!(error = %e, "certificate is not usable as a trust anchor (pinned only)");
            }
        }
        let webpki = if roots.is_empty() {
            None
        } else {
            match WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                self.provider.clone(),
            )
            .allow_unauthenticated()
            .build()
            {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!(error = %e, "client verifier");
                    None
                }
            }
        };
        if let Ok(mut t) = self.current.write() {
            *t = Trusted {
                webpki,
                pinned: peer_certs,
            };
        }
    }
}

impl ClientCertVerifier for DynamicClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.required
            || self
                .current
                .read()
                .map(|t| t.webpki.is_some() || !t.pinned.is_empty())
                .unwrap_or(false)
    }

    fn client_auth_mandatory(&self) -> bool {
        self.required
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // No hints: a client sends whatever certificate it has (the trusted set changes).
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let t = self
            .current
            .read()
            .map_err(|_| rustls::Error::General("verifier lock poisoned".into()))?;
        if t.pinned.iter().any(|c| c.as_ref() == end_entity.as_ref()) {
            return Ok(ClientCertVerified::assertion());
        }
        match &t.webpki {
            Some(v) => v.verify_client_cert(end_entity, intermediates, now),
            None => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Builds the server's rustls config with a [`DynamicClientVerifier`] over `client_cas`
/// (client certificates required when `require_client_cert`); returns the verifier so that
/// peers' CAs can be added and removed while serving.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_cas: &[CertificateDer<'static>],
    require_client_cert: bool,
) -> Result<(Arc<ServerConfig>, Arc<DynamicClientVerifier>), Error> {
    let certs = load_certs(cert)?;
    let key = load_key(key)?;
    let verifier = DynamicClientVerifier::new(client_cas.to_vec(), require_client_cert);
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?
        .with_client_cert_verifier(verifier.clone())
        .with_single_cert(certs, key)
        .map_err(|e| Error::Tls(format!("certificate/key: {e}")))?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok((Arc::new(cfg), verifier))
}

/// Accepts TCP connections and completes TLS handshakes concurrently (each bounded by a
/// timeout), yielding established streams until `shutdown`.
pub fn incoming(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    shutdown: CancellationToken,
) -> impl Stream<Item = Result<TlsStream<TcpStream>, std::io::Error>> {
    let acceptor = TlsAcceptor::from(config);
    let (tx, rx) = tokio::sync::mpsc::channel(128);
    tokio::spawn(async move {
        loop {
            let (tcp, addr) = tokio::select! {
                _ = shutdown.cancelled() => break,
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        // Out of file descriptors and the like: back off rather than spin.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => {
                        let _ = tx.send(Ok(s)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(%addr, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

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
