//! Federation's and the limits' tuning sections (`[federation]`, `[limits]`), with their
//! defaults.

use super::*;

/// Federation tuning (seed 000, "Federation admission"; DESIGN.md, "Federation").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FederationConfig {
    /// Most records in one envelope.
    #[serde(default = "default_fed_batch")]
    pub batch_size: usize,
    /// A quarantined record whose basis has not arrived by then is rejected
    /// (`quarantine_timeout`), in ms.
    #[serde(default = "default_quarantine_timeout_ms")]
    pub quarantine_timeout_ms: u64,
    /// First retry delay after a failed delivery, ms (doubles per failure, with jitter).
    #[serde(default = "default_retry_base_ms")]
    pub retry_base_ms: u64,
    /// Longest retry delay (and circuit-breaker open period), ms.
    #[serde(default = "default_retry_max_ms")]
    pub retry_max_ms: u64,
    /// Consecutive failures that open a peer's circuit breaker.
    #[serde(default = "default_breaker_failures")]
    pub breaker_failures: u32,
    /// How often receipts still lacking a decision or proof are fetched again, ms.
    #[serde(default = "default_receipt_poll_ms")]
    pub receipt_poll_ms: u64,
    /// Deadline of one delivery call, ms.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Most records queued for one peer (issue 15, item 4). At the bound, routing to that peer
    /// pauses (nothing is dropped: it resumes from where it paused once the peer drains).
    #[serde(default = "default_outbox_max")]
    pub outbox_max: u64,
    /// Ledger entries per second scanned to queue records for a peer that was just added, or
    /// whose routing paused at the outbox bound (backfill, issue 15, item 4).
    #[serde(default = "default_backfill_per_second")]
    pub backfill_per_second: u64,
    /// Envelopes sent to one peer before the first is answered (issue 14, pipelined delivery;
    /// at least 1). Only once the peer answered that it keeps them in order
    /// (`DeliverResponse.sequenced`); to an older peer, one at a time.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// How far behind this node's clock a peer's time for its own record is honoured when this
    /// node is the commitment's home and decides it (issue 26, item 2; ARCHITECTURE.md, "How
    /// organisations converge"), ms. A record that took longer in transit is decided at `now -
    /// clock_skew_ms`. Covers the peers' clock offsets plus their delivery delay; at most
    /// [`MAX_CLOCK_SKEW_MS`].
    #[serde(default = "default_clock_skew_ms")]
    pub clock_skew_ms: u64,
}

/// Largest accepted `federation.clock_skew_ms` (10 minutes): a home that honours a peer's time
/// further back lets that peer answer long-passed deadlines.
pub const MAX_CLOCK_SKEW_MS: u64 = 600_000;

fn default_clock_skew_ms() -> u64 {
    2_000
}

fn default_max_in_flight() -> usize {
    4
}

fn default_outbox_max() -> u64 {
    100_000
}
fn default_backfill_per_second() -> u64 {
    5_000
}

fn default_fed_batch() -> usize {
    256
}
fn default_quarantine_timeout_ms() -> u64 {
    24 * 3600 * 1000
}
fn default_retry_base_ms() -> u64 {
    200
}
fn default_retry_max_ms() -> u64 {
    30_000
}
fn default_breaker_failures() -> u32 {
    5
}
fn default_receipt_poll_ms() -> u64 {
    1000
}
fn default_request_timeout_ms() -> u64 {
    10_000
}

impl Default for FederationConfig {
    fn default() -> Self {
        Self {
            batch_size: default_fed_batch(),
            quarantine_timeout_ms: default_quarantine_timeout_ms(),
            retry_base_ms: default_retry_base_ms(),
            retry_max_ms: default_retry_max_ms(),
            breaker_failures: default_breaker_failures(),
            receipt_poll_ms: default_receipt_poll_ms(),
            request_timeout_ms: default_request_timeout_ms(),
            outbox_max: default_outbox_max(),
            backfill_per_second: default_backfill_per_second(),
            max_in_flight: default_max_in_flight(),
            clock_skew_ms: default_clock_skew_ms(),
        }
    }
}

