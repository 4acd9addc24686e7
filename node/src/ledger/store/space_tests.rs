//! Bytes on disk per 1 KiB record (issue 15, item 5): in the suite over 5,000 records, held
//! to issue 15's bound (at most 1.5 KiB on disk per 1 KiB record) and to compression paying
//! for the index and the tree (less on disk than the signed records' own bytes). The
//! measurement BENCHMARKS.md describes is 50,000 records:
//! `ACCORD_SPACE_RECORDS=50000 cargo test -p accord-node --lib bytes_per_record -- --nocapture`
//! (`ACCORD_TEST_NO_COMPRESSION=1` for the uncompressed baseline, which fails the bound).
use crate::ledger::{AcceptAll, Append, Ledger};
use accord_proto::pb::record::v1 as pb;
use rand::Rng;

/// Prose-like text of `len` bytes: words drawn from a 256-word vocabulary (about 8 bits of
/// entropy per word), so it compresses as text does, not as a repeated string would.
fn prose(rng: &mut impl Rng, len: usize) -> String {
    let vocab: Vec<String> = (0..256u32)
        .map(|i| {
            let n = 3 + (i % 7) as usize;
            (0..n)
                .map(|j| char::from(b'a' + ((i * 7 + j as u32 * 13) % 26) as u8))
                .collect()
        })
        .collect();
    let mut s = String::new();
    while s.len() < len {
        s.push_str(&vocab[rng.gen_range(0..vocab.len())]);
        s.push(' ');
    }
    s.truncate(len);
    s
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn bytes_per_record() {
    let n: u64 = std::env::var("ACCORD_SPACE_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let dir = tempfile::tempdir().unwrap();
    let (clock, _) = crate::clock::Clock::manual(1_700_000_000_000);
    let (ledger, writer) = Ledger::open(dir.path(), AcceptAll, 512, clock).unwrap();
    let signer =
        accord_proto::note::Signer::generate("acme/alice", &mut rand::rngs::OsRng).unwrap();
    let mut rng = rand::thread_rng();
    let mut logical = 0u64;
    let mut pending = Vec::new();
    for i in 0..n {
        let r = pb::Record {
            author: Some(pb::PartyRef {
                organisation: "acme".into(),
                name: "alice".into(),
            }),
            declared_at_unix_ms: 1_700_000_000_000 + i as i64,
            commitment_id: format!("deal-{i}"),
            nonce: rng.r#gen::<[u8; 8]>().to_vec().into(),
            operation: Some(pb::record::Operation::Request(pb::Request {
                candidate: Some(pb::PartyRef {
                    organisation: "globex".into(),
                    name: "bob".into(),
                }),
                terms: Some(pb::Terms {
                    title: format!("deal {i}"),
                    description: prose(&mut rng, 860),
                    ..Default::default()
                }),
                ..Default::default()
            })),
            ..Default::default()
        };
        let signed = accord_proto::signing::sign_record(&signer, &r);
        logical += prost::Message::encoded_len(&signed) as u64;
        let id = accord_proto::signing::record_id(&signed.payload_type, &signed.payload);
        let l = ledger.clone();
        pending.push(tokio::spawn(async move {
            l.append(Append {
                id,
                signed,
                input: (),
                at: None,
            })
            .await
        }));
        if pending.len() >= 4096 {
            for p in pending.drain(..) {
                p.await.unwrap().unwrap();
            }
        }
    }
    for p in pending.drain(..) {
        p.await.unwrap().unwrap();
    }
    let store = ledger.store().clone();
    store.compact().unwrap();
    let on_disk = dir_bytes(dir.path());
    let (signed, per_record) = (logical as f64 / n as f64, on_disk as f64 / n as f64);
    println!(
        "records {n}: signed record {signed:.0} B on average; on disk {per_record:.0} B per \
         record (records, ids, tree, meta; compacted)"
    );
    assert!(
        (1000.0..1100.0).contains(&signed),
        "the records are about 1 KiB: {signed:.0} B"
    );
    assert!(
        per_record <= 1.5 * 1024.0,
        "{per_record:.0} B on disk per ~1 KiB record, issue 15's bound is 1.5 KiB"
    );
    assert!(
        per_record < signed,
        "{per_record:.0} B on disk per record, {signed:.0} B signed: compression does not pay for the index and tree"
    );
    ledger.stop().await;
    drop(ledger);
    drop(store);
    writer.join().unwrap();
}
