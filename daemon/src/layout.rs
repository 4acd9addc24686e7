//! The directories `accord-node init` and `accord-witness init` create: which file goes where.
//! The daemons write them, their config templates point at them, and `accordctl`'s in-process
//! nodes and the end-to-end tests read them back — so the names are defined here, once.
//! Paths are relative to the directory given to `init` (the config file's directory).
//!
//! Also the two helpers `init` writes them with: [`write_new`] (never overwrites; secrets are
//! owner-only) and [`token`] / [`token_sha256`] (bearer tokens and the hashes configs keep).

use crate::error::Error;
use sha2::{Digest, Sha256};
use std::path::Path;

/// An Accord node's directory (`accord-node init --dir`).
pub mod node {
    /// The config file.
    pub const CONFIG: &str = "accord.toml";
    /// Subdirectories `init` creates.
    pub const DIRS: &[&str] = &["keys", "tls", "parties", "data"];
    /// The RocksDB ledger.
    pub const DATA_DIR: &str = "data";
    /// The node key (C2SP signed-note skey): signs checkpoints, receipts and its own records.
    pub const NODE_SKEY: &str = "keys/node.skey";
    /// The node key's vkey (give it to peers).
    pub const NODE_VKEY: &str = "keys/node.vkey";
    /// The private CA's certificate (give it to peers and clients). Its key is not kept.
    pub const TLS_CA: &str = "tls/ca.pem";
    /// The node's TLS leaf certificate (server and client).
    pub const TLS_CERT: &str = "tls/node.pem";
    /// The TLS leaf's private key.
    pub const TLS_KEY: &str = "tls/node.key";
    /// The operator's bearer token (the config keeps its SHA-256).
    pub const ADMIN_TOKEN: &str = "admin.token";

    /// A party's record key (`parties/<party>.skey`).
    pub fn party_skey(party: &str) -> String {
        format!("parties/{party}.skey")
    }

    /// A party's bearer token (`parties/<party>.token`).
    pub fn party_token(party: &str) -> String {
        format!("parties/{party}.token")
    }
}

/// An Accord witness's directory (`accord-witness init --dir`).
pub mod witness {
    /// The config file.
    pub const CONFIG: &str = "witness.toml";
    /// The RocksDB state.
    pub const DATA_DIR: &str = "data";
    /// The cosigner key (C2SP signed-note skey, signature type 0x04).
    pub const SKEY: &str = "witness.skey";
    /// The cosigner key's vkey (give it to the logs).
    pub const VKEY: &str = "witness.vkey";
    /// The TLS directory.
    pub const TLS_DIR: &str = "tls";
    /// The private CA's certificate (clients trust it). Its key is not kept.
    pub const TLS_CA: &str = "tls/ca.pem";
    /// The server certificate followed by the CA certificate.
    pub const TLS_CERT: &str = "tls/cert.pem";
    /// The server's private key.
    pub const TLS_KEY: &str = "tls/key.pem";
    /// The admin bearer token (the config keeps its SHA-256).
    pub const ADMIN_TOKEN: &str = "admin.token";
}

/// Whether a file `init` writes is a secret (owner read/write only) or public.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Mode 0600 on Unix.
    Secret,
    /// Mode 0644 on Unix.
    Public,
}

/// Creates `path` with `text` and syncs it; fails if it already exists (init never overwrites).
pub fn write_new(path: &Path, text: &str, access: Access) -> Result<(), Error> {
    use std::io::Write as _;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(match access {
            Access::Secret => 0o600,
            Access::Public => 0o644,
        });
    }
    #[cfg(not(unix))]
    let _ = access;
    let mut f = opts.open(path).map_err(|e| Error::io(path, e))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| Error::io(path, e))
}

/// A fresh bearer token: 32 random bytes, hex.
pub fn token() -> String {
    let mut b = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut b);
    hex::encode(b)
}

/// SHA-256 of a bearer token, hex (what configs store instead of the token).
pub fn token_sha256(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_new_never_overwrites_and_keeps_secrets_private() {
        let dir = std::env::temp_dir().join(format!("accord-daemon-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(node::ADMIN_TOKEN);
        let t = token();
        assert_eq!(t.len(), 64);
        assert_ne!(t, token());
        write_new(&p, &t, Access::Secret).unwrap();
        assert!(matches!(
            write_new(&p, "other", Access::Secret),
            Err(Error::Io { .. })
        ));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), t);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            token_sha256("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
