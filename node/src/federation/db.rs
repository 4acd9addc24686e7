//! Small helpers over the federation column families (`peers`, `outbox`, `inbox`, `receipts`,
//! `quarantine`; see `ledger/store.rs`): keys are byte strings with `0x00` separators (names never
//! contain it), values are JSON.

use crate::error::Error;
use crate::ledger::Store;
use rocksdb::{WriteBatch, WriteOptions};
use serde::Serialize;
use serde::de::DeserializeOwned;

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
    match store
        .db()
        .get_pinned_cf(store.cf(cf)?, k)
        .map_err(|e| Error::Storage(e.into_string()))?
    {
        Some(v) => serde_json::from_slice(&v)
            .map(Some)
            .map_err(|e| Error::Storage(format!("{cf}: corrupt value: {e}"))),
        None => Ok(None),
    }
}

/// Puts a JSON value into a batch.
pub fn put<T: Serialize>(
    batch: &mut WriteBatch,
    store: &Store,
    cf: &str,
    k: &[u8],
    v: &T,
) -> Result<(), Error> {
    let bytes = serde_json::to_vec(v).map_err(|e| Error::Internal(e.to_string()))?;
    batch.put_cf(store.cf(cf)?, k, bytes);
    Ok(())
}

/// Deletes a key in a batch.
pub fn delete(batch: &mut WriteBatch, store: &Store, cf: &str, k: &[u8]) -> Result<(), Error> {
    batch.delete_cf(store.cf(cf)?, k);
    Ok(())
}

/// Writes a batch; `sync` waits for the WAL to reach the disk.
pub fn write(store: &Store, batch: WriteBatch, sync: bool) -> Result<(), Error> {
    let mut wo = WriteOptions::default();
    wo.set_sync(sync);
    store
        .db()
        .write_opt(batch, &wo)
        .map_err(|e| Error::Storage(e.into_string()))
}

/// A key and its value.
pub type Kv = (Vec<u8>, Vec<u8>);

/// Every (key, value) under `prefix`, in key order, at most `limit`.
pub fn scan(store: &Store, cf: &str, prefix: &[u8], limit: usize) -> Result<Vec<Kv>, Error> {
    let mut it = store.db().raw_iterator_cf(store.cf(cf)?);
    it.seek(prefix);
    let mut out = Vec::new();
    while out.len() < limit {
        let (Some(k), Some(v)) = (it.key(), it.value()) else {
            break;
        };
        if !k.starts_with(prefix) {
            break;
        }
        out.push((k.to_vec(), v.to_vec()));
        it.next();
    }
    it.status().map_err(|e| Error::Storage(e.into_string()))?;
    Ok(out)
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
