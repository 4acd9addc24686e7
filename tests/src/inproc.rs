//! Nodes started inside the test process on a driven clock (issue 10, item 5; issue 16, "tests
//! that can fail"): [`TestNodeBuilder::start_with_clock`] runs [`accord_node::run_with_clock`]
//! on `127.0.0.1:0` with the test's [`Clock`] — typically [`Clock::manual`] — so quarantine
//! timeouts and key validity windows are crossed by advancing the clock, not by waiting.
//! Everything else about the node is real (RocksDB, TLS, gRPC); readiness is polled.

use crate::{TestNode, TestNodeBuilder, eventually, wait_serving};
use accord_node::clock::Clock;
use anyhow::{Result, anyhow};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A node task running in this process; cancelled when dropped.
pub struct InProc {
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), accord_node::Error>>>,
}

impl Drop for InProc {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl TestNodeBuilder {
    /// Runs `accord-node init`, applies the edits and starts the node in this process on
    /// `clock` (see the module doc).
    pub async fn start_with_clock(self, clock: Clock) -> Result<TestNode> {
        let mut n = self.init()?;
        n.spawn_with_clock(clock).await?;
        Ok(n)
    }
}

impl TestNode {
    /// Starts the node in this process on `clock`, on a fresh ephemeral port, and waits until
    /// it serves.
    pub async fn spawn_with_clock(&mut self, clock: Clock) -> Result<()> {
        let config = accord_node::config::Config::load(&self.dir.join("accord.toml"))
            .map_err(|e| anyhow!("config: {e}"))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        self.addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(accord_node::run_with_clock(
            config,
            listener,
            shutdown.clone(),
            clock,
        ));
        self.inproc = Some(InProc {
            shutdown,
            task: Some(task),
        });
        // Not serving yet is retried; the node task ending (a store it cannot open, a config it
        // refuses) fails the wait at once, with the task's own error.
        let ready = eventually(Duration::from_secs(60), || async {
            if self
                .inproc
                .as_ref()
                .and_then(|p| p.task.as_ref())
                .is_some_and(|t| t.is_finished())
            {
                return Err(anyhow!("the node task ended before it served"));
            }
            let Ok(ch) = self.channel().await else {
                return Ok(None);
            };
            Ok(wait_serving(ch).await.ok())
        })
        .await;
        if let Err(e) = ready {
            if let Some(t) = self.inproc.as_mut().and_then(|p| p.task.take())
                && t.is_finished()
            {
                return Err(anyhow!("{e:#}: {:?}", t.await?));
            }
            return Err(e);
        }
        Ok(())
    }

    /// Stops an in-process node gracefully and waits for it (its store is closed after).
    pub async fn stop_inproc(&mut self) -> Result<()> {
        if let Some(mut p) = self.inproc.take() {
            p.shutdown.cancel();
            if let Some(t) = p.task.take() {
                t.await?.map_err(|e| anyhow!("{e}"))?;
            }
        }
        Ok(())
    }
}
