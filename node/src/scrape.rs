//! `GET /metrics` (DESIGN.md, "Operations"): reads the node's state into a
//! [`metrics::Snapshot`] and encodes it with [`metrics::gather`]. Kept apart from
//! [`crate::metrics`] so that the counters (used by the ledger, the log and federation) do not
//! depend on the node that holds them (issue 10: no module cycle).

use crate::metrics::{self, PeerGauges, Snapshot};
use crate::node::Node;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Reads the state-derived gauges from `node` (blocking: RocksDB for queue ages and the
/// quarantine) and encodes every series.
pub fn gather(node: &Node) -> Result<String, crate::Error> {
    use crate::federation::breaker::State;
    let fed = &node.federation;
    let mut peers = Vec::new();
    for p in fed.peers.list() {
        let name = p.name();
        let state = fed.health(name).breaker();
        peers.push(PeerGauges {
            name: name.to_string(),
            depth: fed.outbox.depth(name),
            oldest_queued_ms: fed.outbox.oldest(name)?,
            breaker: [State::Closed, State::Open, State::HalfOpen]
                .into_iter()
                .map(|s| (s.as_str(), s == state))
                .collect(),
            enabled: p.enabled(),
            outbox_full: fed.outbox.is_full(name),
            backfilling: fed.outbox.behind(name).is_some(),
        });
    }
    let (projection_replayed, projection_cached, projection_cached_runs) =
        match node.projection.read() {
            Ok(p) => (p.replayed(), p.cached() as u64, p.cached_runs() as u64),
            Err(_) => (0, 0, 0),
        };
    let stats = &node.listener_stats;
    let snapshot = Snapshot {
        ledger_records: node.ledger.len(),
        checkpoint_size: node.log.latest().map(|c| c.size).unwrap_or(0),
        witnessed_size: node.log.witnessed().map(|c| c.size).unwrap_or(0),
        now_ms: node.clock.now_ms(),
        peers,
        quarantine_size: fed.quarantine.size()? as u64,
        projection_replayed,
        projection_cached,
        projection_cached_runs,
        listener: (
            stats.refused_handshakes.load(Ordering::Relaxed),
            stats.refused_connections.load(Ordering::Relaxed),
            stats.timed_out.load(Ordering::Relaxed),
        ),
        rocksdb_memory: node.ledger.store().memory(),
    };
    metrics::gather(&node.metrics, &snapshot)
}

/// Serves `GET /metrics` (Prometheus text format 0.0.4) on `listener` until `shutdown`.
pub async fn serve(
    node: Arc<Node>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), crate::Error> {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let node = node.clone();
            async move {
                match tokio::task::spawn_blocking(move || gather(&node)).await {
                    Ok(Ok(text)) => (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)],
                        text,
                    )
                        .into_response(),
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "metrics scrape failed");
                        StatusCode::INTERNAL_SERVER_ERROR.into_response()
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics scrape failed");
                        StatusCode::INTERNAL_SERVER_ERROR.into_response()
                    }
                }
            }
        }),
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(|e| crate::Error::Internal(format!("metrics listener: {e}")))
}
