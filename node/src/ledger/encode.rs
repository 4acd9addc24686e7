//! How the writer encodes a record's stored entry, and hashes record ids (issue 14: both on the
//! writer's per-record path).

use super::Outcome;
use accord_proto::pb::record::v1::SignedRecord;
use accord_proto::signing::RecordId;
use prost::Message;

/// `LedgerEntry { sequence, record_id, record, recorded_at_unix_ms }` with the record encoded
/// straight into it, and where the record's bytes (the Merkle leaf) are in it; [`finish_entry`]
/// appends the outcome. Byte for byte what `LedgerEntry::encode_to_vec` gives (prost writes
/// fields in number order and skips default scalars; `entry_encoding_matches_prost` checks it),
/// with one allocation and one copy of the payload per record (issue 14).
pub(super) fn encode_entry(
    seq: u64,
    id: &RecordId,
    signed: &SignedRecord,
    now: i64,
) -> (Vec<u8>, std::ops::Range<usize>) {
    use prost::encoding::{self, WireType};
    let len = signed.encoded_len();
    let mut out = Vec::with_capacity(len + 160);
    if seq != 0 {
        encoding::uint64::encode(1, &seq, &mut out);
    }
    encoding::encode_key(2, WireType::LengthDelimited, &mut out);
    encoding::encode_varint(id.len() as u64, &mut out);
    out.extend_from_slice(id);
    encoding::encode_key(3, WireType::LengthDelimited, &mut out);
    encoding::encode_varint(len as u64, &mut out);
    let start = out.len();
    signed.encode_raw(&mut out);
    let leaf = start..out.len();
    if now != 0 {
        encoding::int64::encode(4, &now, &mut out);
    }
    (out, leaf)
}

/// Appends field 5 (the outcome) to an entry begun by [`encode_entry`].
pub(super) fn finish_entry(mut entry: Vec<u8>, outcome: &Outcome, applied_at: i64) -> Vec<u8> {
    prost::encoding::message::encode(5, outcome, &mut entry);
    if applied_at != 0 {
        prost::encoding::int64::encode(6, &applied_at, &mut entry);
    }
    entry
}

/// Hashes record ids — SHA-256 digests, already uniform — with a few multiply-rotate rounds
/// instead of SipHash (issue 14: SipHash was on the writer's profile). The rounds start from a
/// key drawn per writer, so ids chosen to collide in some bits do not meet in one bucket.
#[derive(Clone)]
pub(super) struct IdHashing(u64);

impl IdHashing {
    pub(super) fn random() -> Self {
        use std::hash::BuildHasher;
        Self(std::collections::hash_map::RandomState::new().hash_one(0x0069_6473_5f6b_6579_u64))
    }
}

impl std::hash::BuildHasher for IdHashing {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(self.0)
    }
}

pub(super) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.0 = (self.0 ^ u64::from_le_bytes(b))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(29);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use accord_proto::pb::record::v1::Signature;
    use accord_proto::pb::work::v1::LedgerEntry;
    use std::collections::HashMap;

    /// Ids that share all but their last byte hash apart (every byte is mixed in), and the same
    /// id hashes the same within a writer.
    #[test]
    fn id_hashing_mixes_every_byte() {
        use std::hash::BuildHasher;
        let h = IdHashing::random();
        let a = [7u8; 32];
        let mut b = a;
        b[31] ^= 1;
        assert_ne!(h.hash_one(a), h.hash_one(b));
        assert_eq!(h.hash_one(a), h.hash_one(a));
        let mut m: HashMap<RecordId, u32, IdHashing> = HashMap::with_hasher(h);
        m.insert(a, 1);
        m.insert(b, 2);
        assert_eq!((m.get(&a), m.get(&b)), (Some(&1), Some(&2)));
    }

    #[test]
    fn entry_encoding_matches_prost() {
        let signed = SignedRecord {
            payload_type: "application/vnd.accord.record.v1+protobuf".into(),
            payload: vec![1, 2, 3, 0, 255].into(),
            signatures: vec![Signature {
                key_name: "k".into(),
                key_id: vec![1, 2, 3, 4].into(),
                signature: vec![7; 64].into(),
            }],
        };
        let leaf = signed.encode_to_vec();
        for (seq, now, outcome) in [
            (0, 0, Outcome::default()),
            (
                7,
                1_700_000_000_000,
                Outcome {
                    applied: true,
                    ..Default::default()
                },
            ),
            (u64::MAX, -5, Outcome::default()),
        ] {
            let id = [seq as u8; 32];
            let entry = LedgerEntry {
                sequence: seq,
                record_id: id.to_vec().into(),
                record: Some(signed.clone()),
                recorded_at_unix_ms: now,
                outcome: Some(outcome.clone()),
                applied_at_unix_ms: 0,
            };
            let (begun, at) = encode_entry(seq, &id, &signed, now);
            // The leaf is exactly the record's own encoding.
            assert_eq!(&begun[at], &leaf[..]);
            let encoded = finish_entry(begun, &outcome, 0);
            assert_eq!(encoded, entry.encode_to_vec());
            assert_eq!(LedgerEntry::decode(&encoded[..]).unwrap(), entry);
        }
    }
}
