//! Helpers shared by the federation scenarios (tests/tests/federation_*.rs): records, submitting
//! and declaring, durability, and acting as a peer node with its own key and TLS identity
//! (to send hand-made envelopes).
#![allow(dead_code)]

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

/// Submits a record signed by `signer`.
pub async fn submit(
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
    assert!(
        resp.outcome.as_ref().is_some_and(|o| o.applied),
        "not applied: {:?}",
        resp.outcome
    );
    (id, resp)
}

/// Declares a record for `party` with its bearer token (signed by the node).
pub async fn declare(node: &TestNode, party: &str, r: Record) -> [u8; 32] {
    let mut req = tonic::Request::new(work::DeclareRequest { record: Some(r) });
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", node.party_token(party).trim())
            .parse()
            .unwrap(),
    );
    let resp = work(node)
        .await
        .declare(req)
        .await
        .expect("declare")
        .into_inner();
    assert!(
        resp.outcome.as_ref().is_some_and(|o| o.applied),
        "not applied: {:?}",
        resp.outcome
    );
    resp.record_id.as_ref().try_into().unwrap()
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
        let c = work(node)
            .await
            .get_commitment(work::GetCommitmentRequest {
                commitment_id: commitment.into(),
            })
            .await
            .ok()?;
        let c = c.into_inner();
        (c.state == state).then_some(c)
    })
    .await
    .unwrap_or_else(|e| panic!("{} never derived {commitment} {state}: {e}", node.name))
}

/// Every ledger entry of a node.
pub async fn ledger(node: &TestNode) -> Vec<work::LedgerEntry> {
    let mut s = work(node)
        .await
        .list_records(work::ListRecordsRequest {
            from_sequence: 0,
            limit: 0,
        })
        .await
        .expect("list")
        .into_inner();
    let mut out = Vec::new();
    while let Some(e) = s.message().await.expect("entry") {
        out.push(e);
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

    /// An envelope from `self.name` to `receiver`, signed by `key`.
    pub fn envelope_by(
        &self,
        key: &Signer,
        sender: &str,
        receiver: &str,
        records: Vec<SignedRecord>,
        sent_at: i64,
    ) -> Signed {
        let env = Envelope {
            sender: sender.into(),
            receiver: receiver.into(),
            first_sequence: 0,
            sent_at_unix_ms: sent_at,
            records,
        };
        let payload = env.encode_to_vec();
        let sig = signing::sign(key, ENVELOPE_PAYLOAD_TYPE, &payload);
        Signed {
            payload: payload.into(),
            payload_type: ENVELOPE_PAYLOAD_TYPE.into(),
            signatures: vec![sig],
        }
    }

    pub fn envelope(&self, receiver: &str, records: Vec<SignedRecord>, sent_at: i64) -> Signed {
        self.envelope_by(&self.key, &self.name, receiver, records, sent_at)
    }

    pub async fn deliver(&mut self, env: Signed) -> Result<Vec<Signed>, tonic::Status> {
        Ok(self
            .client
            .deliver(DeliverRequest {
                envelope: Some(env),
            })
            .await?
            .into_inner()
            .receipts)
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

/// The `accord-reason` of a status.
pub fn reason(s: &tonic::Status) -> String {
    s.metadata()
        .get("accord-reason")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
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
