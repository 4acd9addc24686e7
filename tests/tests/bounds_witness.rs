//! Issue 8, "Bounded resources": the witness's HTTP listener cuts slow headers and caps its
//! connections.

use crate::bounds_common;

use accord_tests::TestWitness;
use bounds_common::*;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A witness whose `[http]` section has the extra `lines`.
async fn witness(lines: &str) -> TestWitness {
    let key =
        accord_proto::note::Signer::generate("example.com/log", &mut rand::rngs::OsRng).unwrap();
    TestWitness::start_with(
        "witness.test/w1",
        "example.com/log",
        &key.verifier().to_vkey(),
        |text| *text = text.replacen("[http]\n", &format!("[http]\n{lines}\n"), 1),
    )
    .await
    .unwrap()
}

/// Headers sent at five bytes a second are cut by `http.header_read_timeout_ms` (1 s here,
/// default 10 s): the connection closes while the client is still sending its request line,
/// not before the second and within 5 s.
#[tokio::test(flavor = "multi_thread")]
async fn slow_headers_are_cut() {
    const SETTING: Duration = Duration::from_secs(1);
    const BOUND: Duration = Duration::from_secs(5);
    let w = witness("header_read_timeout_ms = 1000").await;
    let since = Instant::now();
    let mut s = TcpStream::connect(w.http).await.unwrap();
    let request = b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nContent-Length: 10\r\n\r\n";
    let mut sent = 0;
    let mut closed = false;
    let mut buf = [0u8; 512];
    for b in request {
        if s.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        sent += 1;
        // The attacker's pace: five bytes a second; a close (EOF or a 408) ends the wait early.
        match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(n)) => {
                let text = String::from_utf8_lossy(&buf[..n]);
                assert!(text.starts_with("HTTP/1.1 408"), "{text}");
                closed = true;
                break;
            }
            Err(_) => {}
        }
    }
    let after = since.elapsed();
    assert!(
        closed,
        "all {sent} bytes sent at 5/s and the connection is still open"
    );
    assert!(
        (SETTING..BOUND).contains(&after),
        "cut after {after:?} ({sent} bytes), the setting is {SETTING:?}"
    );
}

/// Beyond `http.max_connections` (2 here), a connection is closed at once; the open ones are
/// still served.
#[tokio::test(flavor = "multi_thread")]
async fn connections_over_the_cap_are_closed() {
    let w = witness("max_connections = 2\nheader_read_timeout_ms = 60000").await;
    let mut first = TcpStream::connect(w.http).await.unwrap();
    let mut second = TcpStream::connect(w.http).await.unwrap();
    // Make sure both are accepted (each answers a request) before the third.
    for s in [&mut first, &mut second] {
        s.write_all(b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nContent-Length: 3\r\n\r\nbad")
            .await
            .unwrap();
        let mut buf = [0u8; 512];
        let n = tokio::time::timeout(WAIT, s.read(&mut buf))
            .await
            .expect("answered")
            .unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 4"));
    }
    let mut third = TcpStream::connect(w.http).await.unwrap();
    let _ = third
        .write_all(b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nContent-Length: 3\r\n\r\nbad")
        .await;
    let mut buf = [0u8; 512];
    // At once: well within the 60 s header timeout it would otherwise wait for.
    let r = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf))
        .await
        .expect("the third connection is closed, not left hanging");
    assert!(
        matches!(r, Ok(0) | Err(_)),
        "the third connection was served"
    );
    // The first is still served.
    first
        .write_all(b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nContent-Length: 3\r\n\r\nbad")
        .await
        .unwrap();
    let n = tokio::time::timeout(WAIT, first.read(&mut buf))
        .await
        .expect("answered")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 4"));
}
