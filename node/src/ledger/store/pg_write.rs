//! What one PostgreSQL write transaction does ([`super::postgres`]): a [`super::Batch`]'s
//! operations folded to their result, and the SERIALIZABLE transaction that checks the
//! writer's fence and then writes them.

use super::Op;
use std::collections::BTreeMap;
use tokio_postgres::{Client, Statement};

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

/// The write transaction's statements, prepared once on the writer's connection (a statement
/// sent as text is parsed and described on every call: a round trip each).
pub(super) struct Statements {
    fence: Statement,
    range: Statement,
    delete: Statement,
    upsert: Statement,
}

impl Statements {
    pub(super) async fn prepare(client: &Client) -> Result<Statements, tokio_postgres::Error> {
        Ok(Statements {
            fence: client.prepare(FENCE).await?,
            range: client
                .prepare("DELETE FROM accord_kv WHERE cf = $1 AND k >= $2 AND k < $3")
                .await?,
            delete: client
                .prepare(
                    "DELETE FROM accord_kv WHERE (cf, k) IN \
                     (SELECT * FROM unnest($1::TEXT[], $2::BYTEA[]))",
                )
                .await?,
            upsert: client
                .prepare(
                    "INSERT INTO accord_kv (cf, k, v) \
                     SELECT * FROM unnest($1::TEXT[], $2::BYTEA[], $3::BYTEA[]) \
                     ON CONFLICT (cf, k) DO UPDATE SET v = excluded.v",
                )
                .await?,
        })
    }
}

/// One SERIALIZABLE transaction: the fence, then the writes. `Ok(false)`: fenced (nothing
/// written).
///
/// The fence and the writes are pipelined: sent together, executed by the server in order,
/// answered in order — one round trip instead of one per statement. A write executed after a
/// fence that matched no row is rolled back with it, so nothing of a fenced batch is committed;
/// a fence that failed (a serialization conflict with a takeover) aborts the transaction, and
/// its error is the first to come back.
pub(super) async fn commit(
    client: &mut Client,
    st: &Statements,
    epoch: i64,
    w: &Writes,
) -> Result<bool, tokio_postgres::Error> {
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::Serializable)
        .start()
        .await?;
    let fenced = !writes(&tx, st, epoch, w).await?;
    match fenced {
        true => tx.rollback().await?,
        false => tx.commit().await?,
    }
    Ok(!fenced)
}

/// The fence and the writes, pipelined in `tx`; whether the fence matched our epoch.
async fn writes(
    tx: &tokio_postgres::Transaction<'_>,
    st: &Statements,
    epoch: i64,
    w: &Writes,
) -> Result<bool, tokio_postgres::Error> {
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
    let fence = async move { tx.execute(&st.fence, &[&epoch]).await };
    let ranges = futures::future::try_join_all(
        w.ranges
            .iter()
            .map(|(cf, from, to)| async move { tx.execute(&st.range, &[cf, from, to]).await }),
    );
    let deletes = async {
        match dk.is_empty() {
            true => Ok(0),
            false => tx.execute(&st.delete, &[&dcf, &dk]).await,
        }
    };
    let upserts = async {
        match pk.is_empty() {
            true => Ok(0),
            false => tx.execute(&st.upsert, &[&pcf, &pk, &pv]).await,
        }
    };
    let (fenced, _, _, _) = futures::try_join!(fence, ranges, deletes, upserts)?;
    Ok(fenced == 1)
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
