//! Issue 8, "Bounded resources": HTTP/2 streams per connection are capped, and a connection
//! that completes TLS but never sends the HTTP/2 preface is closed.

use crate::bounds_common;

use accord_tests::TestNode;
use bounds_common::*;
use std::time::{Duration, Instant};

/// The timeout the two close tests set (ms in the config) ...
const SETTING: Duration = Duration::from_millis(500);
/// ... and how soon after it the close must come: ten times the setting, half the preface
/// default (10 s) — a node that ignored the setting would fail.
const SETTING_BOUND: Duration = Duration::from_secs(5);

/// A client that ignores the server's SETTINGS_MAX_CONCURRENT_STREAMS and opens one stream more
/// than `limits.max_streams_per_connection`: that stream is reset with REFUSED_STREAM, the
/// others stay open.
#[tokio::test(flavor = "multi_thread")]
async fn streams_beyond_the_limit_are_refused() {
    const LIMIT: u32 = 4;
    let n = TestNode::builder("acme")
        .party("alice")
        .config(|t, _| t.push_str("\n[limits]\nmax_streams_per_connection = 4\n"))
        .start()
        .await
        .unwrap();
    let mut s = raw_tls(&n).await;
    send(&mut s, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
    send(&mut s, &frame(0x4, 0, 0, &[])).await;
    let headers = hpack(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":path", "/accord.work.v1.WorkService/GetRecord"),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]);
    // Streams 1, 3, ..., 2*LIMIT+1: headers without END_STREAM, so each waits for its body.
    for i in 0..=LIMIT {
        send(&mut s, &frame(0x1, 0x4, 2 * i + 1, &headers)).await;
    }
    let over = 2 * LIMIT + 1;
    let mut max_streams = None;
    let refused = tokio::time::timeout(WAIT, async {
        loop {
            let (kind, flags, stream, payload) = read_frame(&mut s).await.expect("frame");
            match kind {
                // SETTINGS: note MAX_CONCURRENT_STREAMS (0x3), and acknowledge.
                0x4 if flags & 1 == 0 => {
                    for p in payload.chunks(6) {
                        if p.len() == 6 && u16::from_be_bytes([p[0], p[1]]) == 3 {
                            max_streams = Some(u32::from_be_bytes([p[2], p[3], p[4], p[5]]));
                        }
                    }
                    send(&mut s, &frame(0x4, 1, 0, &[])).await;
                }
                // RST_STREAM
                0x3 => {
                    let code = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                    return (stream, code);
                }
                // GOAWAY would close every stream: not what a limit should do.
                0x7 => panic!("GOAWAY instead of a refused stream"),
                _ => {}
            }
        }
    })
    .await
    .expect("the stream over the limit is reset");
    assert_eq!(refused, (over, 0x7), "REFUSED_STREAM on stream {over}");
    assert_eq!(max_streams, Some(LIMIT), "advertised in SETTINGS");
}

/// TLS completed, no HTTP/2 preface: the server closes the connection after
/// `limits.preface_timeout_ms` (500 ms here, default 10 s): not before it, and within 5 s.
#[tokio::test(flavor = "multi_thread")]
async fn no_preface_is_closed() {
    let n = TestNode::builder("acme")
        .config(|t, _| t.push_str("\n[limits]\npreface_timeout_ms = 500\n"))
        .start()
        .await
        .unwrap();
    let since = Instant::now();
    let mut s = raw_tls(&n).await;
    let after = closed_within(&mut s, since, SETTING_BOUND).await;
    assert!(
        after >= SETTING,
        "closed after {after:?}, before the setting"
    );
    // A client that does speak HTTP/2 is served as before.
    accord_tests::wait_serving(n.channel().await.unwrap())
        .await
        .unwrap();
}

/// A connection idle (no streams, no bytes) for `limits.idle_timeout_ms` (500 ms here, default
/// 300 s) is closed: not before it, and within 5 s.
#[tokio::test(flavor = "multi_thread")]
async fn idle_connection_is_closed() {
    let n = TestNode::builder("acme")
        .config(|t, _| t.push_str("\n[limits]\nidle_timeout_ms = 500\n"))
        .start()
        .await
        .unwrap();
    let mut s = raw_tls(&n).await;
    send(&mut s, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
    send(&mut s, &frame(0x4, 0, 0, &[])).await;
    // Idle from the last byte sent.
    let since = Instant::now();
    let after = closed_within(&mut s, since, SETTING_BOUND).await;
    assert!(
        after >= SETTING,
        "closed after {after:?}, before the setting"
    );
}
