//! Who is calling: bearer tokens bound to parties (for `Declare` and reads) and to the operator
//! (AdminService, reads), and TLS client certificates the config maps to a party or the
//! operator (issue 8: every WorkService read needs a credential). Tokens and certificates are
//! compared by their SHA-256, in constant time, against every configured entry.

use crate::error::Error;
use sha2::{Digest, Sha256};

/// An authenticated caller of WorkService / LogService reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The node's operator (`admin.token_sha256` / `admin.cert_sha256`): reads everything.
    Operator,
    /// A party of this organisation (by its name inside the organisation).
    Party(String),
}

/// Token and certificate hashes, with the identity each stands for.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    parties: Vec<([u8; 32], String)>,
    admin: Option<[u8; 32]>,
    certs: Vec<([u8; 32], Caller)>,
}

fn hash_hex(h: &str) -> Option<[u8; 32]> {
    hex::decode(h).ok()?.try_into().ok()
}

/// The SHA-256 of the presented bearer token; `None` when no `authorization` header is present.
fn bearer<T>(req: &tonic::Request<T>) -> Result<Option<[u8; 32]>, Error> {
    let Some(v) = req.metadata().get("authorization") else {
        return Ok(None);
    };
    let s = v
        .to_str()
        .map_err(|_| Error::Unauthenticated("authorization is not ASCII".into()))?;
    let t = s
        .strip_prefix("Bearer ")
        .ok_or_else(|| Error::Unauthenticated("authorization must be \"Bearer <token>\"".into()))?;
    Ok(Some(Sha256::digest(t.trim().as_bytes()).into()))
}

fn required_bearer<T>(req: &tonic::Request<T>) -> Result<[u8; 32], Error> {
    bearer(req)?
        .ok_or_else(|| Error::Unauthenticated("missing authorization: Bearer <token>".into()))
}

fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The entry matching `h`, comparing against every entry (no early exit) so that timing does not
/// tell how many entries were tried.
fn find<'a, V>(entries: &'a [([u8; 32], V)], h: &[u8; 32]) -> Option<&'a V> {
    let mut found = None;
    for (k, v) in entries {
        if ct_eq(k, h) && found.is_none() {
            found = Some(v);
        }
    }
    found
}

impl Tokens {
    /// Builds the table from the validated config.
    pub fn from_config(c: &crate::config::Config) -> Self {
        let parties = c
            .parties
            .iter()
            .filter_map(|p| Some((hash_hex(p.token_sha256.as_deref()?)?, p.name.clone())))
            .collect();
        let mut certs: Vec<([u8; 32], Caller)> = c
            .parties
            .iter()
            .flat_map(|p| {
                p.cert_sha256
                    .iter()
                    .filter_map(|h| Some((hash_hex(h)?, Caller::Party(p.name.clone()))))
            })
            .collect();
        certs.extend(
            c.admin
                .cert_sha256
                .iter()
                .filter_map(|h| Some((hash_hex(h)?, Caller::Operator))),
        );
        Self {
            parties,
            admin: c.admin.token_sha256.as_deref().and_then(hash_hex),
            certs,
        }
    }

    /// The party whose bearer token the request carries.
    pub fn party<T>(&self, req: &tonic::Request<T>) -> Result<String, Error> {
        let h = required_bearer(req)?;
        find(&self.parties, &h)
            .cloned()
            .ok_or_else(|| Error::Unauthenticated("unknown token".into()))
    }

    /// Checks the operator token.
    pub fn admin<T>(&self, req: &tonic::Request<T>) -> Result<(), Error> {
        let Some(a) = &self.admin else {
            return Err(Error::PermissionDenied(
                "AdminService is closed: no admin.token_sha256 configured".into(),
            ));
        };
        if ct_eq(a, &required_bearer(req)?) {
            Ok(())
        } else {
            Err(Error::Unauthenticated("unknown token".into()))
        }
    }

    /// Who is calling, for reads. A bearer token, when present, decides (a party's token or the
    /// operator's; any other is UNAUTHENTICATED, even with a mapped certificate); otherwise the
    /// TLS client certificate (its leaf's SHA-256) must be mapped by `parties[].cert_sha256` or
    /// `admin.cert_sha256`. A certificate that chained to a trusted CA but is not mapped — a
    /// peer node's, say — is no credential for reads: UNAUTHENTICATED.
    pub fn caller<T>(&self, req: &tonic::Request<T>) -> Result<Caller, Error> {
        if let Some(h) = bearer(req)? {
            let admin = self
                .admin
                .filter(|a| ct_eq(a, &h))
                .map(|_| Caller::Operator);
            let party = find(&self.parties, &h).map(|p| Caller::Party(p.clone()));
            return party
                .or(admin)
                .ok_or_else(|| Error::Unauthenticated("unknown token".into()));
        }
        let Some(leaf) = req.peer_certs().and_then(|chain| {
            chain
                .first()
                .map(|c| <[u8; 32]>::from(Sha256::digest(c.as_ref())))
        }) else {
            return Err(Error::Unauthenticated(
                "a credential is required: authorization: Bearer <token>, or a client certificate"
                    .into(),
            ));
        };
        find(&self.certs, &leaf).cloned().ok_or_else(|| {
            Error::Unauthenticated(
                "the client certificate is not mapped to a party or the operator".into(),
            )
        })
    }
}
