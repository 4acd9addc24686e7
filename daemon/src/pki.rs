//! TLS material generated at `init`: a private CA per installation and one leaf certificate it
//! issues (rcgen, ECDSA P-256). Clients and peers trust the CA.
//!
//! Two profiles, because the two daemons use their identities differently:
//! - [`Profile::MutualTls`] (a node): the leaf serves gRPC *and* connects to peers with mutual
//!   TLS, so it carries both server and client authentication; the CA is name-constrained
//!   (RFC 5280 §4.2.1.10) to the leaf's names, so its key — were it ever stolen — could not
//!   mint certificates for any other host (issue 8).
//! - [`Profile::Server`] (a witness): a server certificate only, under a plain CA.
//!
//! Either way the caller decides whether the CA key is kept; `init` drops it.

use crate::error::Error;
use rcgen::{
    BasicConstraints, CertificateParams, CidrSubnet, DnType, ExtendedKeyUsagePurpose,
    GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose, NameConstraints,
};

/// What the certificates are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Server and client authentication under a CA constrained to the leaf's names (a node).
    MutualTls,
    /// A server certificate under an unconstrained CA (a witness).
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
/// names or IP addresses), per `profile`.
pub fn generate(
    ca_common_name: &str,
    common_name: &str,
    sans: &[String],
    profile: Profile,
) -> Result<TlsMaterial, Error> {
    let (ca_cert_pem, ca_key_pem, issuer) = ca(ca_common_name, sans, profile)?;
    let (cert_pem, key_pem) = leaf(common_name, sans, profile, &issuer)?;
    Ok(TlsMaterial {
        ca_cert_pem,
        ca_key_pem,
        cert_pem,
        key_pem,
    })
}

/// The CA. Under [`Profile::MutualTls`] it may issue certificates for `sans` only (name
/// constraints: each DNS name and its subdomains, each IP address exactly). Returns its PEM,
/// its key's PEM and the issuer.
fn ca(
    common_name: &str,
    sans: &[String],
    profile: Profile,
) -> Result<(String, String, Issuer<'static, KeyPair>), Error> {
    let ca_key = KeyPair::generate().map_err(rc)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(rc)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, common_name.to_owned());
    if profile == Profile::MutualTls {
        ca.name_constraints = Some(NameConstraints {
            permitted_subtrees: sans
                .iter()
                .map(|s| match s.parse::<std::net::IpAddr>() {
                    Ok(ip) => GeneralSubtree::IpAddress(CidrSubnet::from_addr_prefix(
                        ip,
                        if ip.is_ipv4() { 32 } else { 128 },
                    )),
                    Err(_) => GeneralSubtree::DnsName(s.clone()),
                })
                .collect(),
            excluded_subtrees: Vec::new(),
        });
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
    }
    let ca_cert = ca.self_signed(&ca_key).map_err(rc)?;
    let ca_cert_pem = ca_cert.pem();
    let ca_key_pem = ca_key.serialize_pem();
    Ok((ca_cert_pem, ca_key_pem, Issuer::new(ca, ca_key)))
}

/// A leaf for `sans`. Returns its PEM and its key's PEM.
fn leaf(
    common_name: &str,
    sans: &[String],
    profile: Profile,
    issuer: &Issuer<'static, KeyPair>,
) -> Result<(String, String), Error> {
    let key = KeyPair::generate().map_err(rc)?;
    let mut p = CertificateParams::new(sans.to_vec()).map_err(rc)?;
    p.distinguished_name
        .push(DnType::CommonName, common_name.to_owned());
    if profile == Profile::MutualTls {
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    }
    let cert = p.signed_by(&key, issuer).map_err(rc)?;
    Ok((cert.pem(), key.serialize_pem()))
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

    #[test]
    fn the_mutual_tls_ca_issues_only_for_the_node_names() {
        let sans: Vec<String> = ["localhost", "127.0.0.1", "::1", "acme.accord"]
            .map(String::from)
            .to_vec();
        let (ca_pem, _, issuer) = ca("acme Accord CA", &sans, Profile::MutualTls).unwrap();
        let v = verifier(&ca_pem);
        let (own, _) = leaf("acme", &sans, Profile::MutualTls, &issuer).unwrap();
        for host in ["localhost", "127.0.0.1", "acme.accord"] {
            assert!(check(&v, &own, host).is_ok(), "{host}");
        }
        // The CA key signs a certificate for another host: no client accepts it.
        let other = vec!["bank.example".to_string(), "10.0.0.1".to_string()];
        let (foreign, _) = leaf("mallory", &other, Profile::MutualTls, &issuer).unwrap();
        for host in ["bank.example", "10.0.0.1"] {
            let e = check(&v, &foreign, host).unwrap_err();
            assert!(e.to_string().to_lowercase().contains("name"), "{host}: {e}");
        }
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
