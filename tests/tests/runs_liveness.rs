//! Issue 29, over a real node: a run's execution claim on its commitment is derived from the
//! run's records whichever service recorded them, carries liveness, and survives a restart.
//!
//! Seed 000: "active — Execution running; liveness live or not applicable"; "Execution, control
//! and liveness come from executor or external Claims". Before issue 29 the RunService wrote the
//! claim itself after its own append, with no heartbeat interval: a run recorded through
//! `Submit` claimed nothing, a crash between the run record and the claim lost it, and a
//! commitment executed by a run showed liveness `unknown` (category `unknown`). Now the
//! projection keeps each claim as owed with the run record, and the node's clock writes it as an
//! `observation` of the run's executor resting on the run record (README, "Runs").

use crate::federation_common::WAIT;
use crate::runs_common::*;

use accord_proto::pb::record::v1::{self as rec, record::Operation};

/// The generated config's clock setting, and one under which the clock ticks once at start-up
/// and then only after an hour: what the clock owes stays owed while the test runs (the
/// interval is tokio's, its first tick immediate).
const TICK: &str = "tick_ms = 1000";
const NO_TICK: &str = "tick_ms = 3600000";

#[tokio::test(flavor = "multi_thread")]
async fn a_run_recorded_through_submit_claims_its_commitment_and_the_claim_survives_a_restart() {
    let mut n = accord_tests::TestNode::builder("acme")
        .party("alice")
        .party("bob")
        .party("carol")
        .config(|t, _| {
            assert!(t.contains(TICK), "the generated config sets {TICK}");
            *t = t.replace(TICK, NO_TICK);
        })
        .start()
        .await
        .unwrap();
    alice_promised(&n, "x1").await;
    let before = commitment(&n, "x1").await;
    assert_eq!(
        (before.execution.as_str(), before.liveness.as_str()),
        ("not_started", "not_applicable")
    );

    // alice's own signed run records, through Submit: no RunService involved.
    let start = submit_as(
        &n,
        "alice",
        "x1",
        Operation::RunStart(rec::RunStart {
            run: "r1".into(),
            heartbeat_interval_ms: 600_000,
            ..Default::default()
        }),
    )
    .await;
    let moved = submit_as(
        &n,
        "alice",
        "x1",
        Operation::RunTransition(rec::RunTransition {
            run: "r1".into(),
            to: num("running"),
            context: None,
        }),
    )
    .await;
    for r in [&start, &moved] {
        assert!(r.outcome.as_ref().is_some_and(|o| o.applied), "{r:?}");
    }
    // The clock has not ticked since: the claims are owed, not written.
    let owed = commitment(&n, "x1").await;
    assert!(
        !owed.history.iter().any(|h| h.operation == "observation"),
        "written before the clock ticked: {:?}",
        owed.history
    );

    // Killed before any tick, restarted with a clock that ticks: the owed claims are written.
    n.kill9();
    let cfg = n.dir.join("accord.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace(NO_TICK, "tick_ms = 100")).unwrap();
    n.spawn().await.unwrap();
    let c = accord_tests::eventually(WAIT, || async {
        let c = commitment(&n, "x1").await;
        (c.execution == "running").then_some(c)
    })
    .await
    .expect("x1's execution follows the run after the restart");
    assert_eq!(
        (c.liveness.as_str(), c.category.as_str()),
        ("live", "active"),
        "seed 000: active — Execution running; liveness live"
    );
    // One claim per run record, each alice's observation resting on it, applied.
    let mut work = crate::federation_common::work(&n).await;
    let mut rested_on = Vec::new();
    for h in c.history.iter().filter(|h| h.operation == "observation") {
        assert!(h.outcome.as_ref().is_some_and(|o| o.applied), "{h:?}");
        let entry = work
            .get_record(accord_proto::pb::work::v1::GetRecordRequest {
                record_id: h.record_id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .entry
            .unwrap();
        let r = <rec::Record as prost::Message>::decode(entry.record.unwrap().payload).unwrap();
        let author = r.author.unwrap();
        assert_eq!(
            (author.organisation.as_str(), author.name.as_str()),
            ("acme", "alice")
        );
        let Some(Operation::Observation(o)) = r.operation else {
            panic!("not an observation")
        };
        assert_eq!(
            o.heartbeat_interval_ms, 600_000,
            "the run's declared interval"
        );
        rested_on.extend(r.basis.iter().map(|b| b.to_vec()));
    }
    let mut want = vec![start.record_id.to_vec(), moved.record_id.to_vec()];
    want.sort();
    rested_on.sort();
    assert_eq!(
        rested_on, want,
        "one claim per run record, each resting on it"
    );
}
