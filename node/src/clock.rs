//! Wall-clock time for the node's edge. The kernel never reads a clock: the ledger writer reads
//! this once per group commit and passes it in, and the Work service party's ticks pass it in.

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
