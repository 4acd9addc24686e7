//! ML-DSA-44 (FIPS 204) keys for witness cosignatures (c2sp.org/tlog-cosignature, type 0x06),
//! over RustCrypto's `ml-dsa`.
//!
//! - vkey: `<name>+<hex key ID>+base64(0x06 || 1312-byte public key)`
//! - skey: `PRIVATE+KEY+<name>+<hex key ID>+base64(0x06 || 32-byte seed)` — the FIPS 204
//!   `ML-DSA.KeyGen_internal` seed ξ, from which the whole key pair is derived.
//! - key ID: `SHA-256(name || 0x0A || 0x06 || public key)[:4]`.
//!
//! Signatures are pure ML-DSA-44 (`ML-DSA.Sign` with an empty context string), 2,420 bytes, made
//! with FIPS 204's deterministic variant (rnd = 0^32, §3.4): the same key and message give the
//! same signature, so the test vectors are reproducible and signing needs no randomness.

use std::fmt;
use std::sync::Arc;

use ml_dsa::{MlDsa44, Seed, SigningKey, VerifyingKey};

use super::key::{KeyKind, Verifier, check_key_name, key_id};
use crate::error::{Error, KeyRef};

/// The length of an encoded ML-DSA-44 public key.
pub const PUBLIC_KEY_LEN: usize = 1312;
/// The length of an ML-DSA-44 signature.
pub const SIGNATURE_LEN: usize = 2420;
/// The length of the private seed ξ.
pub const SEED_LEN: usize = 32;

/// An ML-DSA-44 public key: its encoding and the decoded (expanded) key, shared.
#[derive(Clone)]
pub(crate) struct MlDsa44Public(Arc<(Vec<u8>, VerifyingKey<MlDsa44>)>);

impl MlDsa44Public {
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<MlDsa44Public, Error> {
        let enc = ml_dsa::EncodedVerifyingKey::<MlDsa44>::try_from(bytes).map_err(|_| {
            Error::MalformedKey {
                reason: "ML-DSA-44 public key is not 1312 bytes",
            }
        })?;
        let key = VerifyingKey::<MlDsa44>::decode(&enc);
        Ok(MlDsa44Public(Arc::new((bytes.to_vec(), key))))
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0.0
    }

    /// Pure ML-DSA-44 verification with an empty context (FIPS 204 Algorithm 3).
    pub(crate) fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        let Ok(sig) = ml_dsa::Signature::<MlDsa44>::try_from(sig) else {
            return false;
        };
        self.0.1.verify_with_context(msg, &[], &sig)
    }
}

impl PartialEq for MlDsa44Public {
    fn eq(&self, other: &Self) -> bool {
        self.0.0 == other.0.0
    }
}

impl Eq for MlDsa44Public {}

impl fmt::Debug for MlDsa44Public {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MlDsa44Public({}…)", hex::encode(&self.0.0[..8]))
    }
}

/// An ML-DSA-44 cosigner key pair with its name (the signing half of a type 0x06 key).
#[derive(Clone)]
pub(crate) struct MlDsa44Pair {
    key: Arc<SigningKey<MlDsa44>>,
    verifier: Verifier,
}

impl MlDsa44Pair {
    /// The key pair derived from the 32-byte seed ξ (FIPS 204 `ML-DSA.KeyGen_internal`).
    pub(crate) fn from_seed(name: &str, seed: &[u8; SEED_LEN]) -> Result<MlDsa44Pair, Error> {
        check_key_name(name)?;
        let key = SigningKey::<MlDsa44>::from_seed(&Seed::from(*seed));
        let public = ml_dsa::signature::Keypair::verifying_key(&key).encode();
        let verifier = Verifier::new_ml_dsa_44(name, public.as_slice())?;
        Ok(MlDsa44Pair {
            key: Arc::new(key),
            verifier,
        })
    }

    pub(crate) fn generate(
        name: &str,
        rng: &mut (impl rand::RngCore + rand::CryptoRng),
    ) -> Result<MlDsa44Pair, Error> {
        let mut seed = [0u8; SEED_LEN];
        rng.fill_bytes(&mut seed);
        let pair = MlDsa44Pair::from_seed(name, &seed);
        seed.fill(0);
        pair
    }

    /// Parses `PRIVATE+KEY+<name>+<hex key ID>+base64(0x06 || seed)`, checking the key ID.
    pub(crate) fn from_skey_parts(
        name: &str,
        stated: [u8; 4],
        seed: &[u8],
    ) -> Result<MlDsa44Pair, Error> {
        let seed: [u8; SEED_LEN] = seed.try_into().map_err(|_| Error::MalformedKey {
            reason: "ML-DSA-44 private seed is not 32 bytes",
        })?;
        let pair = MlDsa44Pair::from_seed(name, &seed)?;
        super::key::check_stated_id(name, stated, pair.verifier.key_id())?;
        Ok(pair)
    }

    pub(crate) fn to_skey(&self) -> String {
        format!(
            "PRIVATE+KEY+{}+{}+{}",
            self.verifier.name(),
            hex::encode(self.verifier.key_id()),
            super::key::encode_key_material(KeyKind::MlDsa44, self.key.as_seed().as_slice())
        )
    }

    pub(crate) fn verifier(&self) -> &Verifier {
        &self.verifier
    }

    /// A pure ML-DSA-44 signature (empty context, deterministic variant) over `msg`.
    pub(crate) fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, Error> {
        // The crate's `Signer` impl is ML-DSA.Sign's deterministic variant with an empty context.
        let sig = ml_dsa::signature::Signer::try_sign(&*self.key, msg).map_err(|_| {
            Error::MalformedCosignature {
                reason: "ML-DSA-44 signing failed",
            }
        })?;
        Ok(sig.encode().as_slice().to_vec())
    }
}

impl fmt::Debug for MlDsa44Pair {
    // Never print key material: only the public identity.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MlDsa44Pair")
            .field(
                "key",
                &KeyRef::new(self.verifier.name(), self.verifier.key_id()).to_string(),
            )
            .finish_non_exhaustive()
    }
}

/// The key ID of an ML-DSA-44 cosigner key (type 0x06).
pub fn ml_dsa_44_key_id(name: &str, public_key: &[u8]) -> [u8; 4] {
    key_id(name, KeyKind::MlDsa44.type_byte(), public_key)
}
