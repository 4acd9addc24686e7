//! Accepting connections: TLS handshakes concurrently and off the accept loop, the connection
//! bound, and the stream guarded by the preface and idle timeouts (issue 8).

use super::OFFERED;
use futures::Stream;
use rustls::ServerConfig;
use std::cell::RefCell;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// Counters of the listener (issue 8; exported by the metrics later).
#[derive(Debug, Default)]
pub struct ListenerStats {
    /// TLS handshakes refused (failed or timed out).
    pub refused_handshakes: AtomicU64,
    /// Connections closed at once because `limits.max_connections` were open.
    pub refused_connections: AtomicU64,
    /// Connections closed for a missing HTTP/2 preface or idleness.
    pub timed_out: AtomicU64,
}

/// Bounds of the listener (from `[limits]`, README "Limits").
#[derive(Debug, Clone)]
pub struct ListenerLimits {
    /// Open connections at most (handshakes included).
    pub max_connections: usize,
    /// A TLS handshake must complete within this.
    pub handshake_timeout: Duration,
    /// The HTTP/2 preface must arrive within this after the handshake.
    pub preface_timeout: Duration,
    /// A connection without traffic (PINGs aside) for this long is closed.
    pub idle_timeout: Duration,
}

impl ListenerLimits {
    /// The limits of a node's `[limits]` (the handshake timeout stays 10 s).
    pub fn from_config(l: &crate::config::LimitsConfig) -> Self {
        Self {
            max_connections: l.max_connections,
            handshake_timeout: Duration::from_secs(10),
            preface_timeout: Duration::from_millis(l.preface_timeout_ms),
            idle_timeout: Duration::from_millis(l.idle_timeout_ms),
        }
    }
}

/// Accepts TCP connections and completes TLS handshakes concurrently (each bounded by a
/// timeout), yielding established streams until `shutdown`. At most `limits.max_connections`
/// are open at once (a connection beyond is closed at once); each stream is [`Guarded`] by the
/// preface and idle timeouts. A refused handshake is logged at warn with the subject of the
/// client certificate offered, and counted in `stats`.
pub fn incoming(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    limits: ListenerLimits,
    stats: Arc<ListenerStats>,
    shutdown: CancellationToken,
) -> impl Stream<Item = Result<Guarded, std::io::Error>> {
    let acceptor = TlsAcceptor::from(config);
    let (tx, rx) = tokio::sync::mpsc::channel(128);
    let open = Arc::new(Semaphore::new(limits.max_connections));
    tokio::spawn(async move {
        loop {
            let (tcp, addr) = tokio::select! {
                _ = shutdown.cancelled() => break,
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        // Out of file descriptors and the like: back off rather than spin.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let Ok(permit) = open.clone().try_acquire_owned() else {
                let n = stats.refused_connections.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(%addr, max_connections = limits.max_connections, refused = n, "connection refused: too many open");
                drop(tcp);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            let stats = stats.clone();
            let limits = limits.clone();
            tokio::spawn(OFFERED.scope(RefCell::new(None), async move {
                let r = tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await;
                let offered = OFFERED.with(|o| o.borrow().clone());
                let offered = offered.as_deref().unwrap_or("(none seen: the handshake failed before a client certificate)");
                match r {
                    Ok(Ok(s)) => {
                        let _ = tx.send(Ok(Guarded::new(s, permit, &limits, stats))).await;
                    }
                    Ok(Err(e)) => {
                        stats.refused_handshakes.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(%addr, client_certificate = offered, error = %e, "TLS handshake refused");
                    }
                    Err(_) => {
                        stats.refused_handshakes.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(%addr, client_certificate = offered, "TLS handshake timed out");
                    }
                }
            }));
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// The HTTP/2 connection preface's length (RFC 9113, 3.4).
const PREFACE_LEN: usize = 24;

/// An HTTP/2 PING frame alone (9-byte header, length 8, type 0x6): keepalive, not activity.
fn is_ping(b: &[u8]) -> bool {
    b.len() == 17 && b[..4] == [0, 0, 8, 6]
}

/// A server TLS stream with the listener's bounds: the connection slot it holds (released on
/// drop), the HTTP/2 preface deadline, then the idle deadline, reset by any traffic other than
/// a lone PING. Past a deadline, reads fail with `TimedOut` and hyper closes the connection.
pub struct Guarded {
    inner: TlsStream<TcpStream>,
    _slot: OwnedSemaphorePermit,
    deadline: Pin<Box<Sleep>>,
    preface_left: usize,
    idle: Duration,
    stats: Arc<ListenerStats>,
}

impl std::fmt::Debug for Guarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("preface_left", &self.preface_left)
            .finish()
    }
}

impl Guarded {
    fn new(
        inner: TlsStream<TcpStream>,
        slot: OwnedSemaphorePermit,
        limits: &ListenerLimits,
        stats: Arc<ListenerStats>,
    ) -> Self {
        Self {
            inner,
            _slot: slot,
            deadline: Box::pin(tokio::time::sleep(limits.preface_timeout)),
            preface_left: PREFACE_LEN,
            idle: limits.idle_timeout,
            stats,
        }
    }

    fn active(&mut self) {
        let at = Instant::now() + self.idle;
        self.deadline.as_mut().reset(at);
    }
}

impl tonic::transport::server::Connected for Guarded {
    type ConnectInfo = <TlsStream<TcpStream> as tonic::transport::server::Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        tonic::transport::server::Connected::connect_info(&self.inner)
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len() - before;
                if n > 0 {
                    if self.preface_left > 0 {
                        self.preface_left = self.preface_left.saturating_sub(n);
                        if self.preface_left == 0 {
                            self.active();
                        }
                    } else if !is_ping(&buf.filled()[before..]) {
                        self.active();
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.stats.timed_out.fetch_add(1, Ordering::Relaxed);
                    let what = if self.preface_left > 0 {
                        "no HTTP/2 preface in time"
                    } else {
                        "idle connection"
                    };
                    tracing::debug!(reason = what, "closing connection");
                    Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, what)))
                }
                Poll::Pending => Poll::Pending,
            },
            other => other,
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r
            && n > 0
            && self.preface_left == 0
            && !is_ping(&buf[..n])
        {
            self.active();
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
