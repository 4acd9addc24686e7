//! Why a connection to a peer failed, in words an operator can act on (issue 9, "Clearer
//! failures"): `peer health` says "TLS handshake refused by peer: UnknownCA" rather than the
//! transport's "operation was canceled".
//!
//! Two sources: the error chain of a failed call, when it still holds the rustls error
//! ([`classify`]); and, when the transport lost it (with TLS 1.3 the server judges the client's
//! certificate after the client has finished its handshake, so a refusal arrives as an alert on
//! the connection's first read, inside hyper's connection task), a one-off handshake with the
//! sender's own TLS settings that reads the peer's first answer ([`probe`]).

use super::FedContext;
use super::peers::Peer;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A TLS or connection cause found in an error chain, described for the operator.
pub fn classify(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(describe(t));
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if let Some(t) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return Some(describe(t));
            }
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return Some(
                    "connection refused: is the peer's node running at its endpoint?".into(),
                );
            }
        }
        cur = err.source();
    }
    None
}

fn describe(e: &rustls::Error) -> String {
    match e {
        rustls::Error::AlertReceived(alert) => format!(
            "TLS handshake refused by peer: {alert:?} (it does not accept this node's \
             certificate: it must have this organisation as a peer, with our CA)"
        ),
        rustls::Error::InvalidCertificate(c) => {
            format!("TLS: the peer's certificate is not trusted: {c:?} (check the peer's tls_pem)")
        }
        other => format!("TLS handshake failed: {other}"),
    }
}

/// Whether a failed call's message looks like a transport failure worth a [`probe`].
pub fn is_transport(msg: &str) -> bool {
    let m = msg.to_lowercase();
    [
        "transport",
        "canceled",
        "cancelled",
        "connection",
        "broken pipe",
        "unavailable",
    ]
    .iter()
    .any(|w| m.contains(w))
}

/// Connects to `peer` with the sender's TLS settings (our certificate, the peer's CA, ALPN h2),
/// sends the HTTP/2 preface and reads the peer's first answer: `Some(cause)` when the peer
/// refused us or could not be reached, `None` when it accepted (or the probe could not run).
pub async fn probe(cx: &FedContext, peer: &Peer, timeout: Duration) -> Option<String> {
    // The first of a peer's endpoints (the one its operator lists first: its usual writer).
    let uri: http::Uri = peer
        .record
        .endpoint
        .split(',')
        .next()?
        .trim()
        .parse()
        .ok()?;
    let host = uri
        .host()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut peer.record.tls_pem.as_bytes()).flatten() {
        // A pinned leaf is not a trust anchor; then the probe reports the certificate error.
        let _ = roots.add(c);
    }
    let certs = crate::tls::load_certs(&cx.tls.0).ok()?;
    let key = crate::tls::load_key(&cx.tls.1).ok()?;
    let mut cfg = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .ok()?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let name = rustls::pki_types::ServerName::try_from(host.clone()).ok()?;
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| classify(&e).unwrap_or_else(|| format!("cannot connect: {e}")))?;
        let mut tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| classify(&e).unwrap_or_else(|| format!("TLS handshake failed: {e}")))?;
        // The HTTP/2 client preface and an empty SETTINGS frame: a server that accepted us
        // answers with its SETTINGS; one that refused our certificate sends an alert.
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        let wrote = tls.write_all(&hello).await;
        let mut buf = [0u8; 9];
        match tls.read(&mut buf).await {
            Ok(n) if n > 0 => Ok(()),
            Ok(_) => Err(wrote.err().and_then(|e| classify(&e)).unwrap_or_else(|| {
                "the peer closed the connection right after the TLS handshake (does it \
                 accept this node's certificate?)"
                    .to_string()
            })),
            Err(e) => Err(classify(&e).unwrap_or_else(|| format!("connection failed: {e}"))),
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Err(cause)) => {
            if cause.starts_with("TLS") {
                cx.metrics.tls_handshake_failed("client");
            }
            Some(cause)
        }
        _ => None,
    }
}
