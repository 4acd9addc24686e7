//! Pipelined delivery (issue 14) between two real nodes — RocksDB ledgers, kernels, decision
//! stores, the sender task and admission — joined by an in-memory [`PeerTransport`] that calls
//! the other node's services directly with the caller's real TLS client chain (the same calls
//! `accord-sim` makes), and that can lose an answer after the receiver decided it.

use super::FedContext;
use super::admission::tests::{declarations_about, request};
use super::codes::Decision;
use super::transport::PeerTransport;
use crate::clock::Clock;
use crate::node::{Node, Transports};
use accord_daemon::layout::node as files;
use accord_proto::note::Signer;
use accord_proto::pb::federation::v1::{
    DeliverRequest, DeliverResponse, Envelope, GetReceiptsRequest, GetReceiptsResponse, Signed,
};
use accord_proto::pb::log::v1::log_service_server::LogService;
use accord_proto::pb::log::v1::{GetConsistencyProofRequest, GetConsistencyProofResponse};
use accord_proto::signing::{self, RecordId};
use futures::future::BoxFuture;
use prost::Message;
use rustls::pki_types::CertificateDer;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tonic::Status;

/// One `Deliver` call as the transport saw it.
#[derive(Debug, Clone)]
struct Call {
    first: u64,
    previous: Option<u64>,
    ids: Vec<RecordId>,
    /// The receiver's answer (even when the transport then lost it).
    answer: Option<DeliverResponse>,
}

/// Calls the other node (set once both are open) as the node with TLS `chain`.
#[derive(Debug)]
struct Pipe {
    to: OnceLock<Arc<Node>>,
    chain: Vec<CertificateDer<'static>>,
    /// The first `Deliver` call whose envelope starts with this record has its answer lost, once
    /// the call the sender made after it (the one naming it as `previous`) was answered. Named
    /// by record, not by call index: with several envelopes in flight their calls may reach the
    /// transport in another order than the sender made them.
    lose: Mutex<Option<RecordId>>,
    calls: Mutex<Vec<Call>>,
    /// The `previous_first_sequence` of every answered call.
    answered: tokio::sync::watch::Sender<HashSet<Option<u64>>>,
    in_flight: Mutex<(usize, usize)>,
}

impl Pipe {
    fn new(chain: Vec<CertificateDer<'static>>) -> Arc<Pipe> {
        Arc::new(Pipe {
            to: OnceLock::new(),
            chain,
            lose: Mutex::new(None),
            calls: Mutex::new(Vec::new()),
            answered: tokio::sync::watch::Sender::new(HashSet::new()),
            in_flight: Mutex::new((0, 0)),
        })
    }

    fn node(&self) -> Result<Arc<Node>, Status> {
        self.to
            .get()
            .cloned()
            .ok_or_else(|| Status::unavailable("not connected"))
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn most_in_flight(&self) -> usize {
        self.in_flight.lock().unwrap().1
    }
}

impl PeerTransport for Pipe {
    fn deliver(
        &self,
        _peer: &super::peers::Peer,
        req: DeliverRequest,
    ) -> BoxFuture<'_, Result<DeliverResponse, Status>> {
        Box::pin(async move {
            let node = self.node()?;
            let signed = req
                .envelope
                .ok_or_else(|| Status::invalid_argument("none"))?;
            let env = Envelope::decode(signed.payload.as_ref()).unwrap();
            let ids: Vec<RecordId> = env
                .records
                .iter()
                .map(|r| signing::record_id(&r.payload_type, &r.payload))
                .collect();
            let lose = {
                let mut lose = self.lose.lock().unwrap();
                let hit = lose.is_some() && ids.first() == lose.as_ref();
                if hit {
                    *lose = None;
                }
                hit
            };
            let n = {
                let mut calls = self.calls.lock().unwrap();
                calls.push(Call {
                    first: env.first_sequence,
                    previous: env.previous_first_sequence,
                    ids,
                    answer: None,
                });
                calls.len() - 1
            };
            {
                let mut f = self.in_flight.lock().unwrap();
                f.0 += 1;
                f.1 = f.1.max(f.0);
            }
            let chain = Some(Arc::new(self.chain.clone()));
            let r = super::admission::deliver(&node.fed, signed, chain).await;
            self.in_flight.lock().unwrap().0 -= 1;
            let resp = r.map_err(Status::from)?;
            self.calls.lock().unwrap()[n].answer = Some(resp.clone());
            if lose {
                // The receiver decided it; its answer is lost once the next envelope's is back
                // (bounded wait: the test's assertions say whether that happened).
                let mut rx = self.answered.subscribe();
                let first = Some(env.first_sequence);
                let next = rx.wait_for(|a| a.contains(&first));
                let _ = tokio::time::timeout(Duration::from_secs(30), next).await;
                return Err(Status::unavailable("answer lost"));
            }
            self.answered.send_modify(|a| {
                a.insert(env.previous_first_sequence);
            });
            Ok(resp)
        })
    }

