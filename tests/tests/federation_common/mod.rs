//! Helpers shared by the federation scenarios (tests/tests/federation_*.rs): records, submitting
//! and declaring, durability, and acting as a peer node with its own key and TLS identity
//! (to send hand-made envelopes).
#![allow(dead_code)]

pub mod convergence;

use accord_proto::note::Signer;
use accord_proto::pb::federation::v1::{
    self as fed, DeliverRequest, Envelope, GetReceiptsRequest, Receipt, Signed,
    federation_service_client::FederationServiceClient,
};
use accord_proto::pb::record::v1::{
    self as rec, PartyRef, Record, SignedRecord, record::Operation,
};
use accord_proto::pb::work::v1 as work;
use accord_proto::signing::{self, ENVELOPE_PAYLOAD_TYPE};
use accord_tests::TestNode;
use prost::Message;
use std::time::Duration;
use tonic::transport::Channel;

/// Generous deadline for background progress (delivery, checkpoints).
pub const WAIT: Duration = Duration::from_secs(30);

pub fn party(org: &str, name: &str) -> PartyRef {
    PartyRef {
        organisation: org.into(),
        name: name.into(),
    }
}

/// A record by `org/name` on `commitment`.
pub fn record(
    org: &str,
    name: &str,
    commitment: &str,
    basis: &[[u8; 32]],
    op: Operation,
) -> Record {
    Record {
        author: Some(party(org, name)),
        declared_at_unix_ms: 1,
        commitment_id: commitment.into(),
        basis: basis.iter().map(|b| b.to_vec().into()).collect(),
        nonce: rand::random::<[u8; 8]>().to_vec().into(),
        operation: Some(op),
        ..Default::default()
    }
}

