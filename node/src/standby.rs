//! A standby instance (issue 31, item 2): an instance of a node on PostgreSQL that waits for the
//! writer's lease binds its port at once and answers there while it waits. gRPC health reports
//! every service `NOT_SERVING` (health says who takes writes: load balancers and peers send
//! those to the writer). Once its read-only node is open ([`crate::node::open_with`] with
//! `follow`: a ledger following the writer's commits through the change journal,
//! `projection::journal`), it serves every read ([`READS`]) from the database; every other
//! call — and every read before that — is refused `UNAVAILABLE`, `accord-reason: not_writer`,
//! with `accord-writer` naming the instance that holds the lease, so that a client or a peer
//! listing several endpoints moves on at once. Once it holds the lease, the same listener
//! serves the node.

use crate::error::Error;
use futures::{Stream, StreamExt};
use std::convert::Infallible;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Splits the listener's accepted connections between the standby's server (those accepted
/// before `opened` is cancelled) and the node's (every one after): one task hands each
/// connection to the server whose turn it is, so neither server's stream ever waits on the
/// other's (a server that stops polling its stream, as the standby's does while it drains,
/// holds nothing back). The standby's stream ends when `opened` is cancelled; the node's when
/// the listener's does.
pub(crate) fn split<T, S>(
    incoming: S,
    opened: CancellationToken,
) -> (
    impl Stream<Item = T> + Send + 'static,
    impl Stream<Item = T> + Send + 'static,
)
where
    T: Send + 'static,
    S: Stream<Item = T> + Send + 'static,
{
    let (standby_tx, standby_rx) = tokio::sync::mpsc::channel(16);
    let (node_tx, node_rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let mut incoming = Box::pin(incoming);
        let mut standby_tx = Some(standby_tx);
        loop {
            let next = tokio::select! {
                x = incoming.next() => x,
                _ = opened.cancelled(), if standby_tx.is_some() => {
                    standby_tx = None;
                    continue;
                }
            };
            let Some(conn) = next else { break };
            let sent = match (&standby_tx, opened.is_cancelled()) {
                (Some(tx), false) => tx.send(conn).await.is_ok(),
                _ => node_tx.send(conn).await.is_ok(),
            };
            if !sent {
                tracing::debug!("a connection arrived as its server stopped");
            }
        }
    });
    (
        tokio_stream::wrappers::ReceiverStream::new(standby_rx),
        tokio_stream::wrappers::ReceiverStream::new(node_rx),
    )
}

/// The refusal a standby answers every call with: `not_writer`, naming `writer` (in the message
/// and in `accord-writer`, once known).
pub(crate) fn refusal(writer: &str) -> tonic::Status {
    let mut status: tonic::Status = Error::NotWriter(format!(
        "this instance is a standby waiting for the writer's lease; the writer is {writer}"
    ))
    .into();
    // Empty until the standby first read the lease row.
    if !writer.is_empty()
        && let Ok(v) = crate::ident::truncate(writer, 200).parse()
    {
        status.metadata_mut().insert("accord-writer", v);
    }
    status
}

/// The calls a standby serves from the database once its read-only node is open: reads that
/// change nothing. Every other path (writes, federation's `Deliver`, the admin API's changes)
/// is refused `not_writer` before any handler runs.
pub const READS: &[&str] = &[
    "/accord.work.v1.WorkService/GetRecord",
    "/accord.work.v1.WorkService/ListRecords",
    "/accord.work.v1.WorkService/GetCommitment",
    "/accord.work.v1.WorkService/GetDurability",
    "/accord.work.v1.WorkService/ListCommitments",
    "/accord.work.v1.WorkService/WatchCommitments",
    "/accord.work.v1.WorkService/ListAttention",
    "/accord.work.v1.WorkService/WatchAttention",
    "/accord.log.v1.LogService/GetCheckpoint",
    "/accord.log.v1.LogService/GetInclusionProof",
    "/accord.log.v1.LogService/GetConsistencyProof",
    "/accord.federation.v1.FederationService/GetReceipts",
    "/accord.run.v1.RunService/GetRun",
    "/accord.run.v1.RunService/GetReceipt",
    "/accord.run.v1.RunService/GetPriorWork",
    "/accord.envelope.v1.EnvelopeService/Get",
    "/accord.envelope.v1.EnvelopeService/List",
    "/accord.envelope.v1.EnvelopeService/ListHolds",
    "/accord.admin.v1.AdminService/GetStatus",
    "/accord.admin.v1.AdminService/ListPeers",
    "/accord.admin.v1.AdminService/ListQuarantine",
];

/// The read-only node's services, once open.
pub(crate) type Reads = watch::Receiver<Option<axum::Router>>;

/// Serves the standby's answers on `incoming` until `until` is cancelled: health NOT_SERVING for
/// the server and each of `services`; [`READS`] by `reads` once it holds a router; `writer`
/// follows the lease row's holder.
pub(crate) async fn serve<I, IO>(
    incoming: I,
    until: CancellationToken,
    writer: watch::Receiver<String>,
    reads: Reads,
    services: &'static [&'static str],
) -> Result<(), Error>
where
    I: Stream<Item = Result<IO, std::io::Error>> + Send + 'static,
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
{
    use tonic_health::ServingStatus;
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::NotServing)
        .await;
    for s in services {
        reporter
            .set_service_status(*s, ServingStatus::NotServing)
            .await;
    }
    let refuse = tower::service_fn(move |req: http::Request<axum::body::Body>| {
        let router = match READS.contains(&req.uri().path()) {
            true => reads.borrow().clone(),
            false => None,
        };
        let status = refusal(&writer.borrow());
        async move {
            match router {
                Some(r) => {
                    use tower::ServiceExt;
                    r.oneshot(req).await
                }
                None => Ok::<_, Infallible>(
                    status
                        .into_http::<tonic::body::Body>()
                        .map(axum::body::Body::new),
                ),
            }
        }
    });
    let routes = tonic::service::Routes::new(health)
        .into_axum_router()
        .fallback_service(refuse);
    tonic::transport::Server::builder()
        .add_routes(routes.into())
        .serve_with_incoming_shutdown(incoming, until.cancelled())
        .await
        .map_err(|e| Error::Internal(format!("standby serve: {e}")))
}
