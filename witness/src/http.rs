//! The C2SP tlog-witness HTTP interface (c2sp.org/tlog-witness, "HTTP Interface"):
//! `POST /add-checkpoint` with the text body of [`AddCheckpoint::parse_http_body`], answering 200
//! with the cosignature line(s), or 400 / 403 / 404 / 409 (`text/x.tlog.size`) / 422. Bodies
//! larger than the configured bound get 413; admission limits give 429 / 503.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::{HeaderValue, StatusCode, header};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tracing::instrument;

use crate::error::Error;
use crate::request::AddCheckpoint;
use crate::witness::Witness;

/// The HTTP router: `POST /add-checkpoint` (c2sp.org/tlog-witness, "add-checkpoint"), with
/// request bodies bounded by `max_body_bytes` (413 beyond).
pub fn router(witness: Arc<Witness>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/add-checkpoint", post(add_checkpoint))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(witness)
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
        Ok(cosigned) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            )],
            cosigned.cosignatures,
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

/// A TLS listener for `axum::serve`: handshakes run concurrently in [`crate::tls::accept`].
pub(crate) struct TlsListener {
    pub(crate) rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    pub(crate) local: SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The acceptor stopped (shutdown): axum's graceful shutdown stops accepting too.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// Serves the router on a plain or TLS listener until `shutdown`, then drains connections.
pub(crate) async fn serve(
    router: Router,
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), Error> {
    let done = shutdown.clone();
    let signal = async move { done.cancelled().await };
    let result = match tls {
        None => {
            axum::serve(listener, router)
                .with_graceful_shutdown(signal)
                .await
        }
        Some(cfg) => {
            let local = listener
                .local_addr()
                .map_err(|e| Error::Transport(e.to_string()))?;
            let rx = crate::tls::accept(listener, cfg, shutdown);
            axum::serve(TlsListener { rx, local }, router)
                .with_graceful_shutdown(signal)
                .await
        }
    };
    result.map_err(|e| Error::Transport(format!("http: {e}")))
}
