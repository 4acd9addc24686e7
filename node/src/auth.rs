//! Who is calling: bearer tokens bound to parties (for `Declare`) and to the operator (for
//! AdminService). Tokens are compared by their SHA-256, in constant time.

use crate::error::Error;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// Token hashes to party names, and the operator's token hash.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    parties: HashMap<[u8; 32], String>,
    admin: Option<[u8; 32]>,
}

fn hash_hex(h: &str) -> Option<[u8; 32]> {
    hex::decode(h).ok()?.try_into().ok()
}

fn bearer<T>(req: &tonic::Request<T>) -> Result<[u8; 32], Error> {
    let v = req
        .metadata()
        .get("authorization")
        .ok_or_else(|| Error::Unauthenticated("missing authorization: Bearer <token>".into()))?;
    let s = v
        .to_str()
        .map_err(|_| Error::Unauthenticated("authorization is not ASCII".into()))?;
    let t = s
        .strip_prefix("Bearer ")
        .ok_or_else(|| Error::Unauthenticated("authorization must be \"Bearer <token>\"".into()))?;
    Ok(Sha256::digest(t.trim().as_bytes()).into())
}

fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Tokens {
    /// Builds the table from the validated config.
    pub fn from_config(c: &crate::config::Config) -> Self {
        let parties = c
            .parties
            .iter()
            .filter_map(|p| Some((hash_hex(p.token_sha256.as_deref()?)?, p.name.clone())))
            .collect();
        Self {
            parties,
            admin: c.admin.token_sha256.as_deref().and_then(hash_hex),
        }
    }

    /// The party whose bearer token the request carries.
    pub fn party<T>(&self, req: &tonic::Request<T>) -> Result<String, Error> {
        let h = bearer(req)?;
        self.parties
            .iter()
            .find(|(k, _)| ct_eq(k, &h))
            .map(|(_, p)| p.clone())
            .ok_or_else(|| Error::Unauthenticated("unknown token".into()))
    }

    /// Checks the operator token.
    pub fn admin<T>(&self, req: &tonic::Request<T>) -> Result<(), Error> {
        let Some(a) = &self.admin else {
            return Err(Error::PermissionDenied(
                "AdminService is closed: no admin.token_sha256 configured".into(),
            ));
        };
        if ct_eq(a, &bearer(req)?) {
            Ok(())
        } else {
            Err(Error::Unauthenticated("unknown token".into()))
        }
    }
}
