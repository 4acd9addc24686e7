//! Issue 31, item 2: a standby instance serves every read from the database while the writer
//! writes, and refuses every write naming the writer.
//!
//! acme runs as a writer and a standby on one PostgreSQL. What the standby answers is compared
//! with what the writer (another process, which applies the records itself) answers for the
//! same question, and the log's answers are checked by an independent computation (the
//! record's leaf under the checkpoint's root). The standby must follow: a commitment it has
//! already read (and cached) changes at the writer, and the standby's read and its open watch
//! show the change.

use crate::federation_common::*;
use crate::runs_common;
use accord_proto::pb::log::v1 as log;
use accord_proto::pb::record::v1::{Promise, record::Operation};
use accord_proto::pb::run::v1::{self as run_pb, run_service_client::RunServiceClient};
use accord_proto::pb::work::v1::{self as work, Durability};
use accord_proto::signing;
use accord_tests::TestNode;
use accord_tests::pg::{Instance, TestPostgres};

/// The writer's lease, ms.
const LEASE_MS: u64 = 1_000;

/// A standby's read of `c`, once it serves reads (UNAVAILABLE until its read-only node is
/// open) and `ok` holds of the answer.
async fn standby_commitment(
    c: &mut accord_tests::WorkClient,
    id: &str,
    ok: impl Fn(&work::GetCommitmentResponse) -> bool,
) -> work::GetCommitmentResponse {
    let ok = &ok;
    accord_tests::eventually(WAIT, || {
        let mut c = c.clone();
        let id = id.to_string();
        async move {
            let r = c
                .get_commitment(work::GetCommitmentRequest { commitment_id: id })
                .await;
            Ok::<_, tonic::Status>(
                accord_tests::not_yet(r, &[tonic::Code::Unavailable, tonic::Code::NotFound])?
                    .filter(|r| ok(r)),
            )
        }
    })
    .await
    .unwrap_or_else(|e| panic!("the standby never answered {id} as expected: {e}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_standby_serves_reads_that_follow_the_writer() {
    let pg = TestPostgres::start().unwrap();
    let acme = crate::storage_common::on_postgres(&pg, LEASE_MS, &["alice", "bob"]).await;
    let (alice, bob) = (signer(&acme, "alice"), signer(&acme, "bob"));
    let (asked, _) = submit(
        &acme,
        &alice,
        &request("acme", "alice", "c-1", party("acme", "bob")),
    )
    .await;

    let standby = Instance::start(&acme).unwrap();
    let ch = standby.channel().await.unwrap();
    let token = acme.admin_token();
    let mut reads = accord_tests::work_client(ch.clone(), &token);

    // The standby's view of c-1 is the writer's (the writer applied the record; the standby
    // only read the database).
    let seen = standby_commitment(&mut reads, "c-1", |_| true).await;
    let at_writer = work(&acme)
        .await
        .get_commitment(work::GetCommitmentRequest {
            commitment_id: "c-1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(seen.state, "requested");
    assert_eq!(seen, at_writer, "the standby answers what the writer does");

    // A watch opened at the standby; then bob promises c-1 at the writer. The standby's read of
    // c-1 (cached by the read above) and its watch both show the change.
    let mut watch = reads
        .watch_commitments(work::WatchCommitmentsRequest::default())
        .await
        .expect("the standby serves WatchCommitments")
        .into_inner();
    let promise = record(
        "acme",
        "bob",
        "c-1",
        &[asked],
        Operation::Promise(Promise {}),
    );
    submit(&acme, &bob, &promise).await;
    let seen = standby_commitment(&mut reads, "c-1", |c| c.state == "promised").await;
    assert_eq!(seen.history.len(), 2, "request and promise: {seen:?}");
    let changed = tokio::time::timeout(WAIT, async {
        loop {
            let m = watch
                .message()
                .await
                .expect("the watch stays open")
                .expect("the watch stays open");
            if m.commitment_id == "c-1" && m.state == "promised" {
                return m;
            }
        }
    })
    .await
    .expect("the standby's watch carried bob's promise");
    assert_eq!(changed.change, "changed");

    // A record the standby reads by id, with its durability: once the writer's checkpoint
    // includes it, the standby's inclusion proof puts the record's leaf under that checkpoint's
    // root (verified here, not by the node).
    let signed = signing::sign_record(
        &alice,
        &request("acme", "alice", "c-2", party("acme", "bob")),
    );
    work(&acme)
        .await
        .submit(work::SubmitRequest {
            record: Some(signed.clone()),
        })
        .await
        .unwrap();
    let id = id_of(&signed);
    let d = accord_tests::eventually(WAIT, || {
        let mut c = reads.clone();
        async move {
            let r = c
                .get_durability(work::GetDurabilityRequest {
                    record_id: id.to_vec().into(),
                })
                .await;
            Ok::<_, tonic::Status>(
                accord_tests::not_yet(r, &[tonic::Code::NotFound])?
                    .filter(|d| d.local == Durability::Included as i32),
            )
        }
    })
    .await
    .expect("the standby reports the record included");
    let cp = assert_included(&d, &signed);
    let mut log_reads =
        accord_proto::pb::log::v1::log_service_client::LogServiceClient::new(ch.clone());
    let latest = log_reads
        .get_checkpoint(log::GetCheckpointRequest::default())
        .await
        .expect("the standby serves GetCheckpoint")
        .into_inner()
        .latest
        .expect("a checkpoint");
    assert!(latest.size >= cp.size, "{} < {}", latest.size, cp.size);
    let listed = reads
        .list_commitments(work::ListCommitmentsRequest::default())
        .await
        .expect("the standby serves ListCommitments")
        .into_inner();
    let ids: Vec<&str> = listed
        .commitments
        .iter()
        .map(|c| c.commitment_id.as_str())
        .collect();
    assert_eq!(ids, ["c-1", "c-2"]);

    // Runs (seed 002): alice's run, read at the standby with her token, follows the writer's
    // through the standby's run cache.
    let alice_token = acme.party_token("alice");
    let mut runs_at_writer = runs_common::client(&acme, &alice_token).await;
    assert!(runs_common::applied(
        &runs_common::start(&mut runs_at_writer, "r1", "", "").await
    ));
    let mut runs_at_standby =
        RunServiceClient::with_interceptor(ch.clone(), accord_tests::Bearer::new(&alice_token));
    let run = |state: &'static str| {
        let c = runs_at_standby.clone();
        async move {
            accord_tests::eventually(WAIT, || {
                let mut c = c.clone();
                async move {
                    let r = c.get_run(run_pb::GetRunRequest { run: "r1".into() }).await;
                    Ok::<_, tonic::Status>(
                        accord_tests::not_yet(r, &[tonic::Code::NotFound])?
                            .filter(|r| r.state == runs_common::num(state)),
                    )
                }
            })
            .await
            .unwrap_or_else(|e| panic!("the standby never read r1 {state}: {e}"))
        }
    };
    let pending = run("pending").await;
    assert_eq!(pending, runs_common::get(&mut runs_at_writer, "r1").await);
    assert!(runs_common::applied(
        &runs_common::go(&mut runs_at_writer, "r1", "running", None).await
    ));
    let running = run("running").await;
    assert_eq!(running, runs_common::get(&mut runs_at_writer, "r1").await);
    let e = runs_at_standby
        .transition(runs_common::go_req("r1", "completed", None))
        .await
        .unwrap_err();
    assert_eq!(accord_tests::reason(&e), "not_writer", "{e:?}");

    // A peer added at the writer after the standby opened: the standby lists it (and so
    // trusts its TLS identity) within about a second.
    let globex = TestNode::builder("globex")
        .party("carol")
        .start()
        .await
        .unwrap();
    acme.add_peer(&globex).await.unwrap();
    let admin =
        accord_proto::pb::admin::v1::admin_service_client::AdminServiceClient::new(ch.clone());
    accord_tests::eventually(WAIT, || {
        let req = acme.admin_request(accord_proto::pb::admin::v1::ListPeersRequest {});
        let mut admin = admin.clone();
        async move {
            let peers = admin.list_peers(req).await?.into_inner().peers;
            Ok::<_, tonic::Status>(peers.iter().any(|p| p.name == "globex").then_some(()))
        }
    })
    .await
    .expect("the standby lists the peer added at the writer");

    // Writes are refused before any handler runs, naming the writer; nothing is written.
    let before = ledger(&acme).await.len();
    let late = signing::sign_record(
        &alice,
        &request("acme", "alice", "c-3", party("acme", "bob")),
    );
    let e = reads
        .submit(work::SubmitRequest { record: Some(late) })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert_eq!(accord_tests::reason(&e), "not_writer");
    let writer = e.metadata().get("accord-writer").expect("names the writer");
    assert!(
        writer
            .to_str()
            .unwrap()
            .starts_with(&format!("acme@{}", acme.addr)),
        "{writer:?}"
    );
    assert_eq!(
        ledger(&acme).await.len(),
        before,
        "the standby wrote nothing"
    );
}

/// Commit envelopes (seed 003) at a standby: the envelope state lives in memory, rebuilt from
/// the envelope index; a standby applies each batch's indexed envelope records as the writer
/// commits them, so its `Get` and `List` answer what the writer's do, phase by phase.
#[tokio::test(flavor = "multi_thread")]
async fn a_standby_follows_commit_envelopes() {
    use accord_proto::pb::envelope::v1::{
        self as env, envelope_service_client::EnvelopeServiceClient,
    };
    let pg = TestPostgres::start().unwrap();
    let section = pg.storage_section(LEASE_MS);
    let a = TestNode::builder("acme")
        .party("alice")
        .config(move |t, p| {
            crate::envelopes::config(t, p);
            t.push_str(&section);
        })
        .start()
        .await
        .unwrap();
    let b = TestNode::builder("globex")
        .party("bob")
        .config(crate::envelopes::config)
        .start()
        .await
        .unwrap();
    let (a, _b) = crate::envelopes::with_budgets(a, b).await;
    let standby = Instance::start(&a).unwrap();
    let token = a.admin_token();
    let at_standby = EnvelopeServiceClient::new(standby.channel().await.unwrap());
    // Serving reads before the envelope starts: it follows the envelope's records.
    accord_tests::eventually(WAIT, || {
        let mut c = at_standby.clone();
        let token = token.clone();
        async move {
            let r = c
                .list(accord_tests::with_token(
                    env::ListRequest::default(),
                    &token,
                ))
                .await;
            accord_tests::not_yet(r, &[tonic::Code::Unavailable])
        }
    })
    .await
    .expect("the standby serves envelope reads");

    crate::envelopes::start(&a, "t-1", 30, 0).await;
    accord_tests::envelopes::wait_phase(&a, "t-1", "COMMITTED").await;
    // The standby's answers are the writer's once it caught up (within `follow_ms`): the
    // envelope, committed, and the list with the closed ones.
    let at_writer = accord_tests::envelopes::client(&a).await;
    let get = |c: &EnvelopeServiceClient<tonic::transport::Channel>| {
        let (mut c, token) = (c.clone(), token.clone());
        async move {
            let req = env::GetRequest {
                envelope: "t-1".into(),
            };
            let r = c.get(accord_tests::with_token(req, &token)).await;
            accord_tests::not_yet(r, &[tonic::Code::NotFound]).map(|r| r.and_then(|r| r.envelope))
        }
    };
    let list = |c: &EnvelopeServiceClient<tonic::transport::Channel>| {
        let (mut c, token) = (c.clone(), token.clone());
        async move {
            let req = env::ListRequest {
                include_closed: true,
                ..Default::default()
            };
            // `age_ms` is the envelope's age when read: the two reads are apart.
            c.list(accord_tests::with_token(req, &token))
                .await
                .map(|r| {
                    let mut l = r.into_inner();
                    l.envelopes.iter_mut().for_each(|e| e.age_ms = 0);
                    l
                })
        }
    };
    let last = std::sync::Mutex::new(String::new());
    accord_tests::eventually(WAIT, || async {
        let (s, w) = (get(&at_standby).await?, get(&at_writer).await?);
        let (ls, lw) = (list(&at_standby).await?, list(&at_writer).await?);
        let same = s.as_ref().is_some_and(|e| e.phase == "COMMITTED") && s == w && ls == lw;
        *last.lock().unwrap() = format!("standby {s:#?} {ls:#?}\nwriter {w:#?} {lw:#?}");
        Ok::<_, tonic::Status>(same.then_some(()))
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "the standby never showed the writer's committed envelope and list: {e}\n{}",
            last.lock().unwrap()
        )
    });
    assert_eq!(
        list(&at_writer).await.unwrap().envelopes.len(),
        1,
        "one envelope, listed at both"
    );
}
