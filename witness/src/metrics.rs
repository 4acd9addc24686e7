//! Prometheus metrics of one witness (DESIGN.md, "Operations": a separate listener,
//! `metrics_listen`, series named `accord_*`).
//!
//! A [`Metrics`] holds its own [`Registry`] (no global recorder: the demo and the benchmarks run
//! witnesses in one process). add-checkpoint outcomes are counted where the core decides them;
//! the held sizes are read from the witness when scraped.

use std::sync::Arc;

use prometheus::{
    Encoder, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::witness::Witness;

/// The witness's metrics and their registry.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    add_checkpoint: IntCounterVec,
    checkpoint_writes: IntCounter,
    logs: IntGauge,
    held_size: IntGaugeVec,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn must<T>(r: prometheus::Result<T>) -> T {
    // Fails only on an invalid or duplicate metric name, fixed below: a bug the tests find.
    r.expect("metric definition")
}

impl Metrics {
    /// A fresh registry with every series of the witness.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let add_checkpoint = must(IntCounterVec::new(
            Opts::new(
                "accord_witness_add_checkpoint_total",
                "add-checkpoint requests (HTTP and gRPC) by outcome: the C2SP HTTP status \
                 (200 co-signed, 400, 403, 404, 409, 422, 429, 503, 500).",
            ),
            &["status"],
        ));
        let checkpoint_writes = must(IntCounter::new(
            "accord_witness_checkpoint_writes_total",
            "Synced writes of co-signed checkpoints; checkpoints of different logs that arrive \
             together share one, so the 200s of add_checkpoint_total divided by this is the \
             checkpoints per fsync.",
        ));
        let logs = must(IntGauge::new(
            "accord_witness_logs",
            "Logs the witness is configured to co-sign.",
        ));
        let held_size = must(IntGaugeVec::new(
            Opts::new(
                "accord_witness_checkpoint_size",
                "Tree size of the latest checkpoint co-signed, per log origin.",
            ),
            &["origin"],
        ));
        must(registry.register(Box::new(add_checkpoint.clone())));
        must(registry.register(Box::new(checkpoint_writes.clone())));
        must(registry.register(Box::new(logs.clone())));
        must(registry.register(Box::new(held_size.clone())));
        Metrics {
            registry,
            add_checkpoint,
            checkpoint_writes,
            logs,
            held_size,
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The counter of synced checkpoint writes, for the committer to count.
    pub(crate) fn checkpoint_writes(&self) -> IntCounter {
        self.checkpoint_writes.clone()
    }

    /// Counts one add-checkpoint outcome.
    pub fn add_checkpoint<T>(&self, r: &Result<T, Error>) {
        let status = match r {
            Ok(_) => 200,
            Err(e) => e.http_status().as_u16(),
        };
        self.add_checkpoint
            .with_label_values(&[status.to_string().as_str()])
            .inc();
    }
}

/// Sets the gauges from `witness` and encodes every series in the Prometheus text format.
pub fn gather(witness: &Witness) -> Result<String, Error> {
    let m = witness.metrics();
    let logs = witness.list_logs()?;
    m.logs.set(logs.len() as i64);
    m.held_size.reset();
    for l in &logs {
        m.held_size
            .with_label_values(&[l.log.origin()])
            .set(l.size as i64);
    }
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&m.registry.gather(), &mut out)
        .map_err(|e| Error::Internal(format!("metrics: {e}")))?;
    String::from_utf8(out).map_err(|e| Error::Internal(format!("metrics: {e}")))
}

/// Serves `GET /metrics` on `listener` until `shutdown`.
pub async fn serve(
    witness: Arc<Witness>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let witness = witness.clone();
            async move {
                match gather(&witness) {
                    Ok(text) => (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)],
                        text,
                    )
                        .into_response(),
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
        .map_err(|e| Error::Transport(format!("metrics: {e}")))
}
