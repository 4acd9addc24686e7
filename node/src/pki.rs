//! TLS material for a node: a private CA per installation and a leaf certificate it issues,
//! valid for both server and client authentication (so the same identity serves gRPC and
//! connects to peers with mutual TLS). Peers and clients trust the CA.
//!
//! The generation itself is shared daemon plumbing ([`accord_daemon::pki`], mutual-TLS
//! profile). `accord-node init` does not keep the CA key at all (issue 8), so the CA certifies
//! exactly the one leaf; it carries no name constraints, which gRPC's C core refuses (issue 28).

use crate::error::Error;

pub use accord_daemon::pki::TlsMaterial;

/// Generates a CA named after `name` ("{name} Accord CA") and a leaf for `sans` (DNS names or
/// IP addresses).
pub fn generate(name: &str, sans: &[String]) -> Result<TlsMaterial, Error> {
    accord_daemon::pki::generate(
        &format!("{name} Accord CA"),
        name,
        sans,
        accord_daemon::pki::Profile::MutualTls,
    )
    .map_err(|e| Error::Tls(e.to_string()))
}

/// As [`generate`], for a leaf key that stays (`key_pem`): a new CA and leaf certificate for
/// the same TLS key (`accord-node tls reissue`).
pub fn generate_for_key(name: &str, sans: &[String], key_pem: &str) -> Result<TlsMaterial, Error> {
    accord_daemon::pki::generate_for_key(
        &format!("{name} Accord CA"),
        name,
        sans,
        accord_daemon::pki::Profile::MutualTls,
        Some(key_pem),
    )
    .map_err(|e| Error::Tls(e.to_string()))
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
