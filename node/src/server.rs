//! The daemon: [`run`] wires the ledger, the projection and the gRPC services together and serves
//! them over TLS until `shutdown`, then drains in-flight calls and stops the ledger writer, which
//! flushes. Everything that can fail on bad configuration fails before the listener is used.

use crate::clock::Clock;
use crate::config::Config;
use crate::error::Error;
use crate::node::Opened;
use accord_proto::pb;
use futures::StreamExt;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The bound listeners of a node: gRPC, and the metrics endpoint when `metrics_listen` is set.
/// Bind them before calling [`run`] (on port 0 in tests) so the caller knows the addresses; a
/// bare gRPC `TcpListener` converts into one without metrics.
#[derive(Debug)]
pub struct Listeners {
    /// The gRPC listener (TLS).
    pub grpc: TcpListener,
    /// The Prometheus listener (`GET /metrics`, plain HTTP).
    pub metrics: Option<TcpListener>,
}

impl From<TcpListener> for Listeners {
    fn from(grpc: TcpListener) -> Self {
        Listeners {
            grpc,
            metrics: None,
        }
    }
}

/// Runs the node on `listeners` (a gRPC `TcpListener`, or [`Listeners`] with a metrics
/// listener) until `shutdown` is cancelled.
pub async fn run(
    config: Config,
    listeners: impl Into<Listeners>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    run_with_clock(config, listeners, shutdown, Clock::system()).await
}

