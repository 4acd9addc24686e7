//! Serving: the gRPC listener (TLS; witness, admin, health, reflection) and the C2SP HTTP listener
//! (plain or TLS), both drained on shutdown, after which RocksDB is flushed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use accord_proto::pb::witness::v1::witness_admin_service_server::WitnessAdminServiceServer;
use accord_proto::pb::witness::v1::witness_service_server::WitnessServiceServer;
use tokio::net::TcpListener;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::error::Error;
use crate::grpc::{AdminAuth, AdminGrpc, WitnessGrpc};
use crate::witness::{Witness, WitnessOptions};

/// The two bound listeners. Bind them (e.g. with [`Listeners::bind`], or on port 0 in tests)
/// before calling [`run`], so the caller knows the addresses.
#[derive(Debug)]
pub struct Listeners {
    /// The gRPC listener (served over TLS).
    pub grpc: TcpListener,
    /// The C2SP HTTP listener.
    pub http: TcpListener,
    /// The Prometheus listener (`metrics_listen`; plain HTTP `GET /metrics`), when configured.
    pub metrics: Option<TcpListener>,
}

impl Listeners {
    /// Binds the addresses of a validated config.
    pub async fn bind(config: &Config) -> Result<Listeners, Error> {
        let bind = |field: &'static str, addr: SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|e| Error::config(field, format!("cannot listen on {addr}: {e}")))
        };
        Ok(Listeners {
            grpc: bind("grpc.listen", config.grpc_listen).await?,
            http: bind("http.listen", config.http_listen).await?,
            metrics: match config.metrics_listen {
                Some(a) => Some(bind("metrics_listen", a).await?),
                None => None,
            },
        })
    }

    /// The bound metrics address, when metrics are on.
    pub fn metrics_addr(&self) -> Result<Option<SocketAddr>, Error> {
        self.metrics
            .as_ref()
            .map(|l| l.local_addr().map_err(|e| Error::Transport(e.to_string())))
            .transpose()
    }

    /// The bound gRPC address.
    pub fn grpc_addr(&self) -> Result<SocketAddr, Error> {
        self.grpc
            .local_addr()
            .map_err(|e| Error::Transport(e.to_string()))
    }

    /// The bound HTTP address.
    pub fn http_addr(&self) -> Result<SocketAddr, Error> {
        self.http
            .local_addr()
            .map_err(|e| Error::Transport(e.to_string()))
    }
}

/// Opens the witness for `config` with the system clock, serves until `shutdown` is cancelled,
/// drains, and flushes RocksDB.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    run_with_clock(config, listeners, shutdown, Arc::new(SystemClock)).await
}

/// [`run`] with a given clock for cosignature timestamps.
pub async fn run_with_clock(
    config: Config,
    listeners: Listeners,
    shutdown: CancellationToken,
    clock: Arc<dyn Clock>,
) -> Result<(), Error> {
    let opts = WitnessOptions {
        data_dir: config.data_dir.clone(),
        cosigners: config.cosigners.clone(),
        logs: config.logs.clone(),
        limits: config.limits,
        clock,
    };
    let witness = tokio::task::spawn_blocking(move || Witness::open(opts))
        .await
        .map_err(|e| Error::Internal(format!("opening the store: {e}")))??;
    let witness = Arc::new(witness);
    let vkeys: Vec<String> = witness.verifiers().iter().map(|v| v.to_vkey()).collect();
    info!(name = %config.name, vkeys = ?vkeys, "witness open");
    let served = serve(witness.clone(), &config, listeners, shutdown).await;
    let flushed = tokio::task::spawn_blocking(move || witness.flush())
        .await
        .map_err(|e| Error::Internal(format!("flushing the store: {e}")))?;
    info!("stopped");
    served.and(flushed)
}

