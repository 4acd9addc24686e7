//! TLS material generated at `init`: a private CA per installation and one leaf certificate it
//! issues (rcgen, ECDSA P-256). Clients and peers trust the CA.
//!
//! Two profiles, because the two daemons use their identities differently:
//! - [`Profile::MutualTls`] (a node): the leaf serves gRPC *and* connects to peers with mutual
//!   TLS, so it carries both server and client authentication.
//! - [`Profile::Server`] (a witness): a server certificate only.
//!
//! The CA carries no name constraints (issue 28): gRPC's C core (BoringSSL: Python, C++, Ruby,
//! PHP, C# clients) refuses a chain whose CA has IP-address constraints ("unsupported name
//! constraint type"), and constraints on DNS names alone would leave the leaf's IP addresses
//! unconstrained. What they guarded against — the CA key minting certificates for other hosts —
//! is ruled out by not keeping that key: `init` (and `accord-node tls reissue`) sign the one
//! leaf and drop it, so the CA certifies exactly one key, ever. Every CA has the key usages
//! OpenSSL's strict mode and JSSE expect (`keyCertSign`, `cRLSign`), a subject key identifier,
//! and a path length of 0.

use crate::error::Error;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// What the certificates are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// A leaf for server and client authentication (a node).
    MutualTls,
    /// A server certificate (a witness).
    Server,
}

/// PEM text of a CA and a leaf it issued.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    /// The CA certificate (give this to peers and clients).
    pub ca_cert_pem: String,
    /// The CA private key (to issue more certificates; `init` does not write it).
    pub ca_key_pem: String,
    /// The leaf certificate.
    pub cert_pem: String,
    /// The leaf private key (PKCS#8). A secret.
    pub key_pem: String,
}

fn rc(e: rcgen::Error) -> Error {
    Error::Certificate(e.to_string())
}

/// Generates a CA called `ca_common_name` and a leaf called `common_name` for `sans` (DNS
/// names or IP addresses), per `profile`, with a new leaf key.
pub fn generate(
    ca_common_name: &str,
    common_name: &str,
    sans: &[String],
    profile: Profile,
) -> Result<TlsMaterial, Error> {
    generate_for_key(ca_common_name, common_name, sans, profile, None)
}

/// As [`generate`], but the leaf certifies `leaf_key_pem` (a PEM private key rcgen can sign
/// with: PKCS#8 ECDSA P-256/P-384 or Ed25519) when given: a new CA and certificate for a key
/// that stays (`accord-node tls reissue`). `key_pem` of the result is that key again.
pub fn generate_for_key(
    ca_common_name: &str,
    common_name: &str,
    sans: &[String],
    profile: Profile,
    leaf_key_pem: Option<&str>,
) -> Result<TlsMaterial, Error> {
    let key = match leaf_key_pem {
        Some(pem) => KeyPair::from_pem(pem).map_err(rc)?,
        None => KeyPair::generate().map_err(rc)?,
    };
    let (ca_cert_pem, ca_key_pem, issuer) = ca(ca_common_name)?;
    let cert_pem = leaf(common_name, sans, profile, &key, &issuer)?;
    Ok(TlsMaterial {
        ca_cert_pem,
        ca_key_pem,
        cert_pem,
        key_pem: key.serialize_pem(),
    })
}

/// The CA: may sign certificates (no intermediates below it), no name constraints. Returns its
/// PEM, its key's PEM and the issuer.
fn ca(common_name: &str) -> Result<(String, String, Issuer<'static, KeyPair>), Error> {
    let ca_key = KeyPair::generate().map_err(rc)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(rc)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, common_name.to_owned());
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(rc)?;
    let ca_cert_pem = ca_cert.pem();
    let ca_key_pem = ca_key.serialize_pem();
    Ok((ca_cert_pem, ca_key_pem, Issuer::new(ca, ca_key)))
}

