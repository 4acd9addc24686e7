//! Helpers: test logs built with accord-proto's Merkle tree and signer, an in-process witness on
//! 127.0.0.1:0, a TLS gRPC channel, and a minimal HTTP/1.1 client. Shared with `binary.rs`,
//! which uses only part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use accord_proto::checkpoint::{Checkpoint, open_checkpoint, verify_cosignature};
use accord_proto::merkle::{Hash, MemoryTree, NodeSource as _, consistency_proof, leaf_hash};
use accord_proto::note::{KeyKind, NoteSignature, Signer, Verifier};
use accord_witness::init::{InitOptions, KeyAlg, init_with};
use accord_witness::{AddCheckpoint, Config, Listeners, ManualClock};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

/// A log: its key (named after the origin) and its tree.
#[derive(Clone)]
pub struct TestLog {
    pub signer: Signer,
    pub tree: MemoryTree,
    /// Leaves are `"{label} {i}"`: two logs with different labels fork.
    label: String,
}

impl TestLog {
    pub fn new(origin: &str) -> TestLog {
        let signer = Signer::generate(origin, &mut rand::rngs::OsRng).unwrap();
        TestLog::with_signer(signer, "leaf")
    }

    pub fn with_signer(signer: Signer, label: &str) -> TestLog {
        TestLog {
            signer,
            tree: MemoryTree::new(),
            label: label.to_owned(),
        }
    }

    /// A copy of this log's tree that continues with different leaves (a fork).
    pub fn fork(&self, label: &str) -> TestLog {
        let mut t = TestLog::with_signer(self.signer.clone(), label);
        for i in 0..self.tree.size() {
            // The leaf hashes actually in the tree (level 0 of the Merkle tree).
            t.tree.push(self.tree.node(0, i).unwrap()).unwrap();
        }
        t
    }

    fn leaf(&self, i: u64) -> Hash {
        leaf_hash(format!("{} {i}", self.label).as_bytes())
    }

    pub fn origin(&self) -> &str {
        self.signer.name()
    }

    pub fn vkey(&self) -> String {
        self.signer.verifier().to_vkey()
    }

    pub fn grow_to(&mut self, size: u64) {
        while self.tree.size() < size {
            let leaf = self.leaf(self.tree.size());
            self.tree.push(leaf).unwrap();
        }
    }

    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint::new(self.origin(), self.tree.size(), self.tree.root())
    }

    pub fn signed(&self) -> String {
        self.checkpoint().sign(&self.signer).unwrap()
    }

    /// The add-checkpoint request from `old` to the current size.
    pub fn request(&self, old: u64) -> AddCheckpoint {
        AddCheckpoint {
            old_size: old,
            proof: consistency_proof(&self.tree, old, self.tree.size()).unwrap(),
            checkpoint: self.signed(),
        }
    }
}

/// Checks a response body for `log`'s current checkpoint: exactly one cosignature line by
/// `witness`, over the checkpoint body, at `timestamp`; and, as a C2SP client does, that the
/// lines appended to the log's signed note verify with the witness key.
pub fn assert_cosigned(witness: &Verifier, log: &TestLog, lines: &str, timestamp: u64) {
    assert_cosigned_all(std::slice::from_ref(witness), log, lines, timestamp);
}

/// As [`assert_cosigned`] for a witness with several keys: one line per key, in key order,
/// each with the payload length of its type (8 + 64 for Ed25519, 8 + 2420 for ML-DSA-44).
pub fn assert_cosigned_all(witnesses: &[Verifier], log: &TestLog, lines: &str, timestamp: u64) {
    assert!(lines.ends_with('\n'), "{lines:?}");
    let all: Vec<&str> = lines.lines().collect();
    assert_eq!(all.len(), witnesses.len(), "{lines:?}");
    let body = log.checkpoint().to_body().unwrap();
    for (line, witness) in all.iter().zip(witnesses) {
        assert!(line.starts_with(&format!("\u{2014} {} ", witness.name())));
        let sig = NoteSignature::parse_line(line).unwrap();
        let want = match witness.kind() {
            KeyKind::MlDsa44 => 8 + 2420,
            _ => 8 + 64,
        };
        assert_eq!(sig.signature.len(), want, "u64 timestamp || signature");
        assert_eq!(sig.key_id, witness.key_id());
        assert_eq!(verify_cosignature(witness, &body, &sig).unwrap(), timestamp);
    }
    let note = format!("{}{lines}", log.signed());
    let opened = open_checkpoint(
        note.as_bytes(),
        log.origin(),
        &[log.signer.verifier()],
        witnesses,
    )
    .unwrap();
    assert_eq!(opened.checkpoint, log.checkpoint());
    assert_eq!(
        opened.cosignatures().map(|(_, t)| t).collect::<Vec<_>>(),
        vec![timestamp; witnesses.len()]
    );
}

/// An in-process witness on 127.0.0.1:0.
pub struct TestWitness {
    pub dir: PathBuf,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    pub vkey: String,
    pub verifier: Verifier,
    /// All the witness keys (one per key type it was created with), in line order.
    pub verifiers: Vec<Verifier>,
    pub admin_token: String,
    pub clock: Arc<ManualClock>,
    pub shutdown: CancellationToken,
    pub handle: JoinHandle<Result<(), accord_witness::Error>>,
}

