//! TLS material for a node or witness: a private CA per installation and a leaf certificate it
//! issues, valid for both server and client authentication (so the same identity serves gRPC
//! and connects to peers with mutual TLS). Peers and clients trust the CA.
//!
//! The CA is name-constrained (RFC 5280 §4.2.1.10) to the names of the leaf it issues, so its
//! key — were it ever stolen — could not mint certificates for any other host; and
//! `accord-node init` does not keep the CA key at all (issue 8).

use crate::error::Error;
use rcgen::{
    BasicConstraints, CertificateParams, CidrSubnet, DnType, ExtendedKeyUsagePurpose,
    GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose, NameConstraints,
};

/// PEM text of a CA and a leaf it issued.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    /// The CA certificate (give this to peers and clients).
    pub ca_cert_pem: String,
    /// The CA private key (to issue more certificates; `init` does not write it).
    pub ca_key_pem: String,
    /// The leaf certificate.
    pub cert_pem: String,
    /// The leaf private key.
    pub key_pem: String,
}

fn tls_err(e: rcgen::Error) -> Error {
    Error::Tls(e.to_string())
}

/// Generates a CA named after `name` and a leaf for `sans` (DNS names or IP addresses).
pub fn generate(name: &str, sans: &[String]) -> Result<TlsMaterial, Error> {
    let (ca_cert_pem, ca_key_pem, issuer) = ca(name, sans)?;
    let (cert_pem, key_pem) = leaf(name, sans, &issuer)?;
    Ok(TlsMaterial {
        ca_cert_pem,
        ca_key_pem,
        cert_pem,
        key_pem,
    })
}

/// A CA that may issue certificates for `sans` only (name constraints: each DNS name and its
/// subdomains, each IP address exactly). Returns its PEM, its key's PEM and the issuer.
fn ca(name: &str, sans: &[String]) -> Result<(String, String, Issuer<'static, KeyPair>), Error> {
    let ca_key = KeyPair::generate().map_err(tls_err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
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
    ca.distinguished_name
        .push(DnType::CommonName, format!("{name} Accord CA"));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(tls_err)?;
    let ca_cert_pem = ca_cert.pem();
    let ca_key_pem = ca_key.serialize_pem();
    Ok((ca_cert_pem, ca_key_pem, Issuer::new(ca, ca_key)))
}

/// A leaf for `sans`, for server and client authentication. Returns its PEM and its key's PEM.
fn leaf(
    name: &str,
    sans: &[String],
    issuer: &Issuer<'static, KeyPair>,
) -> Result<(String, String), Error> {
    let key = KeyPair::generate().map_err(tls_err)?;
    let mut p = CertificateParams::new(sans.to_vec()).map_err(tls_err)?;
    p.distinguished_name.push(DnType::CommonName, name);
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let cert = p.signed_by(&key, issuer).map_err(tls_err)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The names a node's certificate carries by default.
pub fn default_sans(name: &str) -> Vec<String> {
    vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        format!("{name}.accord"),
    ]
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

    #[test]
    fn the_ca_issues_only_for_the_node_names() {
        let sans = default_sans("acme");
        let (ca_pem, _, issuer) = ca("acme", &sans).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der(&ca_pem)).unwrap();
        let v = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            crate::tls::provider(),
        )
        .build()
        .unwrap();
        let check = |cert: &str, host: &str| {
            v.verify_server_cert(
                &der(cert),
                &[],
                &ServerName::try_from(host.to_string()).unwrap(),
                &[],
                UnixTime::now(),
            )
        };
        let (own, _) = leaf("acme", &sans, &issuer).unwrap();
        for host in ["localhost", "127.0.0.1", "acme.accord"] {
            assert!(check(&own, host).is_ok(), "{host}");
        }
        // The CA key signs a certificate for another host: no client accepts it.
        let other = vec!["bank.example".to_string(), "10.0.0.1".to_string()];
        let (foreign, _) = leaf("mallory", &other, &issuer).unwrap();
        for host in ["bank.example", "10.0.0.1"] {
            let e = check(&foreign, host).unwrap_err();
            assert!(e.to_string().to_lowercase().contains("name"), "{host}: {e}");
        }
    }
}