/// `org/name` requests `commitment` from the candidate `to`.
pub fn request(org: &str, name: &str, commitment: &str, to: PartyRef) -> Record {
    record(
        org,
        name,
        commitment,
        &[],
        Operation::Request(rec::Request {
            candidate: Some(to),
            terms: Some(rec::Terms {
                title: format!("{commitment} terms"),
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
}

pub fn defer(org: &str, name: &str, commitment: &str) -> Record {
    record(
        org,
        name,
        commitment,
        &[],
        Operation::Defer(rec::Defer {
            reason: "later".into(),
            ..Default::default()
        }),
    )
}

pub fn resume(org: &str, name: &str, commitment: &str, basis: [u8; 32]) -> Record {
    record(
        org,
        name,
        commitment,
        &[basis],
        Operation::Resume(rec::Resume::default()),
    )
}

pub fn id_of(s: &SignedRecord) -> [u8; 32] {
    signing::record_id(&s.payload_type, &s.payload)
}

pub fn signer(node: &TestNode, party: &str) -> Signer {
    Signer::from_skey(node.party_skey(party).trim()).expect("party skey")
}

pub fn node_signer(node: &TestNode) -> Signer {
    let t = std::fs::read_to_string(node.dir.join("keys/node.skey")).expect("node skey");
    Signer::from_skey(t.trim()).expect("node skey parses")
}

/// A WorkService client with the operator's token (reads everything).
pub async fn work(node: &TestNode) -> accord_tests::WorkClient {
    node.work().await.expect("channel")
}

/// Submits a record signed by `signer` and asserts it applied (at once, or once its home
/// ordered it).
pub async fn submit(
    node: &TestNode,
    signer: &Signer,
    r: &Record,
) -> ([u8; 32], work::SubmitResponse) {
    let (id, resp) = submit_undecided(node, signer, r).await;
    assert_settled_applied(node, &id, resp.outcome.clone()).await;
    (id, resp)
}

/// Submits a record signed by `signer`, whatever its outcome.
pub async fn submit_undecided(
    node: &TestNode,
    signer: &Signer,
    r: &Record,
) -> ([u8; 32], work::SubmitResponse) {
    let signed = signing::sign_record(signer, r);
    let id = id_of(&signed);
    let resp = work(node)
        .await
        .submit(work::SubmitRequest {
            record: Some(signed),
        })
        .await
        .expect("submit")
        .into_inner();
    (id, resp)
}

/// Asserts that the record `id` applied: at once, or — where the record waits for its
/// commitment's home to order it (`awaiting_sequence`, issue 26) — once the home's decision
/// arrived, as `GetRecord` shows it (polled, bounded).
pub async fn assert_settled_applied(
    node: &TestNode,
    id: &[u8; 32],
    outcome: Option<work::Outcome>,
) {
    let outcome = settled(node, id, outcome).await;
    assert!(
        outcome.as_ref().is_some_and(|o| o.applied),
        "not applied: {outcome:?}"
    );
}

/// The outcome of record `id` once settled: `outcome` itself, or — for a record waiting for its
/// commitment's home (`awaiting_sequence`) — the home's decision as `GetRecord` shows it once it
/// arrived (polled, bounded; still `awaiting_sequence` if it never did).
pub async fn settled(
    node: &TestNode,
    id: &[u8; 32],
    mut outcome: Option<work::Outcome>,
) -> Option<work::Outcome> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while outcome
        .as_ref()
        .is_some_and(|o| o.rejection_code == "awaiting_sequence")
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        outcome = work(node)
            .await
            .get_record(node.admin_request(work::GetRecordRequest {
                record_id: id.to_vec().into(),
            }))
            .await
            .expect("get record")
            .into_inner()
            .entry
            .and_then(|e| e.outcome);
    }
    outcome
}

/// Declares a record for `party` with its bearer token (signed by the node).
pub async fn declare(node: &TestNode, party: &str, r: Record) -> [u8; 32] {
    let (id, outcome) = declare_as(node, party, r).await;
    assert_settled_applied(node, &id, outcome).await;
    id
}

/// Declares `r` for `party` at `node`: the record id and the outcome the node answered.
async fn declare_as(node: &TestNode, party: &str, r: Record) -> ([u8; 32], Option<work::Outcome>) {
    let req = accord_tests::with_token(
        work::DeclareRequest { record: Some(r) },
        &node.party_token(party),
    );
    let resp = work(node)
        .await
        .declare(req)
        .await
        .expect("declare")
        .into_inner();
    let id: [u8; 32] = resp.record_id.as_ref().try_into().unwrap();
    (id, resp.outcome)
}

/// Declares `r` for `party` at `node` and waits until it is decided (at the commitment's home
/// too): its rejection code, "" when applied.
pub async fn declared_code(node: &TestNode, party: &str, r: Record) -> String {
    let (id, outcome) = declare_as(node, party, r).await;
    settled(node, &id, outcome)
        .await
        .unwrap_or_default()
        .rejection_code
}

pub async fn durability(node: &TestNode, id: &[u8; 32]) -> work::GetDurabilityResponse {
    work(node)
        .await
        .get_durability(work::GetDurabilityRequest {
            record_id: id.to_vec().into(),
        })
        .await
        .expect("durability")
        .into_inner()
}

/// Waits until `id`'s durability at `peer`, on `node`, is `want`.
pub async fn wait_peer_durability(
    node: &TestNode,
    id: &[u8; 32],
    peer: &str,
    want: work::Durability,
) -> work::PeerDurability {
    accord_tests::eventually(WAIT, || async {
        durability(node, id)
            .await
            .peers
            .into_iter()
            .find(|p| p.peer == peer && p.durability == want as i32)
    })
    .await
    .unwrap_or_else(|e| panic!("{} at {peer} never reached {want:?}: {e}", hex::encode(id)))
}

/// Waits until `node` derives `state` for `commitment`.
pub async fn wait_state(
    node: &TestNode,
    commitment: &str,
    state: &str,
) -> work::GetCommitmentResponse {
    accord_tests::eventually(WAIT, || async {
        // NOT_FOUND until the commitment arrives; any other error fails with its cause.
        let c = accord_tests::not_yet(
            work(node)
                .await
                .get_commitment(work::GetCommitmentRequest {
                    commitment_id: commitment.into(),
                })
                .await,
            &[tonic::Code::NotFound],
        )?;
        Ok::<_, tonic::Status>(c.filter(|c| c.state == state))
    })
    .await
    .unwrap_or_else(|e| panic!("{} never derived {commitment} {state}: {e}", node.name))
}

/// Every refusal `node` keeps (AdminService.ListRefusals, no limit).
pub async fn refusals(node: &TestNode) -> Vec<accord_proto::pb::admin::v1::Refusal> {
    node.admin()
        .await
        .expect("admin client")
        .list_refusals(
            node.admin_request(accord_proto::pb::admin::v1::ListRefusalsRequest {
                limit: 0,
                ..Default::default()
            }),
        )
        .await
        .expect("list refusals")
        .into_inner()
        .refusals
}

/// Every ledger entry of a node.
pub async fn ledger(node: &TestNode) -> Vec<work::LedgerEntry> {
    ledger_of(&mut work(node).await).await
}

/// Every ledger entry, read through `c` (a node reached other than by its `TestNode`, such as
/// an instance on a shared database).
pub async fn ledger_of(c: &mut accord_tests::WorkClient) -> Vec<work::LedgerEntry> {
    let mut s = c
        .list_records(work::ListRecordsRequest {
            from_sequence: 0,
            limit: 0,
        })
        .await
        .expect("list")
        .into_inner();
    let mut out = Vec::new();
    while let Some(e) = s.message().await.expect("entry") {
        out.push(e.into());
    }
    out
}

pub fn decode(e: &work::LedgerEntry) -> Record {
    Record::decode(e.record.as_ref().expect("record").payload.as_ref()).expect("record decodes")
}

/// Acting as peer `sender` (its node key and TLS identity) towards `receiver`.
pub struct AsPeer {
    pub name: String,
    pub key: Signer,
    pub client: FederationServiceClient<Channel>,
}

impl AsPeer {
    pub async fn new(sender: &TestNode, receiver: &TestNode) -> AsPeer {
        let ch = sender.peer_channel(receiver).await.expect("mTLS channel");
        AsPeer {
            name: sender.name.clone(),
            key: node_signer(sender),
            client: FederationServiceClient::new(ch),
        }
    }

    /// An envelope from `self.name` to `receiver`, signed by `key`, with a log proof: acting
    /// as the peer with its node key, the test keeps a log of its own (see [`FixtureLog`]),
    /// appends the records to it and proves them in a checkpoint signed by `key`.
    pub fn envelope_by(
        &self,
        key: &Signer,
        sender: &str,
        receiver: &str,
        records: Vec<SignedRecord>,
        sent_at: i64,
    ) -> Signed {
        let log_proof = FixtureLog::prove(&self.key, key, &records);
        let env = Envelope {
            sender: sender.into(),
            receiver: receiver.into(),
            first_sequence: 0,
            sent_at_unix_ms: sent_at,
            records,
            log_proof: Some(log_proof),
            previous_first_sequence: None,
            applied_at_unix_ms: Vec::new(),
            checkpointed_declarations: false,
        };
        sign_envelope(key, &env)
    }

    /// An envelope without a log proof (records in it are quarantined `unproven` unless
    /// something else decides them first). Unlike [`AsPeer::envelope`], it leaves the
    /// receiver's view of the peer's real log alone, so a test can mix it with real delivery.
    #[allow(dead_code)]
    pub fn envelope_unproven(
        &self,
        receiver: &str,
        records: Vec<SignedRecord>,
        sent_at: i64,
    ) -> Signed {
        let env = Envelope {
            sender: self.name.clone(),
            receiver: receiver.into(),
            first_sequence: 0,
            sent_at_unix_ms: sent_at,
            records,
            log_proof: None,
            previous_first_sequence: None,
            applied_at_unix_ms: Vec::new(),
            checkpointed_declarations: false,
        };
        sign_envelope(&self.key, &env)
    }

    pub fn envelope(&self, receiver: &str, records: Vec<SignedRecord>, sent_at: i64) -> Signed {
        self.envelope_by(&self.key, &self.name, receiver, records, sent_at)
    }

    pub async fn deliver(&mut self, env: Signed) -> Result<Vec<Signed>, tonic::Status> {
        let size = Envelope::decode(env.payload.as_ref())
            .ok()
            .and_then(|e| e.log_proof)
            .and_then(|p| checkpoint_size(&p.checkpoint));
        let receipts = self
            .client
            .deliver(DeliverRequest {
                envelope: Some(env),
            })
            .await?
            .into_inner()
            .receipts;
        if let Some(size) = size {
            FixtureLog::acked(&self.key, size);
        }
        Ok(receipts)
    }

    pub async fn receipts(&mut self, ids: &[[u8; 32]]) -> Vec<Signed> {
        let req = GetReceiptsRequest {
            record_ids: ids.iter().map(|i| i.to_vec().into()).collect(),
        };
        self.client
            .get_receipts(req)
            .await
            .expect("GetReceipts")
            .into_inner()
            .receipts
    }
}

/// Signs an envelope as a node does (DSSE over the encoded `Envelope`).
pub fn sign_envelope(key: &Signer, env: &Envelope) -> Signed {
    let payload = env.encode_to_vec();
    let sig = signing::sign(key, ENVELOPE_PAYLOAD_TYPE, &payload);
    Signed {
        payload: payload.into(),
        payload_type: ENVELOPE_PAYLOAD_TYPE.into(),
        signatures: vec![sig],
    }
}

/// The size line of a signed checkpoint.
pub fn checkpoint_size(note: &str) -> Option<u64> {
    note.lines().nth(1)?.parse().ok()
}

/// The leaf hash of a record as a log records it: `SHA-256(0x00 ‖ encoded SignedRecord)`.
pub fn record_leaf(r: &SignedRecord) -> [u8; 32] {
    accord_proto::merkle::leaf_hash(&r.encode_to_vec())
}

/// Checks, independently of the node, that `d`'s inclusion proof puts `signed`'s leaf under the
/// root of the checkpoint `d` carries; returns that checkpoint.
pub fn assert_included(
    d: &work::GetDurabilityResponse,
    signed: &SignedRecord,
) -> accord_proto::checkpoint::Checkpoint {
    let body = &d.checkpoint[..d.checkpoint.find("\n\n").expect("signed note") + 1];
    let cp = accord_proto::checkpoint::Checkpoint::parse(body).unwrap();
    let proof: Vec<[u8; 32]> = d
        .inclusion_proof
        .iter()
        .map(|h| h.as_ref().try_into().unwrap())
        .collect();
    accord_proto::merkle::verify_inclusion(
        &record_leaf(signed),
        d.sequence,
        cp.size,
        &proof,
        &cp.root,
    )
    .expect("the record is in the checkpoint's tree");
    cp
}

/// A log kept by the test while it speaks for a peer with the peer's node key: every record it
/// sends is appended once, and each envelope carries a checkpoint of the whole log (signed by
/// the envelope's key, named after the log origin) with inclusion proofs, and a consistency
/// proof from the size the receiver last accepted. One log per peer node key (shared by every
/// `AsPeer` of that node), so the receiver sees one consistent log.
#[derive(Default)]
pub struct FixtureLog {
    tree: accord_proto::merkle::MemoryTree,
    index: std::collections::HashMap<[u8; 32], u64>,
    acked: u64,
}

static FIXTURE_LOGS: std::sync::Mutex<Option<std::collections::HashMap<String, FixtureLog>>> =
    std::sync::Mutex::new(None);

impl FixtureLog {
    fn with<T>(node_key: &Signer, f: impl FnOnce(&mut FixtureLog) -> T) -> T {
        let mut g = FIXTURE_LOGS.lock().unwrap();
        let logs = g.get_or_insert_with(Default::default);
        f(logs.entry(node_key.verifier().to_vkey()).or_default())
    }

    fn acked(node_key: &Signer, size: u64) {
        Self::with(node_key, |l| l.acked = l.acked.max(size));
    }

    /// Appends `records` (once each) and proves them under a checkpoint signed by `key`.
    pub fn prove(node_key: &Signer, key: &Signer, records: &[SignedRecord]) -> fed::LogProof {
        use accord_proto::merkle;
        Self::with(node_key, |l| {
            let mut at = Vec::new();
            for r in records {
                let leaf = record_leaf(r);
                let i = match l.index.get(&leaf) {
                    Some(i) => *i,
                    None => {
                        let i = l.tree.size();
                        l.tree.push(leaf).unwrap();
                        l.index.insert(leaf, i);
                        i
                    }
                };
                at.push(i);
            }
            let size = l.tree.size();
            let note = accord_proto::checkpoint::Checkpoint::new(key.name(), size, l.tree.root())
                .sign(key)
                .unwrap();
            let hashes = |v: Vec<[u8; 32]>| v.into_iter().map(|h| h.to_vec().into()).collect();
            let (from, consistency) = if l.acked > 0 && l.acked < size {
                (
                    l.acked,
                    hashes(merkle::consistency_proof(&l.tree, l.acked, size).unwrap()),
                )
            } else {
                (l.acked.min(size), Vec::new())
            };
            fed::LogProof {
                checkpoint: note,
                inclusions: at
                    .into_iter()
                    .map(|i| fed::RecordInclusion {
                        leaf_index: i,
                        inclusion_proof: hashes(merkle::inclusion_proof(&l.tree, i, size).unwrap()),
                    })
                    .collect(),
                consistency_from_size: from,
                consistency_proof: consistency,
            }
        })
    }
}

pub fn receipt(s: &Signed) -> Receipt {
    Receipt::decode(s.payload.as_ref()).expect("receipt decodes")
}

/// (outcome, code) of an admission receipt, as the seed writes it.
pub fn outcome(s: &Signed) -> String {
    let r = receipt(s);
    assert_eq!(r.kind, fed::ReceiptKind::Admission as i32);
    match rec::AdmissionOutcome::try_from(r.outcome).unwrap() {
        rec::AdmissionOutcome::Admitted => "admitted".into(),
        rec::AdmissionOutcome::Quarantined => format!("[\"quarantined\", \"{}\"]", r.code),
        rec::AdmissionOutcome::Rejected => format!("[\"rejected\", \"{}\"]", r.code),
        rec::AdmissionOutcome::Unspecified => "unspecified".into(),
    }
}

// The one `accord-reason` extractor, for the files that import everything from here.
#[allow(unused_imports)]
pub use accord_tests::reason;

/// acme (with `acme_parties`) and globex (with `globex_parties`), both on fast federation
/// timings, not yet peered. Returns (acme, globex).
pub async fn two_orgs(acme_parties: &[&str], globex_parties: &[&str]) -> (TestNode, TestNode) {
    let mut a = TestNode::builder("acme").config(fast);
    for p in acme_parties {
        a = a.party(p);
    }
    let mut b = TestNode::builder("globex").config(fast);
    for p in globex_parties {
        b = b.party(p);
    }
    (a.start().await.unwrap(), b.start().await.unwrap())
}

/// [`two_orgs`], peered both ways.
pub async fn federated(acme_parties: &[&str], globex_parties: &[&str]) -> (TestNode, TestNode) {
    let (a, b) = two_orgs(acme_parties, globex_parties).await;
    accord_tests::federate(&a, &b).await.unwrap();
    (a, b)
}

/// [`federated`] acme (with `acme_parties`, alice first) and globex (bob); alice requested
/// `c` from bob and bob promised: both nodes show `promised`.
pub async fn promised_between(acme_parties: &[&str], c: &str) -> (TestNode, TestNode) {
    let (a, b) = federated(acme_parties, &["bob"]).await;
    declare(
        &a,
        "alice",
        request("acme", "alice", c, party("globex", "bob")),
    )
    .await;
    wait_state(&b, c, "requested").await;
    declare(
        &b,
        "bob",
        record("globex", "bob", c, &[], Operation::Promise(rec::Promise {})),
    )
    .await;
    wait_state(&a, c, "promised").await;
    wait_state(&b, c, "promised").await;
    (a, b)
}

/// The usual pair: globex (party bob, fast federation timings) receiving, acme (party alice)
/// added to it as a peer. Returns (receiver, sender).
pub async fn receiver_with_sender() -> (TestNode, TestNode) {
    let b = TestNode::builder("globex")
        .party("bob")
        .config(fast)
        .start()
        .await
        .unwrap();
    let a = TestNode::builder("acme")
        .party("alice")
        .start()
        .await
        .unwrap();
    b.add_peer(&a).await.unwrap();
    (b, a)
}

/// [`receiver_with_sender`], with the receiver running in this process on `clock` (a driven
/// clock: key validity windows and quarantine timeouts are crossed by advancing it).
pub async fn receiver_on_clock_with_sender(
    clock: accord_node::clock::Clock,
) -> (TestNode, TestNode) {
    let b = TestNode::builder("globex")
        .party("bob")
        .config(fast)
        .start_with_clock(clock)
        .await
        .unwrap();
    let a = TestNode::builder("acme")
        .party("alice")
        .start()
        .await
        .unwrap();
    b.add_peer(&a).await.unwrap();
    (b, a)
}

/// Milliseconds since the Unix epoch on the host's clock (where a driven clock starts).
pub fn wall_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The config edit every federation test node gets.
pub fn fast(text: &mut String, _: &std::path::Path) {
    text.push_str(accord_tests::FAST_FEDERATION);
}

/// `accordctl admin` arguments for a node.
pub fn admin_args(node: &TestNode) -> Vec<String> {
    vec![
        "admin".into(),
        "--node".into(),
        format!("https://{}", node.addr),
        "--ca".into(),
        node.dir.join("tls/ca.pem").display().to_string(),
        "--token-file".into(),
        node.dir.join("admin.token").display().to_string(),
    ]
}

pub fn accordctl(args: &[String]) -> (i32, String, String) {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    accord_tests::run_bin("accordctl", &a, None).expect("run accordctl")
}