/// Resource bounds (issue 8, "Bounded resources for every caller"); every default is in README
/// "Limits". Each field is validated (> 0).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Concurrent connections (TLS handshakes included); further connections are closed at once.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: streams one connection may have open; a stream
    /// beyond it is reset with REFUSED_STREAM.
    #[serde(default = "default_max_streams_per_connection")]
    pub max_streams_per_connection: u32,
    /// HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE, bytes.
    #[serde(default = "default_max_header_list_bytes")]
    pub max_header_list_bytes: u32,
    /// After the TLS handshake, the client must send the HTTP/2 preface within this, ms.
    #[serde(default = "default_preface_timeout_ms")]
    pub preface_timeout_ms: u64,
    /// A connection with no traffic (HTTP/2 PINGs aside) for this long is closed, ms.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// HTTP/2 keepalive: the server pings an otherwise silent connection this often, ms.
    #[serde(default = "default_keepalive_interval_ms")]
    pub keepalive_interval_ms: u64,
    /// HTTP/2 keepalive: a ping unanswered for this long closes the connection, ms.
    #[serde(default = "default_keepalive_timeout_ms")]
    pub keepalive_timeout_ms: u64,
    /// Refusals kept at most (a ring: the oldest go first).
    #[serde(default = "default_refusals_max")]
    pub refusals_max: usize,
    /// Refusals older than this are dropped, ms.
    #[serde(default = "default_refusals_max_age_ms")]
    pub refusals_max_age_ms: u64,
    /// How often the refusal ring's retention (count and age) is applied even when no refusal
    /// arrives, ms (issue 15, item 4).
    #[serde(default = "default_refusals_prune_interval_ms")]
    pub refusals_prune_interval_ms: u64,
    /// Refusals stored per source (peer name or remote IP) in a burst; beyond the rate they
    /// are counted but not stored.
    #[serde(default = "default_refusals_burst")]
    pub refusals_burst: u32,
    /// Refusals stored per source per minute, once the burst is spent.
    #[serde(default = "default_refusals_per_minute")]
    pub refusals_per_minute: u32,
    /// Most `ListRecords` streams open at once, over all connections; beyond it a new one is
    /// answered RESOURCE_EXHAUSTED. Default 256.
    #[serde(default = "default_list_streams")]
    pub list_streams: usize,
    /// Most of those streams one party holds at once (issue 27, item 3). Default
    /// `list_streams / 8`, at least 1.
    #[serde(default)]
    pub streams_per_party: Option<usize>,
    /// Streams only the operator may open: the parties together hold at most `list_streams`
    /// less this many. Default `list_streams / 16`.
    #[serde(default)]
    pub operator_stream_reserve: Option<usize>,
    /// Most records in one `SubmitBatch` call; a larger batch is refused whole
    /// (`invalid_argument`, field `records`). Default 1024.
    #[serde(default = "default_max_batch_records")]
    pub max_batch_records: usize,
    /// Commitments with changes not yet sent that one `WatchCommitments` stream may hold
    /// (issue 27, item 3): further changes to one of them coalesce (its latest summary is sent
    /// once); a change to one more closes the stream RESOURCE_EXHAUSTED `watch_lagged`.
    /// 1–[`MAX_WATCH_PENDING`].
    #[serde(default = "default_watch_pending")]
    pub watch_pending: usize,
}

/// Largest `limits.watch_pending`.
pub const MAX_WATCH_PENDING: usize = 1_000_000;

fn default_watch_pending() -> usize {
    1024
}

fn default_list_streams() -> usize {
    256
}

impl LimitsConfig {
    /// The stream bounds with their defaults resolved: (every stream, one party's, the
    /// operator's reserve).
    pub fn streams(&self) -> (usize, usize, usize) {
        let total = self.list_streams;
        (
            total,
            self.streams_per_party.unwrap_or((total / 8).max(1)),
            self.operator_stream_reserve.unwrap_or(total / 16),
        )
    }
}

fn default_max_batch_records() -> usize {
    1024
}

fn default_max_connections() -> usize {
    1024
}
fn default_max_streams_per_connection() -> u32 {
    100
}
fn default_max_header_list_bytes() -> u32 {
    16 * 1024
}
fn default_preface_timeout_ms() -> u64 {
    10_000
}
fn default_idle_timeout_ms() -> u64 {
    300_000
}
fn default_keepalive_interval_ms() -> u64 {
    60_000
}
fn default_keepalive_timeout_ms() -> u64 {
    20_000
}
fn default_refusals_max() -> usize {
    10_000
}
fn default_refusals_max_age_ms() -> u64 {
    7 * 24 * 3600 * 1000
}
fn default_refusals_prune_interval_ms() -> u64 {
    60_000
}
fn default_refusals_burst() -> u32 {
    20
}
fn default_refusals_per_minute() -> u32 {
    60
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_connections: default_max_connections(),
            max_streams_per_connection: default_max_streams_per_connection(),
            max_header_list_bytes: default_max_header_list_bytes(),
            preface_timeout_ms: default_preface_timeout_ms(),
            idle_timeout_ms: default_idle_timeout_ms(),
            keepalive_interval_ms: default_keepalive_interval_ms(),
            keepalive_timeout_ms: default_keepalive_timeout_ms(),
            refusals_max: default_refusals_max(),
            refusals_max_age_ms: default_refusals_max_age_ms(),
            refusals_prune_interval_ms: default_refusals_prune_interval_ms(),
            refusals_burst: default_refusals_burst(),
            list_streams: default_list_streams(),
            streams_per_party: None,
            operator_stream_reserve: None,
            max_batch_records: default_max_batch_records(),
            watch_pending: default_watch_pending(),
            refusals_per_minute: default_refusals_per_minute(),
        }
    }
}

impl LimitsConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (field, v) in [
            ("limits.max_connections", self.max_connections as u64),
            (
                "limits.max_streams_per_connection",
                u64::from(self.max_streams_per_connection),
            ),
            (
                "limits.max_header_list_bytes",
                u64::from(self.max_header_list_bytes),
            ),
            ("limits.preface_timeout_ms", self.preface_timeout_ms),
            ("limits.idle_timeout_ms", self.idle_timeout_ms),
            ("limits.keepalive_interval_ms", self.keepalive_interval_ms),
            ("limits.keepalive_timeout_ms", self.keepalive_timeout_ms),
            ("limits.refusals_max", self.refusals_max as u64),
            ("limits.refusals_max_age_ms", self.refusals_max_age_ms),
            (
                "limits.refusals_prune_interval_ms",
                self.refusals_prune_interval_ms,
            ),
            ("limits.refusals_burst", u64::from(self.refusals_burst)),
        ] {
            if v == 0 {
                return Err(err(field, "must be > 0"));
            }
        }
        if !(1..=MAX_WATCH_PENDING).contains(&self.watch_pending) {
            return Err(err(
                "limits.watch_pending",
                format!("must be between 1 and {MAX_WATCH_PENDING}"),
            ));
        }
        Ok(())
    }
}
