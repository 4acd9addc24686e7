//! TLS for the node's listener (rustls), with optional or required client certificates (mutual
//! TLS). The node runs its own TLS acceptor rather than tonic's so that handshakes happen off the
//! accept loop (a slow client cannot stall others) and so that client verification can trust the
//! peers' CAs. The client-certificate verifier is dynamic ([`DynamicClientVerifier`]): it
//! accepts certificates chaining to a configured `tls.client_ca` or to any enabled peer's CA,
//! and follows peer changes without a restart.
//!
//! Outgoing connections to peers ([`peer_channel`]) use our own rustls connector too, so that a
//! peer pinned to its leaf certificate (`pin_sha256`, issue 8) is held to it as a server.
//!
//! Code map: [`verifier`] (the listener's client-certificate verifier and server config),
//! [`listener`] (accepting connections: handshakes off the accept loop, bounds, the guarded
//! stream), [`client`] (channels to Accord services and to peers).

mod client;
mod listener;
mod verifier;

pub use client::{connect, peer_channel};
pub use listener::{ListenerLimits, ListenerStats, incoming};
pub use verifier::{DynamicClientVerifier, server_config};

use crate::error::Error;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

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
