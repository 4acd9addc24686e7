//! Reading TLS material from PEM files (certificates, then private keys). Errors name the file
//! and never echo its content.

use crate::error::Error;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;

fn pem_err(path: &Path, reason: impl std::fmt::Display) -> Error {
    Error::Pem {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Reads every certificate in a PEM file (a leaf first, then its chain, or a CA bundle).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let pem = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let certs = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err(path, e))?;
    if certs.is_empty() {
        return Err(pem_err(path, "no certificate found"));
    }
    Ok(certs)
}

/// Reads the first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    let pem = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| pem_err(path, e))?
        .ok_or_else(|| pem_err(path, "no private key found"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_and_keys_load_and_bad_files_are_named() {
        let dir = std::env::temp_dir().join(format!("accord-daemon-pem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = crate::pki::generate(
            "acme CA",
            "acme",
            &["localhost".to_string()],
            crate::pki::Profile::MutualTls,
        )
        .unwrap();
        let chain = dir.join("chain.pem");
        std::fs::write(&chain, format!("{}{}", m.cert_pem, m.ca_cert_pem)).unwrap();
        let key = dir.join("key.pem");
        std::fs::write(&key, &m.key_pem).unwrap();
        assert_eq!(load_certs(&chain).unwrap().len(), 2);
        assert!(load_key(&key).is_ok());
        // A key file is not a certificate file, and the reverse; a missing file is an I/O error.
        let e = load_certs(&key).unwrap_err();
        assert!(matches!(e, Error::Pem { .. }), "{e}");
        assert!(
            e.to_string().contains("key.pem: no certificate found"),
            "{e}"
        );
        let e = load_key(&chain).unwrap_err();
        assert!(e.to_string().contains("no private key found"), "{e}");
        assert!(!e.to_string().contains("BEGIN"), "{e}");
        let e = load_certs(&dir.join("absent.pem")).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
