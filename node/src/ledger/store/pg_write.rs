//! What one PostgreSQL write transaction does ([`super::postgres`]): a [`super::Batch`]'s
//! operations folded to their result, and the SERIALIZABLE transaction that checks the
//! writer's fence and then writes them.

use super::Op;
use std::collections::BTreeMap;
use tokio_postgres::Client;

/// The fence, first in every write transaction.
const FENCE: &str = "UPDATE accord_lease SET epoch = epoch WHERE id = 1 AND epoch = $1";

/// A batch folded into what one transaction writes: the final value (or deletion) of each key
/// it touched, and the ranges it deleted. Applied as the ranges first, then the keys: the same
/// result as the operations in order, since a key written after a range delete stays in
/// `keys` and one written before it was dropped from `keys`.
#[derive(Default)]
pub(super) struct Writes {
    ranges: Vec<(String, Vec<u8>, Vec<u8>)>,
    keys: BTreeMap<(String, Vec<u8>), Option<Vec<u8>>>,
}

impl Writes {
    pub(super) fn fold(ops: Vec<Op>) -> Writes {
        let mut w = Writes::default();
        for op in ops {
            match op {
                Op::Put(cf, k, v) => {
                    w.keys.insert((cf, k), Some(v));
                }
                Op::Delete(cf, k) => {
                    w.keys.insert((cf, k), None);
                }
                Op::DeleteRange(cf, from, to) => {
                    w.keys
                        .retain(|(c, k), _| !(c == &cf && k >= &from && k < &to));
                    w.ranges.push((cf, from, to));
                }
            }
        }
        w
    }
}

/// One SERIALIZABLE transaction: the fence, then the writes. `Ok(false)`: fenced (nothing
/// written).
pub(super) async fn commit(
    client: &mut Client,
    epoch: i64,
    w: &Writes,
) -> Result<bool, tokio_postgres::Error> {
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::Serializable)
        .start()
        .await?;
    if tx.execute(FENCE, &[&epoch]).await? != 1 {
        tx.rollback().await?;
        return Ok(false);
    }
    for (cf, from, to) in &w.ranges {
        tx.execute(
            "DELETE FROM accord_kv WHERE cf = $1 AND k >= $2 AND k < $3",
            &[cf, from, to],
        )
        .await?;
    }
    let (mut dcf, mut dk, mut pcf, mut pk, mut pv) = (vec![], vec![], vec![], vec![], vec![]);
    for ((cf, k), v) in &w.keys {
        match v {
            None => {
                dcf.push(cf.as_str());
                dk.push(k.as_slice());
            }
            Some(v) => {
                pcf.push(cf.as_str());
                pk.push(k.as_slice());
                pv.push(v.as_slice());
            }
        }
    }
    if !dk.is_empty() {
        tx.execute(
            "DELETE FROM accord_kv WHERE (cf, k) IN \
             (SELECT * FROM unnest($1::TEXT[], $2::BYTEA[]))",
            &[&dcf, &dk],
        )
        .await?;
    }
    if !pk.is_empty() {
        tx.execute(
            "INSERT INTO accord_kv (cf, k, v) \
             SELECT * FROM unnest($1::TEXT[], $2::BYTEA[], $3::BYTEA[]) \
             ON CONFLICT (cf, k) DO UPDATE SET v = excluded.v",
            &[&pcf, &pk, &pv],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(cf: &str, k: &[u8], v: &[u8]) -> Op {
        Op::Put(cf.into(), k.to_vec(), v.to_vec())
    }

    #[test]
    fn a_batch_folds_to_the_result_of_its_operations_in_order() {
        let w = Writes::fold(vec![
            put("a", b"1", b"x"),
            put("a", b"5", b"y"),
            Op::DeleteRange("a".into(), b"0".to_vec(), b"3".to_vec()),
            put("a", b"2", b"z"),
            Op::Delete("a".into(), b"5".to_vec()),
            put("b", b"1", b"w"),
        ]);
        let keys: Vec<_> = w.keys.into_iter().collect();
        assert_eq!(
            keys,
            vec![
                (("a".into(), b"2".to_vec()), Some(b"z".to_vec())),
                (("a".into(), b"5".to_vec()), None),
                (("b".into(), b"1".to_vec()), Some(b"w".to_vec())),
            ]
        );
        assert_eq!(w.ranges, vec![("a".into(), b"0".to_vec(), b"3".to_vec())]);
    }
}