    fn get_receipts(
        &self,
        _peer: &super::peers::Peer,
        req: GetReceiptsRequest,
    ) -> BoxFuture<'_, Result<GetReceiptsResponse, Status>> {
        Box::pin(async move {
            let node = self.node()?;
            let ids = req
                .record_ids
                .iter()
                .map(|b| RecordId::try_from(b.as_ref()).map_err(|_| Status::invalid_argument("id")))
                .collect::<Result<Vec<_>, _>>()?;
            let chain = Some(Arc::new(self.chain.clone()));
            let receipts = super::inbox::get_receipts(&node.fed, ids, chain).await?;
            Ok(GetReceiptsResponse { receipts })
        })
    }

    fn consistency_proof(
        &self,
        _peer: &super::peers::Peer,
        req: GetConsistencyProofRequest,
    ) -> BoxFuture<'_, Result<GetConsistencyProofResponse, Status>> {
        Box::pin(async move {
            let api = crate::services::log::api(self.node()?);
            Ok(api
                .get_consistency_proof(tonic::Request::new(req))
                .await?
                .into_inner())
        })
    }
}

/// A node of the pair.
struct Org {
    node: Arc<Node>,
    _writer: std::thread::JoinHandle<()>,
    party: Signer,
}

/// `acme` (party alice) sending to `globex` (party bob): envelopes of `batch` records, up to
/// `window` in flight (`to_globex.lose` names an envelope whose answer is lost).
struct Pair {
    acme: Org,
    globex: Org,
    to_globex: Arc<Pipe>,
    _tmp: tempfile::TempDir,
}