/// [`run`] on a given clock: tests drive a [`crate::clock::ManualClock`] through it, so that
/// quarantine timeouts, the breaker, key validity and the Work service clock need no waiting.
pub async fn run_with_clock(
    config: Config,
    listeners: impl Into<Listeners>,
    shutdown: CancellationToken,
    clock: Clock,
) -> Result<(), Error> {
    let Listeners {
        grpc: listener,
        metrics: metrics_listener,
    } = listeners.into();
    config.validate()?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Internal(e.to_string()))?;
    // On PostgreSQL the listener's TLS is made first, so that an instance waiting for the
    // writer's lease answers on its port as a standby (issue 31; `standby`) until it holds it;
    // then the node serves the same listener's connections. Elsewhere the listener accepts only
    // once the node is open (connections wait in the backlog), so that no handshake completes
    // before the peers' CAs are loaded.
    let stop = shutdown.child_token();
    let server_tls = crate::node::server_tls(&config)?;
    let listener_stats = Arc::new(crate::tls::ListenerStats::default());
    let limits = crate::tls::ListenerLimits::from_config(&config.limits);
    let on_postgres = config.storage.backend == crate::config::Backend::Postgres;
    let (tls_config, verifier) = (server_tls.0.clone(), server_tls.1.clone());
    let mut transports = crate::node::Transports {
        tls: Some(server_tls),
        listener_stats: Some(listener_stats.clone()),
        ..Default::default()
    };
    let (opened_node, connections) = if on_postgres {
        let opened = CancellationToken::new();
        let (standby_connections, connections) = crate::standby::split(
            crate::tls::incoming(listener, tls_config, limits, listener_stats, stop.clone()),
            opened.clone(),
        );
        let (holder_tx, holder_rx) = tokio::sync::watch::channel(String::new());
        let (reads_tx, reads_rx) = tokio::sync::watch::channel(None);
        verifier.set_standby(true);
        // It drains on its own once the node opens; the node does not wait for it.
        let until = opened.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::standby::serve(
                standby_connections,
                until,
                holder_rx,
                reads_rx,
                SERVED_SERVICES,
            )
            .await
            {
                tracing::warn!(error = %e, "standby server");
            }
        });
        let holder = format!("{}@{addr} (pid {})", config.name, std::process::id());
        tokio::spawn(follow_while_standby(
            config.clone(),
            clock.clone(),
            crate::node::Transports {
                tls: transports.tls.clone(),
                listener_stats: transports.listener_stats.clone(),
                holder: Some(format!("{holder}, standby")),
                follow: true,
                ..Default::default()
            },
            reads_tx,
            opened.clone(),
        ));
        transports.holder = Some(holder);
        transports.waiting = crate::ledger::Waiting {
            holder: Some(Arc::new(holder_tx)),
            stop: Some(stop.clone()),
        };
        let r = crate::node::open_with(config, clock, transports).await;
        verifier.set_standby(false);
        opened.cancel();
        (r, connections.boxed())
    } else {
        let r = crate::node::open_with(config, clock, transports).await;
        let connections =
            crate::tls::incoming(listener, tls_config, limits, listener_stats, stop.clone());
        (r, connections.boxed())
    };
    let Opened {
        node,
        writer,
        witnesses,
    } = match opened_node {
        Err(_) if stop.is_cancelled() => {
            tracing::info!("stopped while waiting for the writer's lease");
            return Ok(());
        }
        r => r?,
    };
    // On PostgreSQL, an instance that loses the writer's lease stops serving at once: its
    // checkpointer, witness client, federation senders and Work service clock run only while it
    // is the writer (issue 31, item 2), and its writes are fenced anyway. It exits with
    // `not_writer`; restarted (by its supervisor), it waits for the lease as a standby.
    let lease_lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Some(lost) = node.ledger.store().postgres().map(|p| p.lease_lost()) {
        let (stop, flag) = (stop.clone(), lease_lost.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = lost.cancelled() => {
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    tracing::error!("writer's lease lost: stopping");
                    stop.cancel();
                }
                _ = stop.cancelled() => {}
            }
        });
    }
    tracing::info!(name = %node.name(), %addr, records = node.ledger.len(), "accord node serving");

    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter.set_serving::<pb::work::v1::work_service_server::WorkServiceServer<crate::services::work::WorkApi>>().await;
    // Both reflection versions (grpcurl asks v1 first; grpcio and older tools v1alpha).
    let reflection = reflection_builder()
        .build_v1()
        .map_err(|e| Error::Internal(format!("reflection: {e}")))?;
    let reflection_v1alpha = reflection_builder()
        .build_v1alpha()
        .map_err(|e| Error::Internal(format!("reflection: {e}")))?;

    let background = CancellationToken::new();
    let checkpointer = tokio::spawn(crate::log::run_checkpointer(
        node.fed.checkpoints.clone(),
        witnesses,
        background.clone(),
    ));
    let clock = tokio::spawn(crate::service_party::run_clock(
        node.clone(),
        background.clone(),
    ));
    let federation = crate::federation::spawn(&node.fed, &background);
    // Commit envelopes (seed 003): the driver writes what envelopes owe, and ticks.
    for w in crate::envelopes::types::warnings(&node.config) {
        tracing::warn!(warning = %w, "envelope type");
    }
    let envelopes = tokio::spawn(crate::envelope_driver::run(
        node.envelope_driver(),
        background.clone(),
    ));
    let metrics_server = metrics_listener
        .map(|l| tokio::spawn(crate::scrape::serve(node.clone(), l, background.clone())));

    let limits = &node.config.limits;
    let incoming = connections;
    let ms = std::time::Duration::from_millis;
    // HTTP/2 bounds per connection (issue 8): streams beyond the limit are reset with
    // REFUSED_STREAM; dead peers are found by keepalive pings.
    let result = tonic::transport::Server::builder()
        .max_concurrent_streams(limits.max_streams_per_connection)
        .http2_max_header_list_size(limits.max_header_list_bytes)
        .http2_keepalive_interval(Some(ms(limits.keepalive_interval_ms)))
        .http2_keepalive_timeout(Some(ms(limits.keepalive_timeout_ms)))
        .add_routes(node_routes(&node, &stop))
        .add_service(health)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(incoming, stop.cancelled())
        .await
        .map_err(|e| Error::Internal(format!("serve: {e}")));
    health_reporter.set_not_serving::<pb::work::v1::work_service_server::WorkServiceServer<crate::services::work::WorkApi>>().await;
    background.cancel();
    let _ = checkpointer.await;
    let _ = clock.await;
    let _ = envelopes.await;
    for t in federation {
        let _ = t.await;
    }
    if let Some(t) = metrics_server {
        let _ = t.await;
    }
    // The writer commits what it already holds, then stops and flushes.
    node.ledger.stop().await;
    tokio::task::spawn_blocking(move || writer.join())
        .await
        .ok();
    tracing::info!("accord node stopped");
    if lease_lost.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(Error::NotWriter(
            "this instance lost the writer's lease and stopped; restarted, it waits for the lease"
                .into(),
        ));
    }
    result
}

