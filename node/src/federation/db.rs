//! Federation's column families and small helpers over them. Federation declares its column
//! families here ([`CFS`], created by the ledger's store at open) and reaches them only through
//! the store's typed operations (the raw handle is private to the ledger). Each has one owning
//! module: `peers` ([`super::peers`]), `outbox` ([`super::outbox`]), `receipts`
//! ([`super::receipt_store`]), `inbox` and `quarantine` ([`super::decisions`]). Keys are byte
//! strings with `0x00` separators (names never contain it), values are JSON.

use crate::error::Error;
use crate::ledger::{Batch, Store};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Federation's column families.
pub const CFS: &[&str] = &["outbox", "inbox", "receipts", "peers", "quarantine"];

/// Joins key parts with `0x00`.
pub fn key(parts: &[&[u8]]) -> Vec<u8> {
    let mut k = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            k.push(0);
        }
        k.extend_from_slice(p);
    }
    k
}

/// A prefix: the parts, each followed by `0x00`.
pub fn prefix(parts: &[&[u8]]) -> Vec<u8> {
    let mut k = key(parts);
    k.push(0);
    k
}

/// Reads a JSON value.
pub fn get<T: DeserializeOwned>(store: &Store, cf: &str, k: &[u8]) -> Result<Option<T>, Error> {
    match store.get_extra(cf, k)? {
        Some(v) => decode(cf, &v).map(Some),
        None => Ok(None),
    }
}

/// Puts a JSON value into a batch.
pub fn put<T: Serialize>(
    batch: &mut Batch,
    store: &Store,
    cf: &str,
    k: &[u8],
    v: &T,
) -> Result<(), Error> {
    let bytes = serde_json::to_vec(v).map_err(|e| Error::Internal(e.to_string()))?;
    store.put_extra(batch, cf, k, &bytes)
}

/// Deletes a key in a batch.
pub fn delete(batch: &mut Batch, store: &Store, cf: &str, k: &[u8]) -> Result<(), Error> {
    store.delete_extra(batch, cf, k)
}

/// Writes a batch; `sync` waits for the WAL to reach the disk.
pub fn write(store: &Store, batch: Batch, sync: bool) -> Result<(), Error> {
    store.write(batch, sync)
}

/// A key and its value.
pub type Kv = (Vec<u8>, Vec<u8>);

/// Every (key, value) under `prefix`, in key order, at most `limit`.
pub fn scan(store: &Store, cf: &str, prefix: &[u8], limit: usize) -> Result<Vec<Kv>, Error> {
    scan_from(store, cf, prefix, prefix, limit)
}

/// Every (key, value) under `prefix` from `from` on, in key order, at most `limit`.
pub fn scan_from(
    store: &Store,
    cf: &str,
    prefix: &[u8],
    from: &[u8],
    limit: usize,
) -> Result<Vec<Kv>, Error> {
    let mut out = Vec::new();
    store.scan_extra(cf, from, |k, v| {
        if out.len() >= limit || !k.starts_with(prefix) {
            return false;
        }
        out.push((k.to_vec(), v.to_vec()));
        true
    })?;
    Ok(out)
}

/// How many keys start with `prefix` (decodes nothing).
pub fn count(store: &Store, cf: &str, prefix: &[u8]) -> Result<usize, Error> {
    let mut n = 0;
    store.scan_extra(cf, prefix, |k, _| {
        let more = k.starts_with(prefix);
        n += usize::from(more);
        more
    })?;
    Ok(n)
}

/// Decodes a JSON value read by [`scan`].
pub fn decode<T: DeserializeOwned>(cf: &str, v: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(v).map_err(|e| Error::Storage(format!("{cf}: corrupt value: {e}")))
}

/// Serde helpers: 32-byte ids as hex, byte strings as base64.
pub mod serde_bytes {
    /// A 32-byte id as lowercase hex.
    pub mod id {
        use serde::{Deserialize, Deserializer, Serializer};
        /// Serialize.
        pub fn serialize<S: Serializer>(v: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&hex::encode(v))
        }
        /// Deserialize.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
            let t = String::deserialize(d)?;
            let b = hex::decode(&t).map_err(serde::de::Error::custom)?;
            b.try_into()
                .map_err(|_| serde::de::Error::custom("id is not 32 bytes"))
        }
    }
    /// A list of 32-byte ids as hex.
    pub mod ids {
        use serde::{Deserialize, Deserializer, Serializer, ser::SerializeSeq};
        /// Serialize.
        pub fn serialize<S: Serializer>(v: &[[u8; 32]], s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(Some(v.len()))?;
            for id in v {
                seq.serialize_element(&hex::encode(id))?;
            }
            seq.end()
        }
        /// Deserialize.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<[u8; 32]>, D::Error> {
            let v = Vec::<String>::deserialize(d)?;
            v.iter()
                .map(|t| {
                    let b = hex::decode(t).map_err(serde::de::Error::custom)?;
                    b.try_into()
                        .map_err(|_| serde::de::Error::custom("id is not 32 bytes"))
                })
                .collect()
        }
    }
    /// Bytes as standard base64.
    pub mod b64 {
        use base64::Engine as _;
        use base64::engine::general_purpose::STANDARD;
        use serde::{Deserialize, Deserializer, Serializer};
        /// Serialize.
        pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&STANDARD.encode(v))
        }
        /// Deserialize.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
            let t = String::deserialize(d)?;
            STANDARD.decode(t).map_err(serde::de::Error::custom)
        }
    }
}