/// Creates a witness directory in `dir` configured with `logs`, with a few config overrides
/// (`(from, to)` text replacements in the generated file).
pub fn init_witness(
    dir: &Path,
    logs: &[&TestLog],
    overrides: &[(&str, &str)],
) -> (PathBuf, String, String) {
    let (path, vkeys, token) = init_witness_algs(dir, logs, overrides, &[KeyAlg::Ed25519]);
    (path, vkeys[0].clone(), token)
}

/// [`init_witness`] with the given cosigner key types; returns every vkey.
pub fn init_witness_algs(
    dir: &Path,
    logs: &[&TestLog],
    overrides: &[(&str, &str)],
    algs: &[KeyAlg],
) -> (PathBuf, Vec<String>, String) {
    let done = init_with(
        &InitOptions {
            dir: dir.to_owned(),
            name: "witness.test/w1".into(),
            sans: vec![],
            grpc_listen: "127.0.0.1:0".into(),
            http_listen: "127.0.0.1:0".into(),
        },
        algs,
    )
    .unwrap();
    let mut text = std::fs::read_to_string(&done.config_path).unwrap();
    for (from, to) in overrides {
        assert!(text.contains(from), "{from}");
        text = text.replacen(from, to, 1);
    }
    for log in logs {
        text.push_str(&format!(
            "\n[[logs]]\norigin = \"{}\"\nvkeys = [\"{}\"]\n",
            log.origin(),
            log.vkey()
        ));
    }
    std::fs::write(&done.config_path, text).unwrap();
    (done.config_path, done.vkeys, done.admin_token)
}

impl TestWitness {
    pub async fn start(dir: &Path, logs: &[&TestLog]) -> TestWitness {
        TestWitness::start_with(dir, logs, &[]).await
    }

    pub async fn start_with(
        dir: &Path,
        logs: &[&TestLog],
        overrides: &[(&str, &str)],
    ) -> TestWitness {
        TestWitness::start_algs(dir, logs, overrides, &[KeyAlg::Ed25519]).await
    }

    /// A witness with the given cosigner key types.
    pub async fn start_algs(
        dir: &Path,
        logs: &[&TestLog],
        overrides: &[(&str, &str)],
        algs: &[KeyAlg],
    ) -> TestWitness {
        let (config_path, vkeys, admin_token) = init_witness_algs(dir, logs, overrides, algs);
        TestWitness::serve(dir, &config_path, vkeys, admin_token).await
    }

    async fn serve(
        dir: &Path,
        config_path: &Path,
        vkeys: Vec<String>,
        admin_token: String,
    ) -> TestWitness {
        let verifiers: Vec<Verifier> = vkeys
            .iter()
            .map(|v| Verifier::from_vkey(v).unwrap())
            .collect();
        let vkey = vkeys[0].clone();
        let config = Config::load(config_path).unwrap();
        let listeners = Listeners::bind(&config).await.unwrap();
        let (grpc, http) = (
            listeners.grpc_addr().unwrap(),
            listeners.http_addr().unwrap(),
        );
        let clock = Arc::new(ManualClock::new(1_700_000_000));
        let shutdown = CancellationToken::new();
        let handle = tokio::spawn(accord_witness::run_with_clock(
            config,
            listeners,
            shutdown.clone(),
            clock.clone(),
        ));
        TestWitness {
            dir: dir.to_owned(),
            grpc,
            http,
            verifier: verifiers[0].clone(),
            verifiers,
            vkey,
            admin_token,
            clock,
            shutdown,
            handle,
        }
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        self.handle.await.unwrap().unwrap();
    }

    pub async fn channel(&self) -> Channel {
        tls_channel(&self.dir, self.grpc).await
    }

    pub async fn post(&self, body: &str) -> HttpResponse {
        http_post(self.http, "/add-checkpoint", body.as_bytes()).await
    }

    pub async fn post_to(&self, path: &str, body: &str) -> HttpResponse {
        http_post(self.http, path, body.as_bytes()).await
    }

    pub async fn get(&self, path: &str) -> HttpResponse {
        http_get(self.http, path).await
    }
}

/// A gRPC channel over TLS to `addr`, trusting the CA `init` wrote into `dir`.
pub async fn tls_channel(dir: &Path, addr: SocketAddr) -> Channel {
    let ca = std::fs::read_to_string(dir.join("tls/ca.pem")).unwrap();
    Channel::from_shared(format!("https://localhost:{}", addr.port()))
        .unwrap()
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca))
                .domain_name("localhost"),
        )
        .unwrap()
        .connect()
        .await
        .unwrap()
}

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A one-shot HTTP/1.1 POST (Connection: close) over plain TCP.
pub async fn http_post(addr: SocketAddr, path: &str, body: &[u8]) -> HttpResponse {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // A server may answer (e.g. 413) before reading the whole body; ignore write errors then.
    let _ = s.write_all(body).await;
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    parse_response(&raw)
}

/// A one-shot HTTP/1.1 GET (Connection: close) over plain TCP.
pub async fn http_get(addr: SocketAddr, path: &str) -> HttpResponse {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    parse_response(&raw)
}

pub fn parse_response(raw: &[u8]) -> HttpResponse {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    HttpResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}
