//! Graceful shutdown: the first SIGINT (Ctrl-C) or SIGTERM cancels a token that the daemon's
//! servers watch; they stop accepting, drain, and `run` returns.

use tokio_util::sync::CancellationToken;

/// Waits for SIGINT or SIGTERM, then cancels `token`. Spawn it: `tokio::spawn(cancel_on_signal(t))`.
/// If SIGTERM cannot be hooked (not Unix, or the handler cannot be installed), Ctrl-C alone
/// stops the daemon.
pub async fn cancel_on_signal(token: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutdown signal received; draining");
    token.cancel();
}
