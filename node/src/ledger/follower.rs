//! A ledger that follows another instance's writer (a standby on PostgreSQL, issue 31, item 2):
//! no writer thread, but a follower thread that reads how far the writer committed every
//! `every` and lets the [`Machine`] show readers what changed ([`Machine::follow`]), advancing
//! the length watch as the writer's would. An append is answered `not_writer`: the standby
//! never writes (and the store's fence refuses it anyway: a follower holds no lease epoch).

use super::{Job, Ledger, Machine, Store};
use crate::error::Error;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

impl<I: Send + 'static> Ledger<I> {
    /// Follows the writer of `store` (opened without the lease): the machine opens its stored
    /// state read-only ([`Machine::open_follower`]), then a thread follows every `every`.
    pub(crate) fn follow<M>(
        store: Arc<Store>,
        mut machine: M,
        every: Duration,
    ) -> Result<(Self, std::thread::JoinHandle<()>), Error>
    where
        M: Machine<Input = I>,
    {
        let at = machine.open_follower(&store)?;
        tracing::info!(records = at, "following the writer");
        let (len_tx, len_rx) = watch::channel(at);
        let (tx, rx) = mpsc::channel(64);
        let st = store.clone();
        let handle = std::thread::Builder::new()
            .name("ledger-follower".into())
            .spawn(move || run(st, machine, at, every, len_tx, rx))
            .map_err(|e| Error::Internal(format!("spawn ledger follower: {e}")))?;
        Ok((
            Self {
                store,
                tx,
                len: len_rx,
                metrics: Arc::default(),
                fail_writes: Arc::default(),
                order: Arc::default(),
            },
            handle,
        ))
    }
}

fn run<M: Machine>(
    store: Arc<Store>,
    mut machine: M,
    mut at: u64,
    every: Duration,
    len: watch::Sender<u64>,
    mut rx: mpsc::Receiver<Job<M::Input>>,
) {
    // Warn once per outage, not every tick (the database's own failover takes seconds).
    let mut failing = false;
    loop {
        loop {
            match rx.try_recv() {
                Ok(Job::Append(appends, answer, _)) => {
                    let refused = appends
                        .iter()
                        .map(|_| {
                            Err(Error::NotWriter(
                                "this instance is a standby: it serves reads; write at the writer"
                                    .into(),
                            ))
                        })
                        .collect();
                    let _ = answer.send(refused);
                }
                Ok(Job::Stop) | Err(mpsc::error::TryRecvError::Disconnected) => return,
                Err(mpsc::error::TryRecvError::Empty) => break,
            }
        }
        match machine.follow(&store, at) {
            Ok(to) => {
                if failing {
                    tracing::info!(records = to, "following the writer again");
                    failing = false;
                }
                if to > at {
                    at = to;
                    len.send_replace(at);
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "cannot follow the writer; retrying");
                    failing = true;
                }
                if let Some(pg) = store.postgres() {
                    pg.reconnect_reads();
                }
            }
        }
        std::thread::sleep(every);
    }
}