async fn pair(batch: usize, window: usize) -> Pair {
    let tmp = tempfile::tempdir().unwrap();
    let mut made = Vec::new();
    for (name, party) in [("acme", "alice"), ("globex", "bob")] {
        let dir = tmp.path().join(name);
        let init = crate::init::init(&crate::init::InitOptions {
            dir: dir.clone(),
            name: name.into(),
            parties: vec![party.into()],
            listen: "127.0.0.1:0".into(),
            sans: vec![],
        })
        .unwrap();
        let mut config = crate::config::Config::load(&init.config).unwrap();
        config.federation.batch_size = batch;
        config.federation.max_in_flight = window;
        config.federation.retry_base_ms = 10;
        config.federation.retry_max_ms = 50;
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let node_key = Signer::from_skey(read(files::NODE_SKEY).trim()).unwrap();
        let party = Signer::from_skey(read(&files::party_skey(party)).trim()).unwrap();
        let chain = crate::tls::load_certs(&config.tls.cert).unwrap();
        made.push((config, node_key, party, chain, dir.join(files::TLS_CA)));
    }
    let peer_of = |i: usize, name: &str| crate::config::PeerConfig {
        name: name.into(),
        endpoint: format!("https://{name}.test:443"),
        vkeys: vec![
            made[i].1.verifier().to_vkey(),
            made[i].2.verifier().to_vkey(),
        ],
        ca: made[i].4.clone(),
        pin_sha256: String::new(),
    };
    let (p_acme, p_globex) = (peer_of(0, "acme"), peer_of(1, "globex"));
    made[0].0.peers = vec![p_globex];
    made[1].0.peers = vec![p_acme];
    let to_globex = Pipe::new(made[0].3.clone());
    let to_acme = Pipe::new(made[1].3.clone());
    let mut orgs = Vec::new();
    for ((config, _, party, _, _), pipe) in made.into_iter().zip([&to_globex, &to_acme]) {
        config.validate().unwrap();
        let transports = Transports {
            peers: Some(pipe.clone() as Arc<dyn PeerTransport>),
            witnesses: Some(Vec::new()),
            ..Default::default()
        };
        let opened = crate::node::open_with(config, Clock::system(), transports)
            .await
            .unwrap();
        orgs.push(Org {
            node: opened.node,
            _writer: opened.writer,
            party,
        });
    }
    let globex = orgs.pop().unwrap();
    let acme = orgs.pop().unwrap();
    to_globex.to.set(globex.node.clone()).unwrap();
    to_acme.to.set(acme.node.clone()).unwrap();
    Pair {
        acme,
        globex,
        to_globex,
        _tmp: tmp,
    }
}

/// Records `c-0 .. c-{n-1}` (a request from acme/alice to globex/bob each), recorded at acme
/// and routed to globex's queue; their ids in acme's ledger order.
async fn submit(org: &Org, n: usize) -> Vec<RecordId> {
    let now = org.node.fed.clock.now_ms();
    let mut ids = Vec::new();
    for i in 0..n {
        let commitment = format!("c-{i}");
        let record = request(&commitment, now);
        let signed = signing::sign_record(&org.party, &record);
        let mut p = crate::services::submit::Pending::new(&org.node, signed).unwrap();
        p.check().verify_one().unwrap();
        let (id, record, signed) = p.finish(&org.node).unwrap();
        crate::services::submit::append(&org.node, signed, record, id)
            .await
            .unwrap();
        ids.push(id);
    }
    super::route::route_all(&org.node.fed).await.unwrap();
    ids
}

/// Ids of the ledger's records, in ledger order.
fn ledger_ids(fed: &FedContext) -> Vec<RecordId> {
    fed.ledger
        .store()
        .range(0, 100_000)
        .unwrap()
        .into_iter()
        .filter_map(|e| e.record)
        .map(|s| signing::record_id(&s.payload_type, &s.payload))
        .collect()
}

/// Runs acme's sender until its queue to globex is empty (deadline 60 s).
async fn deliver_all(p: &Pair) {
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(super::sender::run_peer(
        p.acme.node.fed.clone(),
        "globex".into(),
        cancel.clone(),
    ));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while p.acme.node.federation.outbox.depth("globex") > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "queue not drained: {} left; calls {:?}",
            p.acme.node.federation.outbox.depth("globex"),
            p.to_globex.calls().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cancel.cancel();
    task.await.unwrap();
}

