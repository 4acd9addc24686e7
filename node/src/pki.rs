//! TLS material for a node: a private CA per installation and a leaf certificate it issues,
//! valid for both server and client authentication (so the same identity serves gRPC and
//! connects to peers with mutual TLS). Peers and clients trust the CA.
//!
//! The generation itself is shared daemon plumbing ([`accord_daemon::pki`], mutual-TLS
//! profile): the CA is name-constrained (RFC 5280 §4.2.1.10) to the names of the leaf it
//! issues, and `accord-node init` does not keep the CA key at all (issue 8).

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

/// The names a node's certificate carries by default.
pub fn default_sans(name: &str) -> Vec<String> {
    vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        format!("{name}.accord"),
    ]
}
