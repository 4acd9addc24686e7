//! The listener's client-certificate verifier, dynamic over the peers' CAs, and the server's
//! rustls config.

use super::{OFFERED, load_certs, load_key, provider, subject};
use crate::error::Error;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};
use std::path::Path;
use std::sync::Arc;
use std::sync::RwLock;

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
    /// While the instance is a standby (issue 31): client certificates are asked for even with
    /// nothing trusted yet (peers' CAs load when the node opens), so a peer's handshake fails
    /// and its sender moves to another endpoint, rather than completing without its identity
    /// on a connection the node would then serve.
    standby: std::sync::atomic::AtomicBool,
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
            standby: std::sync::atomic::AtomicBool::new(false),
        });
        v.set_peer_certs(Vec::new());
        v
    }

    /// Marks the instance a standby (true) or the node (false); see `standby`.
    pub fn set_standby(&self, standby: bool) {
        self.standby
            .store(standby, std::sync::atomic::Ordering::SeqCst);
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
            || self.standby.load(std::sync::atomic::Ordering::SeqCst)
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
