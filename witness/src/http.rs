//! The C2SP tlog-witness HTTP interface (c2sp.org/tlog-witness, "HTTP Interface"):
//! `POST <submission prefix>/add-checkpoint` with the text body of
//! [`AddCheckpoint::parse_http_body`], answering 200 with the cosignature line(s), or 400 / 403 /
//! 404 / 409 (`text/x.tlog.size`) / 422; `POST <submission prefix>/sign-subtree`
//! ([`crate::subtree`]); `GET <monitoring prefix>/<origin hash>/checkpoint` (the latest co-signed
//! checkpoint, 404 if none). Bodies larger than the configured bound get 413; admission limits
//! give 429 / 503.
//!
//! The listener is bounded ([`crate::config::HttpLimits`], issue 8): a request's headers must
//! arrive within `http.header_read_timeout_ms` (hyper's HTTP/1 header timer: a slowloris client
//! sending a byte a second is cut), its body within `http.body_read_timeout_ms` (408), and at
//! most `http.max_connections` connections are open (further ones are closed at once).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderValue, StatusCode, header};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::instrument;

use crate::config::{HttpLimits, Prefixes};
use crate::error::Error;
use crate::request::AddCheckpoint;
use crate::subtree::SignSubtree;
use crate::witness::Witness;

/// The HTTP router at the root prefixes: see [`router_with`].
pub fn router(witness: Arc<Witness>, max_body_bytes: usize) -> Router {
    router_with(witness, max_body_bytes, &Prefixes::default())
}

/// The HTTP router (c2sp.org/tlog-witness, "HTTP Interface"): `POST <submission
/// prefix>/add-checkpoint`, `POST <submission prefix>/sign-subtree` and `GET <monitoring
/// prefix>/<origin hash>/checkpoint`, with request bodies bounded by `max_body_bytes` (413
/// beyond).
pub fn router_with(witness: Arc<Witness>, max_body_bytes: usize, prefixes: &Prefixes) -> Router {
    let submission = Router::new()
        .route("/add-checkpoint", post(add_checkpoint))
        .route("/sign-subtree", post(sign_subtree));
    let monitoring = Router::new().route("/{origin_hash}/checkpoint", get(monitor_checkpoint));
    let nest = |r: Router<Arc<Witness>>, p: &str| {
        if p.is_empty() {
            r
        } else {
            Router::new().nest(p, r)
        }
    };
    nest(submission, &prefixes.submission)
        .merge(nest(monitoring, &prefixes.monitoring))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(witness)
}

fn text_ok(body: String) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

/// `POST <submission prefix>/sign-subtree`.
#[instrument(name = "http.sign_subtree", skip_all, fields(len = body.len()))]
async fn sign_subtree(State(witness): State<Arc<Witness>>, body: Bytes) -> Response {
    let result = async {
        let req = SignSubtree::parse_http_body(&body)?;
        witness.sign_subtree(req).await
    }
    .await;
    match result {
        Ok(lines) => text_ok(lines),
        Err(e) => e.into_response(),
    }
}

/// `GET <monitoring prefix>/<origin hash>/checkpoint`: the latest co-signed checkpoint, or 404.
/// The origin hash is lowercase hex SHA-256 of the origin (anything else is 404 too: no log has
/// that hash).
#[instrument(name = "http.monitor_checkpoint", skip_all)]
async fn monitor_checkpoint(
    State(witness): State<Arc<Witness>>,
    Path(origin_hash): Path<String>,
) -> Response {
    let mut hash = [0u8; 32];
    let lowercase_hex = origin_hash.len() == 64
        && origin_hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && hex::decode_to_slice(&origin_hash, &mut hash).is_ok();
    if !lowercase_hex {
        return (
            StatusCode::NOT_FOUND,
            "not a lowercase hex SHA-256 origin hash\n",
        )
            .into_response();
    }
    match witness.monitoring_checkpoint(&hash).await {
        Ok(note) => text_ok(note),
        Err(e) => e.into_response(),
    }
}

/// `POST /add-checkpoint`.
#[instrument(name = "http.add_checkpoint", skip_all, fields(len = body.len()))]
async fn add_checkpoint(State(witness): State<Arc<Witness>>, body: Bytes) -> Response {
    let result = async {
        let req = AddCheckpoint::parse_http_body(&body)?;
        witness.add_checkpoint(req).await
    }
    .await;
    match result {
        Ok(cosigned) => text_ok(cosigned.cosignatures),
        Err(e) => e.into_response(),
    }
}

/// Reads the whole body within the body timeout (408 beyond) and the size bound (413), before
/// the handler runs.
async fn bounded_body(
    State(limits): State<HttpLimits>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (parts, body) = req.into_parts();
    let read = axum::body::to_bytes(body, limits.max_body_bytes);
    match tokio::time::timeout(limits.body_read_timeout, read).await {
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            "request body not received in time\n",
        )
            .into_response(),
        Ok(Err(_)) => (StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n").into_response(),
        Ok(Ok(bytes)) => {
            next.run(axum::extract::Request::from_parts(
                parts,
                axum::body::Body::from(bytes),
            ))
            .await
        }
    }
}

/// One HTTP/1.1 connection with the header read timeout; drained gracefully at `shutdown`.
async fn connection<I>(
    io: I,
    router: Router,
    limits: HttpLimits,
    slot: OwnedSemaphorePermit,
    shutdown: tokio_util::sync::CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper_util::service::TowerToHyperService::new(router);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(io), svc);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "http connection closed");
            }
        }
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
    drop(slot);
}

/// Serves the router on a plain or TLS listener until `shutdown`, then drains connections.
pub(crate) async fn serve(
    router: Router,
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: HttpLimits,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), Error> {
    let router = router.layer(axum::middleware::from_fn_with_state(
        limits.clone(),
        bounded_body,
    ));
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut conns = tokio::task::JoinSet::new();
    let refuse = |addr: SocketAddr| {
        tracing::warn!(%addr, max_connections = limits.max_connections, "http connection refused: too many open");
    };
    match tls {
        None => loop {
            let (tcp, addr) = tokio::select! {
                () = shutdown.cancelled() => break,
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "http accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            while conns.try_join_next().is_some() {}
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                refuse(addr);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            conns.spawn(connection(
                tcp,
                router.clone(),
                limits.clone(),
                slot,
                shutdown.clone(),
            ));
        },
        Some(cfg) => {
            let mut rx = crate::tls::accept(listener, cfg, shutdown.clone());
            loop {
                let (tls, addr) = tokio::select! {
                    () = shutdown.cancelled() => break,
                    r = rx.recv() => match r { Some(c) => c, None => break },
                };
                while conns.try_join_next().is_some() {}
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    refuse(addr);
                    continue;
                };
                conns.spawn(connection(
                    tls,
                    router.clone(),
                    limits.clone(),
                    slot,
                    shutdown.clone(),
                ));
            }
        }
    }
    // Drain: each connection finishes its request in flight, then closes.
    while conns.join_next().await.is_some() {}
    Ok(())
}
