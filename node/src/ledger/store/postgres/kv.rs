//! The engine's reads (one prepared statement each, on the reading connection; scans page by
//! keyset, doubling the page) and its write: a [`Batch`] folded and committed as one
//! transaction behind the fence, retried on a serialization failure ([`super::super::pg_write`]).

use super::super::pg_write::{Writes, commit};
use super::super::{Batch, Kv, Op};
use super::lease::HOLDER;
use super::{Pg, RETRIES, Rows, pg, retryable};
use crate::error::Error;
use std::collections::HashMap;
use std::sync::Arc;

impl Pg {
    /// One page of a scan: `(key, value)` rows.
    fn page(
        &self,
        cf: &str,
        from: Vec<u8>,
        to: Option<Vec<u8>>,
        rev: Option<bool>,
        limit: i64,
    ) -> Result<Rows, Error> {
        let (reads, cf) = (self.reads(), cf.to_owned());
        self.run(async move {
            let rows = match rev {
                None => {
                    reads
                        .client
                        .query(&reads.scan, &[&cf, &from, &to, &limit])
                        .await
                }
                Some(inclusive) => {
                    let st = if inclusive {
                        &reads.rev
                    } else {
                        &reads.rev_before
                    };
                    reads.client.query(st, &[&cf, &from, &limit]).await
                }
            }
            .map_err(pg)?;
            Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }
}

/// The first page of a scan; later ones double, so a scan that stops after one entry reads
/// few rows and a long one few round trips.
const FIRST_PAGE: i64 = 16;
const MAX_PAGE: i64 = 1024;

impl Kv for Pg {
    fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let (reads, cf, key) = (self.reads(), cf.to_owned(), key.to_vec());
        self.run(async move {
            let row = reads
                .client
                .query_opt(&reads.get, &[&cf, &key])
                .await
                .map_err(pg)?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn multi_get(&self, cf: &str, keys: &[&[u8]], _: bool) -> Result<Vec<Option<Vec<u8>>>, Error> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (reads, cf) = (self.reads(), cf.to_owned());
        let asked: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        let mut found: HashMap<Vec<u8>, Vec<u8>> = self.run(async move {
            let rows = reads
                .client
                .query(&reads.multi, &[&cf, &asked])
                .await
                .map_err(pg)?;
            Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
        })?;
        Ok(keys.iter().map(|k| found.remove(*k)).collect())
    }

    fn scan(
        &self,
        cf: &str,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let (mut from, to, mut limit) = (from.to_vec(), to.map(<[u8]>::to_vec), FIRST_PAGE);
        loop {
            let rows = self.page(cf, from.clone(), to.clone(), None, limit)?;
            let full = rows.len() as i64 == limit;
            for (k, v) in &rows {
                if !f(k, v) {
                    return Ok(());
                }
            }
            match rows.into_iter().last() {
                // The next key after the last one seen: its immediate successor bytewise.
                Some((mut k, _)) if full => {
                    k.push(0);
                    from = k;
                }
                _ => return Ok(()),
            }
            limit = (limit * 2).min(MAX_PAGE);
        }
    }

    fn scan_rev(
        &self,
        cf: &str,
        from: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let (mut from, mut inclusive, mut limit) = (from.to_vec(), true, FIRST_PAGE);
        loop {
            let rows = self.page(cf, from.clone(), None, Some(inclusive), limit)?;
            let full = rows.len() as i64 == limit;
            for (k, v) in &rows {
                if !f(k, v) {
                    return Ok(());
                }
            }
            match rows.into_iter().last() {
                Some((k, _)) if full => {
                    from = k;
                    inclusive = false;
                }
                _ => return Ok(()),
            }
            limit = (limit * 2).min(MAX_PAGE);
        }
    }

    fn put(&self, batch: &mut Batch, cf: &str, key: &[u8], value: &[u8]) -> Result<(), Error> {
        batch
            .ops()?
            .push(Op::Put(cf.to_owned(), key.to_vec(), value.to_vec()));
        Ok(())
    }

    fn delete(&self, batch: &mut Batch, cf: &str, key: &[u8]) -> Result<(), Error> {
        batch.ops()?.push(Op::Delete(cf.to_owned(), key.to_vec()));
        Ok(())
    }

    fn delete_range(
        &self,
        batch: &mut Batch,
        cf: &str,
        from: &[u8],
        to: &[u8],
    ) -> Result<(), Error> {
        batch
            .ops()?
            .push(Op::DeleteRange(cf.to_owned(), from.to_vec(), to.to_vec()));
        Ok(())
    }

    /// Always durable: `COMMIT` returns once PostgreSQL flushed it (`synchronous_commit`).
    fn write(&self, mut batch: Batch, _sync: bool) -> Result<(), Error> {
        let writes = Arc::new(Writes::fold(std::mem::take(batch.ops()?)));
        let (client, epoch, holder) = (self.write.clone(), self.epoch as i64, self.holder.clone());
        let statements = self.statements.clone();
        self.run(async move {
            let mut client = client.lock().await;
            let mut tries = 0;
            loop {
                match commit(&mut client, &statements, epoch, &writes).await {
                    Ok(true) => return Ok(()),
                    Ok(false) => {
                        let row = client.query_one(HOLDER, &[]).await.map_err(pg)?;
                        let (now, at): (String, i64) = (row.get(0), row.get(1));
                        return Err(Error::NotWriter(format!(
                            "{holder} wrote under epoch {epoch}; the writer is now {now:?} \
                             (epoch {at})"
                        )));
                    }
                    Err(e) if retryable(&e) && tries < RETRIES => tries += 1,
                    Err(e) => return Err(pg(e)),
                }
            }
        })
    }
}
