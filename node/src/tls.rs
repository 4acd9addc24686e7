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
use std::cell::RefCell;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

tokio::task_local! {
    /// The subject of the client certificate offered in the handshake running on this task
    /// (set by [`DynamicClientVerifier`]), for the refused-handshake log line.
    static OFFERED: RefCell<Option<String>>;
}

/// The subject of a DER certificate, for logs (cut to 256 bytes).
fn subject(der: &[u8]) -> String {
    match x509_parser::parse_x509_certificate(der) {
        Ok((_, c)) => crate::ident::truncate(&c.subject().to_string(), 256),
        Err(_) => "(certificate does not parse)".into(),
    }
}

/// Reads every certificate in a PEM file ([`accord_daemon::pem`]).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    accord_daemon::pem::load_certs(path).map_err(|e| Error::Tls(e.to_string()))
}

/// Reads a PEM private key ([`accord_daemon::pem`]).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    accord_daemon::pem::load_key(path).map_err(|e| Error::Tls(e.to_string()))
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
        // Remembered for the log line if the handshake is refused (see `incoming`).
        let _ = OFFERED.try_with(|o| *o.borrow_mut() = Some(subject(end_entity.as_ref())));
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

/// Counters of the listener (issue 8; exported by the metrics later).
#[derive(Debug, Default)]
pub struct ListenerStats {
    /// TLS handshakes refused (failed or timed out).
    pub refused_handshakes: AtomicU64,
    /// Connections closed at once because `limits.max_connections` were open.
    pub refused_connections: AtomicU64,
    /// Connections closed for a missing HTTP/2 preface or idleness.
    pub timed_out: AtomicU64,
}

/// Bounds of the listener (from `[limits]`, README "Limits").
#[derive(Debug, Clone)]
pub struct ListenerLimits {
    /// Open connections at most (handshakes included).
    pub max_connections: usize,
    /// A TLS handshake must complete within this.
    pub handshake_timeout: Duration,
    /// The HTTP/2 preface must arrive within this after the handshake.
    pub preface_timeout: Duration,
    /// A connection without traffic (PINGs aside) for this long is closed.
    pub idle_timeout: Duration,
}

impl ListenerLimits {
    /// The limits of a node's `[limits]` (the handshake timeout stays 10 s).
    pub fn from_config(l: &crate::config::LimitsConfig) -> Self {
        Self {
            max_connections: l.max_connections,
            handshake_timeout: Duration::from_secs(10),
            preface_timeout: Duration::from_millis(l.preface_timeout_ms),
            idle_timeout: Duration::from_millis(l.idle_timeout_ms),
        }
    }
}

/// Accepts TCP connections and completes TLS handshakes concurrently (each bounded by a
/// timeout), yielding established streams until `shutdown`. At most `limits.max_connections`
/// are open at once (a connection beyond is closed at once); each stream is [`Guarded`] by the
/// preface and idle timeouts. A refused handshake is logged at warn with the subject of the
/// client certificate offered, and counted in `stats`.
pub fn incoming(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    limits: ListenerLimits,
    stats: Arc<ListenerStats>,
    shutdown: CancellationToken,
) -> impl Stream<Item = Result<Guarded, std::io::Error>> {
    let acceptor = TlsAcceptor::from(config);
    let (tx, rx) = tokio::sync::mpsc::channel(128);
    let open = Arc::new(Semaphore::new(limits.max_connections));
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
            let Ok(permit) = open.clone().try_acquire_owned() else {
                let n = stats.refused_connections.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(%addr, max_connections = limits.max_connections, refused = n, "connection refused: too many open");
                drop(tcp);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            let stats = stats.clone();
            let limits = limits.clone();
            tokio::spawn(OFFERED.scope(RefCell::new(None), async move {
                let r = tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await;
                let offered = OFFERED.with(|o| o.borrow().clone());
                let offered = offered.as_deref().unwrap_or("(none seen: the handshake failed before a client certificate)");
                match r {
                    Ok(Ok(s)) => {
                        let _ = tx.send(Ok(Guarded::new(s, permit, &limits, stats))).await;
                    }
                    Ok(Err(e)) => {
                        stats.refused_handshakes.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(%addr, client_certificate = offered, error = %e, "TLS handshake refused");
                    }
                    Err(_) => {
                        stats.refused_handshakes.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(%addr, client_certificate = offered, "TLS handshake timed out");
                    }
                }
            }));
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// The HTTP/2 connection preface's length (RFC 9113, 3.4).
const PREFACE_LEN: usize = 24;

/// An HTTP/2 PING frame alone (9-byte header, length 8, type 0x6): keepalive, not activity.
fn is_ping(b: &[u8]) -> bool {
    b.len() == 17 && b[..4] == [0, 0, 8, 6]
}

/// A server TLS stream with the listener's bounds: the connection slot it holds (released on
/// drop), the HTTP/2 preface deadline, then the idle deadline, reset by any traffic other than
/// a lone PING. Past a deadline, reads fail with `TimedOut` and hyper closes the connection.
pub struct Guarded {
    inner: TlsStream<TcpStream>,
    _slot: OwnedSemaphorePermit,
    deadline: Pin<Box<Sleep>>,
    preface_left: usize,
    idle: Duration,
    stats: Arc<ListenerStats>,
}

impl std::fmt::Debug for Guarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("preface_left", &self.preface_left)
            .finish()
    }
}

impl Guarded {
    fn new(
        inner: TlsStream<TcpStream>,
        slot: OwnedSemaphorePermit,
        limits: &ListenerLimits,
        stats: Arc<ListenerStats>,
    ) -> Self {
        Self {
            inner,
            _slot: slot,
            deadline: Box::pin(tokio::time::sleep(limits.preface_timeout)),
            preface_left: PREFACE_LEN,
            idle: limits.idle_timeout,
            stats,
        }
    }

    fn active(&mut self) {
        let at = Instant::now() + self.idle;
        self.deadline.as_mut().reset(at);
    }
}

impl tonic::transport::server::Connected for Guarded {
    type ConnectInfo = <TlsStream<TcpStream> as tonic::transport::server::Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        tonic::transport::server::Connected::connect_info(&self.inner)
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len() - before;
                if n > 0 {
                    if self.preface_left > 0 {
                        self.preface_left = self.preface_left.saturating_sub(n);
                        if self.preface_left == 0 {
                            self.active();
                        }
                    } else if !is_ping(&buf.filled()[before..]) {
                        self.active();
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.stats.timed_out.fetch_add(1, Ordering::Relaxed);
                    let what = if self.preface_left > 0 {
                        "no HTTP/2 preface in time"
                    } else {
                        "idle connection"
                    };
                    tracing::debug!(reason = what, "closing connection");
                    Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, what)))
                }
                Poll::Pending => Poll::Pending,
            },
            other => other,
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r
            && n > 0
            && self.preface_left == 0
            && !is_ping(&buf[..n])
        {
            self.active();
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
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