/// The admission receipts of an answer (the envelope receipt is first), by record id.
fn by_record(resp: &DeliverResponse) -> Vec<(Vec<u8>, Signed)> {
    resp.receipts[1..]
        .iter()
        .map(|s| {
            let r = accord_proto::pb::federation::v1::Receipt::decode(s.payload.as_ref()).unwrap();
            (r.record_id.to_vec(), s.clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_envelopes_deliver_every_record_once_in_order() {
    let p = pair(4, 3).await;
    let ids = submit(&p.acme, 24).await;
    deliver_all(&p).await;

    let calls = p.to_globex.calls();
    // The first envelope goes alone (the peer has not said it keeps order yet), then up to
    // three at once, each naming the one sent before it.
    assert_eq!(calls[0].previous, None);
    assert!(
        p.to_globex.most_in_flight() >= 2,
        "never more than one envelope in flight"
    );
    // Each names the envelope whose records come just before its own (calls are listed as they
    // reached the transport, which with several in flight need not be the order they were made).
    let at = |id: &RecordId| ids.iter().position(|i| i == id).unwrap();
    for c in &calls {
        if let Some(prev) = c.previous {
            let before = calls
                .iter()
                .find(|b| b.first == prev)
                .unwrap_or_else(|| panic!("previous {prev} was never sent: {calls:?}"));
            assert_eq!(
                at(before.ids.last().unwrap()) + 1,
                at(&c.ids[0]),
                "{calls:?}"
            );
        }
    }
    // Every record reached globex once, in acme's order, and was admitted once.
    let g = &p.globex.node.fed;
    let at_globex: Vec<RecordId> = ledger_ids(g)
        .into_iter()
        .filter(|id| ids.contains(id))
        .collect();
    assert_eq!(at_globex, ids);
    for id in &ids {
        let e = g.federation.decisions.entry(id).unwrap().unwrap();
        assert_eq!(e.decision, Decision::Admitted);
        assert_eq!(declarations_about(g, id).len(), 1);
        // acme's view agrees: the admission receipt is stored.
        let st = p.acme.node.federation.receipts.get(id, "globex").unwrap();
        assert_eq!(
            st.map(|s| s.durability),
            Some(accord_proto::pb::work::v1::Durability::Admitted as i32)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_before_a_lost_one_is_not_acknowledged_and_the_resend_gets_the_same_receipts() {
    // The second envelope (records 4..8) is decided at globex but its answer is lost after the
    // third (records 8..12, sent after it) was answered: acme must not acknowledge the third's
    // answer before the second's, so it starts again from the second's records.
    let p = pair(4, 3).await;
    let ids = submit(&p.acme, 16).await;
    *p.to_globex.lose.lock().unwrap() = Some(ids[4]);
    deliver_all(&p).await;

    let calls = p.to_globex.calls();
    assert!(calls.len() >= 4, "{calls:?}");
    // Calls are numbered as they reached the transport; find them by content instead.
    let lost = calls
        .iter()
        .position(|c| c.ids.first() == Some(&ids[4]))
        .expect("the second envelope was sent");
    assert_eq!(calls[lost].ids, ids[4..8]);
    let next = calls
        .iter()
        .position(|c| c.previous == Some(calls[lost].first))
        .expect("an envelope was sent after the second");
    assert_eq!(calls[next].ids, ids[8..12]);
    let answered = calls[next]
        .answer
        .clone()
        .expect("the third envelope was answered");
    // After the loss, delivery starts again at the head: the second envelope's records, then
    // the third's again.
    let resent: Vec<&Call> = calls
        .iter()
        .enumerate()
        .filter(|(i, c)| *i > lost && *i != next && c.ids.iter().any(|id| ids[4..12].contains(id)))
        .map(|(_, c)| c)
        .collect();
    // (An envelope already in flight behind the lost one may still be answered first; what
    // matters is that delivery goes back to the lost envelope's records.)
    assert!(
        resent
            .iter()
            .any(|c| c.first == calls[lost].first && c.ids[0] == ids[4]),
        "{calls:?}"
    );
    let again: Vec<(Vec<u8>, Signed)> = resent
        .iter()
        .filter_map(|c| c.answer.as_ref())
        .flat_map(by_record)
        .collect();
    // The re-sent records of the answered-but-unacknowledged envelope get the same receipts.
    for (id, receipt) in by_record(&answered) {
        let same = again.iter().find(|(i, _)| *i == id).expect("re-sent");
        assert_eq!(same.1, receipt, "a re-sent record got another receipt");
    }
    // Nothing was admitted twice; globex holds every record once, in acme's order.
    let g = &p.globex.node.fed;
    let at_globex: Vec<RecordId> = ledger_ids(g)
        .into_iter()
        .filter(|id| ids.contains(id))
        .collect();
    assert_eq!(at_globex, ids);
    for id in &ids {
        assert_eq!(declarations_about(g, id).len(), 1);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_receiver_decides_a_pipelined_envelope_only_after_the_one_before() {
    let p = pair(4, 3).await;
    let ids = submit(&p.acme, 8).await;
    let a = &p.acme.node.fed;
    let peer = a.federation.peers.get("globex").unwrap();
    let first = a.federation.outbox.peek_from("globex", 0, 4).unwrap();
    let from = first.last().unwrap().0 + 1;
    let second = a.federation.outbox.peek_from("globex", from, 4).unwrap();
    let e1 = super::delivery::prepare(a, &peer, first, 0, None)
        .await
        .ok()
        .unwrap();
    let e1_first = e1.first_sequence();
    let e2 = super::delivery::prepare(a, &peer, second, e1.checkpoint_size, Some(e1_first))
        .await
        .ok()
        .unwrap();
    // The second envelope arrives first; it waits for the first.
    let g = p.globex.node.clone();
    let t2 = {
        let transport = p.to_globex.clone();
        let peer = peer.clone();
        tokio::spawn(async move {
            let req = e2.request();
            transport.deliver(&peer, req).await
        })
    };
    tokio::task::yield_now().await;
    let r1 = p.to_globex.deliver(&peer, e1.request()).await.unwrap();
    let r2 = t2.await.unwrap().unwrap();
    assert!(r1.sequenced && r2.sequenced);
    let at_globex: Vec<RecordId> = ledger_ids(&g.fed)
        .into_iter()
        .filter(|id| ids.contains(id))
        .collect();
    assert_eq!(at_globex, ids, "the second envelope was decided first");
}

/// The config `accord-node init` writes for acme (one party, alice), and the directory holding it.
fn made_config() -> (tempfile::TempDir, crate::config::Config) {
    let tmp = tempfile::tempdir().unwrap();
    let init = crate::init::init(&crate::init::InitOptions {
        dir: tmp.path().join("acme"),
        name: "acme".into(),
        parties: vec!["alice".into()],
        listen: "127.0.0.1:0".into(),
        sans: vec![],
    })
    .unwrap();
    let config = crate::config::Config::load(&init.config).unwrap();
    (tmp, config)
}

#[test]
fn max_in_flight_must_be_at_least_one() {
    let (_tmp, mut config) = made_config();
    assert_eq!(config.federation.max_in_flight, 4);
    config.validate().unwrap();
    config.federation.max_in_flight = 0;
    let e = config.validate().unwrap_err().to_string();
    assert!(e.contains("federation.max_in_flight"), "{e}");
}

#[test]
fn clock_skew_ms_defaults_to_two_seconds_and_is_bounded() {
    let (_tmp, mut config) = made_config();
    // README, "Delivery": default 2000, at least 1, at most 600000.
    assert_eq!(config.federation.clock_skew_ms, 2_000);
    for (v, ok) in [(0, false), (1, true), (600_000, true), (600_001, false)] {
        config.federation.clock_skew_ms = v;
        match config.validate() {
            Ok(()) => assert!(ok, "{v} accepted"),
            Err(e) => {
                assert!(!ok, "{v} refused: {e}");
                assert!(e.to_string().contains("federation.clock_skew_ms"), "{e}");
            }
        }
    }
}

#[test]
fn the_nodes_own_party_names_are_reserved() {
    let (_tmp, good) = made_config();
    good.validate().unwrap();
    for name in ["work-service", "envelope-service", "operator"] {
        let mut config = good.clone();
        config.parties[0].name = name.into();
        let e = config.validate().unwrap_err().to_string();
        assert!(
            e.contains("parties[0].name") && e.contains("reserved"),
            "{name}: {e}"
        );
    }
}
