//! TLS for the witness's listeners (rustls): server configs from PEM files, an acceptor that
//! completes handshakes off the accept loop (each bounded by a timeout, so a slow client stalls
//! nobody), and a private CA and a server certificate at `init`. PEM loading and certificate
//! generation are the shared daemon plumbing ([`accord_daemon`]); this module maps its errors.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::error::Error;

/// How long a client may take to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How many handshakes may be in progress at once per listener.
pub const MAX_HANDSHAKES: usize = 256;

/// ALPN for gRPC (HTTP/2).
pub const ALPN_H2: &[u8] = b"h2";

/// ALPN for the C2SP HTTP interface (HTTP/1.1).
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// The shared plumbing's error as the witness reports it: an unreadable file stays an I/O
/// error, the rest are TLS material errors (messages unchanged).
fn daemon_err(e: accord_daemon::Error) -> Error {
    match e {
        accord_daemon::Error::Io { path, source } => Error::io(path, source),
        other => Error::Tls(other.to_string()),
    }
}

/// Reads every certificate in a PEM file (the leaf first, then its chain; [`accord_daemon::pem`]).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    accord_daemon::pem::load_certs(path).map_err(daemon_err)
}

/// Reads a PEM private key ([`accord_daemon::pem`]).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    accord_daemon::pem::load_key(path).map_err(daemon_err)
}

/// A rustls server config (ring provider, TLS 1.2 and 1.3, no client certificates) for a
/// certificate chain (leaf first) and its key, offering `alpn`.
pub fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    alpn: &[u8],
) -> Result<Arc<ServerConfig>, Error> {
    let mut cfg =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| Error::Tls(format!("certificate and key do not match: {e}")))?;
    cfg.alpn_protocols = vec![alpn.to_vec()];
    Ok(Arc::new(cfg))
}

/// Accepts TCP connections on `listener` and completes TLS handshakes concurrently, sending each
/// established stream to the returned channel, until `shutdown`. Failed handshakes are logged
/// at debug level and dropped.
pub fn accept(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    shutdown: CancellationToken,
) -> mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)> {
    let acceptor = TlsAcceptor::from(config);
    let (tx, rx) = mpsc::channel(64);
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    tokio::spawn(async move {
        loop {
            let permit = tokio::select! {
                () = shutdown.cancelled() => break,
                p = handshakes.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            };
            let (tcp, peer) = tokio::select! {
                () = shutdown.cancelled() => break,
                r = listener.accept() => match r {
                    Ok(conn) => conn,
                    Err(e) => {
                        // E.g. EMFILE: back off briefly instead of spinning.
                        debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let _permit = permit;
                let _ = tcp.set_nodelay(true);
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send((tls, peer)).await;
                    }
                    Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => debug!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    rx
}

/// The private CA, the server certificate and its key generated at `init`, in PEM.
#[derive(Debug)]
pub struct GeneratedTls {
    /// The CA certificate clients trust.
    pub ca_cert_pem: String,
    /// The server certificate followed by the CA certificate.
    pub chain_pem: String,
    /// The server's private key (PKCS#8). A secret.
    pub key_pem: String,
}

/// Generates a private CA (its key is discarded after signing) and a server certificate for
/// `sans` (DNS names or IP addresses), both ECDSA P-256 ([`accord_daemon::pki`], server profile).
pub fn generate(common_name: &str, sans: &[String]) -> Result<GeneratedTls, Error> {
    use accord_daemon::pki::{Profile, generate};
    let m = generate(
        &format!("{common_name} witness CA"),
        common_name,
        sans,
        Profile::Server,
    )
    .map_err(daemon_err)?;
    Ok(GeneratedTls {
        chain_pem: format!("{}{}", m.cert_pem, m.ca_cert_pem),
        ca_cert_pem: m.ca_cert_pem,
        key_pem: m.key_pem,
    })
}
