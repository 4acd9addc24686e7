//! Envelope helpers shared by the envelope tests (`envelopes.rs`, `envelope_delegate.rs`):
//! the EnvelopeService client, reading an envelope as the operator sees it, waiting for its
//! phase or history, the operator's ticks and holds, and an envelope's accounts and history
//! lines.

use crate::{TestNode, eventually, not_yet, with_token};
use accord_proto::pb::envelope::v1::{self as env, envelope_service_client::EnvelopeServiceClient};
use std::time::Duration;
use tonic::transport::Channel;

/// Config lines that leave ticks to the test (`envelopes.external_ticks`): a tick names its
/// `instant_time`, so nothing waits on a clock.
pub const EXTERNAL_TICKS: &str = "\n[envelopes]\nexternal_ticks = true\n";

/// How long the envelope waits last at most.
pub const WAIT: Duration = Duration::from_secs(30);

/// An EnvelopeService client of `node`.
pub async fn client(node: &TestNode) -> EnvelopeServiceClient<Channel> {
    EnvelopeServiceClient::new(node.channel().await.expect("channel"))
}

/// Envelope `id` as `node`'s operator sees it: `None` while the node does not know it
/// (NOT_FOUND); any other error is returned.
pub async fn try_get(node: &TestNode, id: &str) -> Result<Option<env::Envelope>, tonic::Status> {
    let req = env::GetRequest {
        envelope: id.into(),
    };
    let r = client(node)
        .await
        .get(with_token(req, &node.admin_token()))
        .await;
    Ok(not_yet(r, &[tonic::Code::NotFound])?.and_then(|r| r.envelope))
}

/// Envelope `id` at `node`, `None` if unknown there; fails on any other error.
pub async fn get(node: &TestNode, id: &str) -> Option<env::Envelope> {
    try_get(node, id)
        .await
        .unwrap_or_else(|e| panic!("{}: Get {id}: {e:?}", node.name))
}

/// Waits until `node` shows envelope `id` such that `done` holds (`what` names it in the
/// failure, with the envelope as it is then); an error reading it fails at once.
pub async fn wait_until(
    node: &TestNode,
    id: &str,
    what: &str,
    done: impl Fn(&env::Envelope) -> bool,
) -> env::Envelope {
    let got = eventually(WAIT, || async {
        Ok::<_, tonic::Status>(try_get(node, id).await?.filter(|e| done(e)))
    })
    .await;
    match got {
        Ok(e) => e,
        Err(e) => panic!(
            "{}: {id} never {what}: {e:#}; now {:?}",
            node.name,
            try_get(node, id).await
        ),
    }
}

/// Waits until `node` shows envelope `id` in `phase`.
pub async fn wait_phase(node: &TestNode, id: &str, phase: &str) -> env::Envelope {
    wait_until(node, id, phase, |e| e.phase == phase).await
}

/// Waits until `node`'s history of `id` has at least `n` lines.
pub async fn wait_history(node: &TestNode, id: &str, n: usize) -> env::Envelope {
    wait_until(node, id, &format!("has {n} events"), |e| {
        e.history.len() >= n
    })
    .await
}

/// Waits until `participant`'s vote on `id`, as `node` records it, is `vote`.
pub async fn wait_vote(node: &TestNode, id: &str, participant: &str, vote: &str) -> env::Envelope {
    wait_until(node, id, &format!("has {participant}'s {vote}"), |e| {
        e.votes.get(participant).is_some_and(|v| v == vote)
    })
    .await
}

/// The operator of `node` submits a tick at `instant_time`.
pub async fn tick(node: &TestNode, tick_id: &str, instant_time: i64) -> env::SubmitTickResponse {
    let req = env::SubmitTickRequest {
        tick_id: tick_id.into(),
        instant_time,
    };
    client(node)
        .await
        .submit_tick(with_token(req, &node.admin_token()))
        .await
        .expect("tick")
        .into_inner()
}

/// The holds `node`'s operator lists (`EnvelopeService.ListHolds`).
pub async fn holds(node: &TestNode) -> Vec<env::Hold> {
    client(node)
        .await
        .list_holds(with_token(env::ListHoldsRequest {}, &node.admin_token()))
        .await
        .unwrap_or_else(|e| panic!("{}: ListHolds: {e:?}", node.name))
        .into_inner()
        .holds
}

/// The account `name` of an envelope.
pub fn account(e: &env::Envelope, name: &str) -> env::Account {
    e.accounts
        .iter()
        .find(|a| a.account == name)
        .cloned()
        .unwrap_or_else(|| panic!("no account {name} in {e:?}"))
}

/// An envelope's history as `"<step> <event>"` lines.
pub fn steps(e: &env::Envelope) -> Vec<String> {
    e.history
        .iter()
        .map(|h| format!("{} {}", h.step, h.event))
        .collect()
}