/// The node's services (a standby's read-only node serves the same, behind `standby::READS`);
/// streams end when `stop` is cancelled.
fn node_routes(node: &Arc<crate::node::Node>, stop: &CancellationToken) -> tonic::service::Routes {
    tonic::service::Routes::new(crate::services::work::server_until(
        node.clone(),
        stop.clone(),
    ))
    .add_service(crate::services::log::server(node.clone()))
    .add_service(crate::services::federation::server(node.clone()))
    .add_service(crate::services::admin::server(node.clone()))
    .add_service(crate::services::run::server(node.clone()))
    .add_service(crate::services::envelope::server(node.clone()))
}

/// While this instance waits for the writer's lease (`until` not cancelled): opens its read-only
/// node following the writer (retried until the writer has initialised the store) and hands
/// the standby server its read services; once the lease is taken, stops it.
async fn follow_while_standby(
    config: Config,
    clock: Clock,
    transports: crate::node::Transports,
    reads: tokio::sync::watch::Sender<Option<axum::Router>>,
    until: CancellationToken,
) {
    let retry = std::time::Duration::from_millis(config.storage.follow_ms.max(250));
    let opened = loop {
        let t = crate::node::Transports {
            tls: transports.tls.clone(),
            listener_stats: transports.listener_stats.clone(),
            holder: transports.holder.clone(),
            follow: true,
            ..Default::default()
        };
        let r = tokio::select! {
            r = crate::node::open_with(config.clone(), clock.clone(), t) => r,
            _ = until.cancelled() => return,
        };
        match r {
            Ok(o) => break o,
            Err(e) => tracing::debug!(error = %e, "standby: reads not served yet"),
        }
        tokio::select! {
            _ = tokio::time::sleep(retry) => {}
            _ = until.cancelled() => return,
        }
    };
    let node = opened.node;
    if !until.is_cancelled() {
        // Peers' CAs are loaded now (the read-only node's federation gave them to the shared
        // verifier): their handshakes complete, a delivery is refused `not_writer` (they move
        // on) and their receipt reads are served. The verifier stays in its standby mode, which
        // asks every client for a certificate: a peer the standby does not know yet (added at
        // the writer since) is refused at the handshake rather than let in without its
        // identity on a connection the node would serve once this instance takes the lease.
        tracing::info!(records = node.ledger.len(), "standby serving reads");
        let router = node_routes(&node, &until).into_axum_router();
        reads.send_replace(Some(router));
        // The checkpoints the writer signs and its witnesses cosign, read as often as the
        // ledger is followed.
        let mut tick =
            tokio::time::interval(std::time::Duration::from_millis(config.storage.follow_ms));
        let mut ticks: u64 = 0;
        let peers_every = (1_000 / config.storage.follow_ms).max(1);
        loop {
            tokio::select! {
                _ = until.cancelled() => break,
                _ = tick.tick() => {
                    ticks += 1;
                    let n = node.clone();
                    // Peers (added or changed at the writer) about once a second.
                    let peers = ticks.is_multiple_of(peers_every);
                    let r = tokio::task::spawn_blocking(move || {
                        n.log.reload(n.ledger.store())?;
                        if peers && n.federation.peers.reload()? {
                            tracing::info!("standby: the writer's peers changed; reloaded");
                        }
                        Ok::<_, Error>(())
                    })
                    .await;
                    if let Ok(Err(e)) = r {
                        tracing::debug!(error = %e, "standby: checkpoints or peers not read");
                    }
                }
            }
        }
        reads.send_replace(None);
    }
    node.ledger.stop().await;
    let writer = opened.writer;
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
}

/// The services the node serves, as reflection lists them (DESIGN.md, "Operations": both
/// reflection versions list exactly the services served — not the witness's, whose descriptors
/// share the file descriptor set).
pub const SERVED_SERVICES: &[&str] = &[
    "accord.work.v1.WorkService",
    "accord.log.v1.LogService",
    "accord.federation.v1.FederationService",
    "accord.admin.v1.AdminService",
    "accord.run.v1.RunService",
    "accord.envelope.v1.EnvelopeService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// A reflection builder listing exactly [`SERVED_SERVICES`] (and the reflection services, whose
/// descriptors are registered in both versions so that either resolves both names).
fn reflection_builder() -> tonic_reflection::server::Builder<'static> {
    let mut b = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET);
    for s in SERVED_SERVICES {
        b = b.with_service_name(*s);
    }
    b
}