/// A leaf for `sans`, certifying `key`. Returns its PEM.
fn leaf(
    common_name: &str,
    sans: &[String],
    profile: Profile,
    key: &KeyPair,
    issuer: &Issuer<'static, KeyPair>,
) -> Result<String, Error> {
    let mut p = CertificateParams::new(sans.to_vec()).map_err(rc)?;
    p.distinguished_name
        .push(DnType::CommonName, common_name.to_owned());
    p.use_authority_key_identifier_extension = true;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = match profile {
        Profile::MutualTls => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        Profile::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
    };
    let cert = p.signed_by(key, issuer).map_err(rc)?;
    Ok(cert.pem())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    fn der(pem: &str) -> CertificateDer<'static> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
    }

    fn verifier(ca_pem: &str) -> std::sync::Arc<rustls::client::WebPkiServerVerifier> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der(ca_pem)).unwrap();
        rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap()
    }

    fn check(
        v: &rustls::client::WebPkiServerVerifier,
        cert: &str,
        host: &str,
    ) -> Result<(), rustls::Error> {
        v.verify_server_cert(
            &der(cert),
            &[],
            &ServerName::try_from(host.to_string()).unwrap(),
            &[],
            UnixTime::now(),
        )
        .map(|_| ())
    }

    fn parse(pem: &str) -> Vec<u8> {
        der(pem).as_ref().to_vec()
    }

    #[test]
    fn the_ca_has_no_name_constraints_and_only_signs_certificates() {
        let sans: Vec<String> = ["localhost", "127.0.0.1", "::1", "acme.accord"]
            .map(String::from)
            .to_vec();
        for profile in [Profile::MutualTls, Profile::Server] {
            let m = generate("acme Accord CA", "acme", &sans, profile).unwrap();
            let ca_der = parse(&m.ca_cert_pem);
            let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
            // BoringSSL (gRPC C core) refuses IP-address constraints; there are none at all.
            assert!(ca.name_constraints().unwrap().is_none(), "{profile:?}");
            let bc = ca.basic_constraints().unwrap().unwrap().value;
            assert!(bc.ca && bc.path_len_constraint == Some(0), "{profile:?}");
            let ku = ca.key_usage().unwrap().unwrap().value;
            assert!(ku.key_cert_sign() && ku.crl_sign(), "{profile:?}");
            let leaf_der = parse(&m.cert_pem);
            let (_, leaf) = x509_parser::parse_x509_certificate(&leaf_der).unwrap();
            let eku = leaf.extended_key_usage().unwrap().unwrap().value;
            assert!(eku.server_auth, "{profile:?}");
            assert_eq!(
                eku.client_auth,
                profile == Profile::MutualTls,
                "{profile:?}"
            );
            let v = verifier(&m.ca_cert_pem);
            for host in ["localhost", "127.0.0.1", "acme.accord"] {
                assert!(check(&v, &m.cert_pem, host).is_ok(), "{profile:?} {host}");
            }
        }
    }

    #[test]
    fn a_new_ca_can_certify_a_kept_leaf_key() {
        let sans = vec!["localhost".to_string()];
        let old = generate("acme Accord CA", "acme", &sans, Profile::MutualTls).unwrap();
        let new = generate_for_key(
            "acme Accord CA",
            "acme",
            &sans,
            Profile::MutualTls,
            Some(&old.key_pem),
        )
        .unwrap();
        assert_ne!(new.ca_cert_pem, old.ca_cert_pem);
        let spki = |pem: &str| {
            let d = parse(pem);
            let (_, c) = x509_parser::parse_x509_certificate(&d).unwrap();
            c.public_key().raw.to_vec()
        };
        assert_eq!(spki(&new.cert_pem), spki(&old.cert_pem));
        assert!(check(&verifier(&new.ca_cert_pem), &new.cert_pem, "localhost").is_ok());
        assert!(check(&verifier(&old.ca_cert_pem), &new.cert_pem, "localhost").is_err());
        assert!(generate_for_key("c", "c", &sans, Profile::Server, Some("not a key")).is_err());
    }

    #[test]
    fn a_server_leaf_verifies_for_its_names_only() {
        let sans = vec!["localhost".to_string(), "w.example".to_string()];
        let m = generate("w witness CA", "w", &sans, Profile::Server).unwrap();
        let v = verifier(&m.ca_cert_pem);
        assert!(check(&v, &m.cert_pem, "w.example").is_ok());
        assert!(check(&v, &m.cert_pem, "other.example").is_err());
    }
}
