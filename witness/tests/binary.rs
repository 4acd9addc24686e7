//! The real `accord-witness` binary: `init` prints the vkey, `serve` prints its ports first, serves
//! HTTP and gRPC, stops cleanly on SIGTERM, and after a restart on the same data directory keeps
//! its state: it refuses a rollback and a fork, and remembers logs added and removed at runtime.

#[path = "service/common.rs"]
mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use accord_proto::note::{KeyKind, Verifier};
use accord_proto::pb::witness::v1 as pb;
use common::{TestLog, http_post, tls_channel};
use pb::witness_admin_service_client::WitnessAdminServiceClient;
use pb::witness_service_client::WitnessServiceClient;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_accord-witness");

struct Running {
    child: Child,
    grpc: SocketAddr,
    http: SocketAddr,
}

async fn serve(config: &Path) -> Running {
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(config)
        .args(["--log-format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let first = BufReader::new(stdout)
        .lines()
        .next_line()
        .await
        .unwrap()
        .unwrap();
    let rest = first.strip_prefix("listening ").expect(&first);
    let (grpc, http) = rest.split_once(' ').unwrap();
    Running {
        child,
        grpc: grpc.strip_prefix("grpc=").unwrap().parse().unwrap(),
        http: http.strip_prefix("http=").unwrap().parse().unwrap(),
    }
}

/// SIGTERM, then the exit status must be success (drained and flushed).
async fn stop(mut r: Running) {
    let pid = r.child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let status = r.child.wait().await.unwrap();
    assert!(status.success(), "{status:?}");
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn authed<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    r
}

#[tokio::test]
async fn the_binary_keeps_its_state_across_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let out = Command::new(BIN)
        .args(["init", "--dir"])
        .arg(&dir)
        .args(["--name", "witness.test/bin", "--grpc-listen", "127.0.0.1:0"])
        .args(["--http-listen", "127.0.0.1:0"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let vkey = String::from_utf8(out.stdout).unwrap();
    let witness = Verifier::from_vkey(vkey.trim()).unwrap();
    assert_eq!(
        (witness.name(), witness.kind()),
        ("witness.test/bin", KeyKind::CosignatureV1)
    );
    let token = std::fs::read_to_string(dir.join("admin.token"))
        .unwrap()
        .trim()
        .to_owned();

    let mut a = TestLog::new("example.com/a");
    let config = dir.join("witness.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[[logs]]\norigin = \"{}\"\nvkeys = [\"{}\"]\n",
        a.origin(),
        a.vkey()
    ));
    std::fs::write(&config, text).unwrap();

    // First run: a chain for A over HTTP; B added over the admin API.
    let w = serve(&config).await;
    let mut held = 0;
    for size in [5u64, 9] {
        a.grow_to(size);
        let before = now();
        let r = http_post(
            w.http,
            "/add-checkpoint",
            a.request(held).to_http_body().as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{r:?}");
        let sig = accord_proto::note::NoteSignature::parse_line(&r.body).unwrap();
        let body = a.checkpoint().to_body().unwrap();
        let t = accord_proto::checkpoint::verify_cosignature(&witness, &body, &sig).unwrap();
        assert!((before..=now()).contains(&t), "timestamp {t}");
        held = size;
    }
    let mut b = TestLog::new("example.com/b");
    let ch = tls_channel(&dir, w.grpc).await;
    WitnessAdminServiceClient::new(ch.clone())
        .add_log(authed(
            &token,
            pb::AddLogRequest {
                log: Some(pb::Log {
                    origin: b.origin().into(),
                    vkeys: vec![b.vkey()],
                }),
            },
        ))
        .await
        .unwrap();
    b.grow_to(3);
    let r = http_post(
        w.http,
        "/add-checkpoint",
        b.request(0).to_http_body().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    drop(ch);
    stop(w).await;

    // Second run, same data directory.
    let w = serve(&config).await;
    let ch = tls_channel(&dir, w.grpc).await;
    let latest = WitnessServiceClient::new(ch.clone())
        .get_latest(pb::GetLatestRequest {
            origin: a.origin().into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(latest.size, 9);
    assert_eq!(latest.checkpoint, a.checkpoint().to_body().unwrap());

    // Rollback: an older old size, or starting over from 0, is 409 with the held size.
    let mut old = TestLog::with_signer(a.signer.clone(), "leaf");
    old.grow_to(5);
    let r = http_post(
        w.http,
        "/add-checkpoint",
        old.request(0).to_http_body().as_bytes(),
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (409, "9\n"), "{r:?}");
    let mut newer = a.clone();
    newer.grow_to(12);
    let r = http_post(
        w.http,
        "/add-checkpoint",
        newer.request(5).to_http_body().as_bytes(),
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (409, "9\n"), "{r:?}");

    // Fork: another root at the held size, or an extension of another size-9 tree: 422.
    let mut fork = TestLog::with_signer(a.signer.clone(), "fork");
    fork.grow_to(9);
    let r = http_post(
        w.http,
        "/add-checkpoint",
        fork.request(9).to_http_body().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 422, "{r:?}");
    fork.grow_to(12);
    let r = http_post(
        w.http,
        "/add-checkpoint",
        fork.request(9).to_http_body().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 422, "{r:?}");

    // The honest extension still works, and B (added at runtime) is still known.
    let r = http_post(
        w.http,
        "/add-checkpoint",
        newer.request(9).to_http_body().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    b.grow_to(4);
    let r = http_post(
        w.http,
        "/add-checkpoint",
        b.request(3).to_http_body().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");

    // Remove B; after another restart it stays removed (it is not in the config file).
    WitnessAdminServiceClient::new(ch.clone())
        .remove_log(authed(
            &token,
            pb::RemoveLogRequest {
                origin: b.origin().into(),
            },
        ))
        .await
        .unwrap();
    drop(ch);
    stop(w).await;
    let w = serve(&config).await;
    b.grow_to(6);
    let r = http_post(
        w.http,
        "/add-checkpoint",
        b.request(4).to_http_body().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 404, "{r:?}");
    let r = http_post(
        w.http,
        "/add-checkpoint",
        newer.request(12).to_http_body().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    stop(w).await;
}

#[tokio::test]
async fn a_bad_config_names_the_field_before_binding() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let out = Command::new(BIN)
        .args(["init", "--dir"])
        .arg(&dir)
        .args(["--name", "w"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let config = dir.join("witness.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("listen = \"127.0.0.1:7080\"", "listen = \"not-an-address\"");
    std::fs::write(&config, text).unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "nothing listened");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("http.listen"), "{stderr}");
}