/// Serves an open witness on both listeners until `shutdown`, then drains in-flight requests.
/// If either server fails, the other is stopped too and the error returned.
pub async fn serve(
    witness: Arc<Witness>,
    config: &Config,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let stop = shutdown.child_token();
    let witness_for_metrics = witness.clone();
    info!(
        grpc = %listeners.grpc_addr()?,
        http = %listeners.http_addr()?,
        http_tls = config.http_tls.is_some(),
        "serving"
    );

    let grpc = {
        let stop = stop.clone();
        let fut = serve_grpc(witness.clone(), config, listeners.grpc, stop.clone());
        async move {
            let r = fut.await;
            stop.cancel();
            r
        }
    };
    let http = {
        let stop = stop.clone();
        let router = crate::http::router_with(witness, config.max_body_bytes, &config.prefixes);
        let fut = crate::http::serve(
            router,
            listeners.http,
            config.http_tls.clone(),
            config.http_limits.clone(),
            stop.clone(),
        );
        async move {
            let r = fut.await;
            stop.cancel();
            r
        }
    };
    let metrics = {
        let stop = stop.clone();
        let listener = listeners.metrics;
        async move {
            match listener {
                Some(l) => crate::metrics::serve(witness_for_metrics, l, stop).await,
                None => Ok(()),
            }
        }
    };
    let (g, h, m) = tokio::join!(grpc, http, metrics);
    if let Err(e) = &m {
        error!(server = "metrics", error = %e, "server failed");
    }
    for (name, r) in [("grpc", &g), ("http", &h)] {
        if let Err(e) = r {
            error!(server = name, error = %e, "server failed");
        }
    }
    g.and(h).and(m)
}

async fn serve_grpc(
    witness: Arc<Witness>,
    config: &Config,
    listener: TcpListener,
    stop: CancellationToken,
) -> Result<(), Error> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<WitnessServiceServer<WitnessGrpc>>()
        .await;
    health
        .set_serving::<WitnessAdminServiceServer<AdminGrpc>>()
        .await;
    // Both reflection versions (grpcurl asks v1 first; grpcio and older tools v1alpha).
    let reflection = reflection_builder()
        .build_v1()
        .map_err(|e| Error::Internal(format!("reflection: {e}")))?;
    let reflection_v1alpha = reflection_builder()
        .build_v1alpha()
        .map_err(|e| Error::Internal(format!("reflection: {e}")))?;

    let witness_service = WitnessServiceServer::new(WitnessGrpc::new(witness.clone()))
        .max_decoding_message_size(config.max_body_bytes);
    let admin_service = WitnessAdminServiceServer::with_interceptor(
        AdminGrpc::new(witness),
        AdminAuth::new(config.admin_token_sha256),
    );

    let incoming = ReceiverStream::new(crate::tls::accept(
        listener,
        config.grpc_tls.clone(),
        stop.clone(),
    ))
    .map(|(tls, _peer)| Ok::<_, std::io::Error>(tls));

    let signal = {
        let stop = stop.clone();
        let health = health.clone();
        async move {
            stop.cancelled().await;
            // Tell health checkers first, then drain.
            health
                .set_not_serving::<WitnessServiceServer<WitnessGrpc>>()
                .await;
            health
                .set_not_serving::<WitnessAdminServiceServer<AdminGrpc>>()
                .await;
            health
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
            info!("shutting down: draining gRPC");
        }
    };
    tonic::transport::Server::builder()
        .timeout(Duration::from_secs(30))
        .concurrency_limit_per_connection(256)
        .trace_fn(|req| tracing::info_span!("grpc", path = %req.uri().path()))
        .add_service(health_service)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .add_service(witness_service)
        .add_service(admin_service)
        .serve_with_incoming_shutdown(incoming, signal)
        .await
        .map_err(|e| Error::Transport(format!("grpc: {e}")))
}

/// The services the witness serves, as reflection lists them (DESIGN.md, "Operations": both
/// reflection versions list exactly the services served — not the node's, whose descriptors
/// share the file descriptor set).
pub const SERVED_SERVICES: &[&str] = &[
    "accord.witness.v1.WitnessService",
    "accord.witness.v1.WitnessAdminService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// A reflection builder listing exactly [`SERVED_SERVICES`]; both reflection versions'
/// descriptors are registered so that either version resolves both names.
fn reflection_builder() -> tonic_reflection::server::Builder<'static> {
    let mut b = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(accord_proto::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET);
    for s in SERVED_SERVICES {
        b = b.with_service_name(*s);
    }
    b
}
