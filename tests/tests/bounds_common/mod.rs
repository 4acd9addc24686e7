//! Helpers shared by the `bounds_*` tests (issue 8): raw TLS connections (to speak HTTP/2 frames
//! by hand, or nothing at all), the size of a data directory, and status details.
#![allow(dead_code)]

use accord_tests::TestNode;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// How long a test waits for something the server must do on its own (a deadline, not a pace).
pub const WAIT: Duration = Duration::from_secs(20);

/// Total bytes of the files under `dir`.
pub fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// A TLS connection to `node` (trusting its CA, ALPN h2, no client certificate); the handshake
/// is complete when this returns.
pub async fn raw_tls(node: &TestNode) -> TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut node.ca_pem().as_slice()) {
        roots.add(c.unwrap()).unwrap();
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(node.addr).await.unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .expect("TLS handshake")
}

/// Reads `s` until the peer closes it, and returns how long after `since` that was. Fails if it
/// is still open `within` after `since`: a test of a timeout setting passes a bound a few times
/// the setting and well under the setting's default, so a setting the server ignores fails.
pub async fn closed_within<S: tokio::io::AsyncRead + Unpin>(
    s: &mut S,
    since: std::time::Instant,
    within: Duration,
) -> Duration {
    let mut buf = [0u8; 4096];
    let left = within.saturating_sub(since.elapsed());
    tokio::time::timeout(left, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the connection is still open {within:?} after it was opened"));
    since.elapsed()
}

/// An HTTP/2 frame header.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len() as u32;
    let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HPACK header block of literal fields without indexing (RFC 7541, 6.2.2).
pub fn hpack(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (k, v) in headers {
        assert!(k.len() < 127 && v.len() < 127);
        b.push(0);
        b.push(k.len() as u8);
        b.extend_from_slice(k.as_bytes());
        b.push(v.len() as u8);
        b.extend_from_slice(v.as_bytes());
    }
    b
}

/// Reads one HTTP/2 frame: (type, flags, stream, payload).
pub async fn read_frame<S: tokio::io::AsyncRead + Unpin>(
    s: &mut S,
) -> std::io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut h = [0u8; 9];
    s.read_exact(&mut h).await?;
    let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
    let mut p = vec![0u8; len];
    s.read_exact(&mut p).await?;
    Ok((h[3], h[4], stream, p))
}

/// Writes all of `b`.
pub async fn send<S: tokio::io::AsyncWrite + Unpin>(s: &mut S, b: &[u8]) {
    s.write_all(b).await.unwrap();
    s.flush().await.unwrap();
}

/// The `accord-reason` and `accord-field` of a status.
pub fn details(s: &tonic::Status) -> (String, String) {
    (accord_tests::reason(s), accord_tests::field(s))
}

/// The node's ledger size (AdminService.GetStatus).
pub async fn ledger_size(node: &TestNode) -> u64 {
    node.admin()
        .await
        .unwrap()
        .get_status(node.admin_request(accord_proto::pb::admin::v1::GetStatusRequest {}))
        .await
        .unwrap()
        .into_inner()
        .ledger_size
}

/// Every refusal the node keeps, following ListRefusals' pages of `page_size`; also returns each
/// page's encoded size.
pub async fn all_refusals(
    node: &TestNode,
    page_size: u32,
) -> (Vec<accord_proto::pb::admin::v1::Refusal>, Vec<usize>) {
    use accord_proto::pb::admin::v1 as admin;
    use prost::Message;
    let mut adm = node.admin().await.unwrap();
    let mut token = String::new();
    let mut all = Vec::new();
    let mut sizes = Vec::new();
    loop {
        let r = adm
            .list_refusals(node.admin_request(admin::ListRefusalsRequest {
                limit: 0,
                page_token: token.clone(),
                page_size,
            }))
            .await
            .unwrap()
            .into_inner();
        sizes.push(r.encoded_len());
        all.extend(r.refusals);
        token = r.next_page_token;
        if token.is_empty() {
            break;
        }
        assert!(sizes.len() < 10_000, "pages never end");
    }
    (all, sizes)
}
