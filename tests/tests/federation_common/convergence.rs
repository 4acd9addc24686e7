//! Issue 26: several organisations' nodes, each in this process on its own driven clock, and the
//! checks that they agree about a commitment once every outbox drained and the Work service
//! clocks ticked: the same `GetCommitment` view at every node holding it ([`assert_same_view`]),
//! and a record that lost a race rejected with the same code at every node.

use accord_node::clock::{Clock, ManualClock};
use accord_proto::pb::record::v1::Record;
use accord_proto::pb::work::v1 as work;
use accord_tests::TestNode;
use prost::Message;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The Work service clock's tick, in real milliseconds (what is due is decided on the node's
/// driven clock).
pub const TICK_MS: u64 = 20;
/// Quarantine timeout (on the driven clock).
pub const QUARANTINE_MS: u64 = 4_000;
/// How long a wait for background progress may take before the test fails.
pub const SETTLE: Duration = Duration::from_secs(20);

/// The config of a driven node: fast federation, a 20 ms Work service tick, a 4 s quarantine.
pub fn driven_config(text: &mut String, p: &std::path::Path) {
    super::fast(text, p);
    text.push_str(&format!("quarantine_timeout_ms = {QUARANTINE_MS}\n"));
    *text = text.replace("tick_ms = 1000", &format!("tick_ms = {TICK_MS}"));
}

/// One organisation's node, running in this process on its own driven clock, with one party.
pub struct Org {
    pub node: TestNode,
    pub clock: Arc<ManualClock>,
    pub party: String,
}

impl Org {
    /// The node's clock reading.
    pub fn now(&self) -> i64 {
        use accord_node::clock::TimeSource;
        self.clock.now_ms()
    }

    /// `party` declares `r` at this node (the node signs it and stamps it with its own clock):
    /// the record id and the kernel's outcome as the node answered it — applied, rejected, or
    /// (with a sequencer elsewhere) not decided yet.
    pub async fn act(&self, mut r: Record) -> ([u8; 32], work::Outcome) {
        r.declared_at_unix_ms = 0;
        let req = accord_tests::with_token(
            work::DeclareRequest { record: Some(r) },
            &self.node.party_token(&self.party),
        );
        let resp = super::work(&self.node)
            .await
            .declare(req)
            .await
            .unwrap_or_else(|s| panic!("{}: declare refused: {s}", self.node.name))
            .into_inner();
        (
            resp.record_id.as_ref().try_into().expect("record id"),
            resp.outcome.unwrap_or_default(),
        )
    }

    /// [`Org::act`], for a record the node must take at once (not refused by the kernel).
    pub async fn act_ok(&self, r: Record) -> [u8; 32] {
        let (id, o) = self.act(r).await;
        assert!(
            o.applied || o.rejection_code.is_empty() || o.rejection_code == "awaiting_sequence",
            "{}: {} refused its party's record: {o:?}",
            self.node.name,
            self.party
        );
        id
    }
}

/// Starts one node per `(organisation, party)`, each on its own driven clock at `t0`, and
/// peers every pair both ways.
pub async fn driven_orgs(specs: &[(&str, &str)], t0: i64) -> Vec<Org> {
    driven_orgs_with(specs, t0, "").await
}

/// [`driven_orgs`], with `federation` (lines of the `[federation]` section) added to every
/// node's config.
pub async fn driven_orgs_with(specs: &[(&str, &str)], t0: i64, federation: &str) -> Vec<Org> {
    let extra = federation.to_string();
    driven_orgs_edited(specs, t0, move |_, text| text.push_str(&extra)).await
}

/// [`driven_orgs`], with `edit(organisation, config text)` applied to every node's config after
/// the driven settings.
pub async fn driven_orgs_edited(
    specs: &[(&str, &str)],
    t0: i64,
    edit: impl Fn(&str, &mut String) + Clone + Send + Sync + 'static,
) -> Vec<Org> {
    let mut orgs = Vec::new();
    for (name, p) in specs {
        let (clock, manual) = Clock::manual(t0);
        let (edit, org) = (edit.clone(), name.to_string());
        let node = TestNode::builder(name)
            .party(p)
            .config(move |text, p| {
                driven_config(text, p);
                edit(&org, text);
            })
            .start_with_clock(clock)
            .await
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        orgs.push(Org {
            node,
            clock: manual,
            party: p.to_string(),
        });
    }
    for i in 0..orgs.len() {
        for j in i + 1..orgs.len() {
            accord_tests::federate(&orgs[i].node, &orgs[j].node)
                .await
                .unwrap();
        }
    }
    orgs
}

/// Sets every node's clock to `t`.
pub fn set_clocks(orgs: &[&Org], t: i64) {
    for o in orgs {
        o.clock.set(t);
    }
}

/// Holds delivery between `a` and `b` both ways (records wait in the outboxes).
pub async fn partition(a: &TestNode, b: &TestNode) {
    a.set_peer_enabled(&b.name, false).await.unwrap();
    b.set_peer_enabled(&a.name, false).await.unwrap();
}

/// Lets delivery between `a` and `b` resume both ways.
pub async fn heal(a: &TestNode, b: &TestNode) {
    a.set_peer_enabled(&b.name, true).await.unwrap();
    b.set_peer_enabled(&a.name, true).await.unwrap();
}

/// What moves at a node: (ledger size, quarantine size), and whether work is in hand (records
/// queued for peers or not yet routed, a peer still backfilling), with the Work service ticks
/// completed so far.
async fn activity(n: &TestNode) -> ((u64, u64), Option<String>, u64) {
    let s = n.status().await.expect("status");
    let health = s.peers.iter().filter_map(|p| p.health.as_ref());
    let queued: u64 = health.clone().map(|h| h.queue_depth).sum();
    let backfilling = health.clone().any(|h| h.backfilling);
    let busy = (queued > 0 || backfilling || s.records_unrouted > 0).then(|| {
        format!(
            "{}: {queued} queued, {} unrouted, backfilling {backfilling}",
            n.name, s.records_unrouted
        )
    });
    ((s.ledger_size, s.quarantine_size), busy, s.service_ticks)
}

/// Waits (polling) until nothing moves at `nodes`: no ledger grows and no quarantine changes
/// while every node's Work service completes two ticks — counted, not timed, so a loaded machine
/// cannot end the wait before a tick on the clocks as they are now wrote what is due — and, when
/// `drained`, every record is routed, every outbox is empty and no backfill runs.
pub async fn settle(nodes: &[&TestNode], drained: bool) {
    let started = Instant::now();
    // The sizes seen, and each node's tick count, when they were first seen.
    type Seen = (Vec<(u64, u64)>, Vec<u64>);
    let mut stable: Option<Seen> = None;
    loop {
        let mut sizes = Vec::new();
        let mut busy = Vec::new();
        let mut ticks = Vec::new();
        for n in nodes {
            let (size, b, t) = activity(n).await;
            sizes.push(size);
            ticks.push(t);
            if drained && let Some(b) = b {
                busy.push(b);
            }
        }
        match &stable {
            _ if !busy.is_empty() => stable = None,
            Some((was, since)) if *was == sizes => {
                if ticks.iter().zip(since).all(|(t, s)| *t >= s + 2) {
                    return;
                }
            }
            _ => stable = Some((sizes, ticks)),
        }
        if started.elapsed() > SETTLE {
            panic!("no quiescence within {SETTLE:?}: {busy:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Every outbox drained and two ticks passed at every node.
pub async fn quiesce(nodes: &[&TestNode]) {
    settle(nodes, true).await;
}

/// GetCommitment as the node's operator.
pub async fn view(n: &TestNode, c: &str) -> Result<work::GetCommitmentResponse, tonic::Status> {
    super::work(n)
        .await
        .get_commitment(work::GetCommitmentRequest {
            commitment_id: c.into(),
        })
        .await
        .map(|r| r.into_inner())
}

/// Waits until `n`'s view of `c` satisfies `check`.
pub async fn wait_view<F>(
    n: &TestNode,
    c: &str,
    what: &str,
    check: F,
) -> work::GetCommitmentResponse
where
    F: Fn(&work::GetCommitmentResponse) -> bool,
{
    // NOT_FOUND is "not arrived yet"; any other refusal fails the wait at once, with its cause.
    let got = accord_tests::eventually(SETTLE, || async {
        accord_tests::not_yet(
            view(n, c).await.map(tonic::Response::new),
            &[tonic::Code::NotFound],
        )
        .map(|v| v.filter(|v| check(v)))
    })
    .await;
    match got {
        Ok(v) => v,
        Err(e) => panic!("{}: {c}: {what}: {e}; now {:?}", n.name, view(n, c).await),
    }
}

/// The view with what is legitimately per-node taken out: each history entry's ledger sequence
/// and the order the node's ledger holds them in (sorted by record id instead), the admission
/// declarations (each node declares what it admitted), and the human-readable rejection detail.
fn comparable(v: &work::GetCommitmentResponse) -> work::GetCommitmentResponse {
    let mut v = v.clone();
    v.history.retain(|h| h.operation != "admission");
    for h in &mut v.history {
        h.sequence = 0;
        if let Some(o) = &mut h.outcome {
            o.rejection_detail.clear();
        }
    }
    v.history.sort_by(|a, b| a.record_id.cmp(&b.record_id));
    v
}

/// A history as `operation id-prefix outcome` entries.
fn history_text(h: &[work::HistoryEntry]) -> String {
    let entries: Vec<String> = h
        .iter()
        .map(|e| {
            let o = e.outcome.clone().unwrap_or_default();
            let verdict = if o.applied {
                "applied".to_string()
            } else {
                format!("rejected {}", o.rejection_code)
            };
            format!(
                "{} {} {verdict}",
                e.operation,
                hex::encode(&e.record_id[..4.min(e.record_id.len())])
            )
        })
        .collect();
    format!("[{}]", entries.join(", "))
}

/// The names of the fields in which `a` and `b` differ, with both values.
fn differing(a: &work::GetCommitmentResponse, b: &work::GetCommitmentResponse) -> Vec<String> {
    let mut out = Vec::new();
    macro_rules! fields {
        ($($f:ident),+ $(,)?) => {
            $(if a.$f != b.$f {
                out.push(format!("{}: {:?} vs {:?}", stringify!($f), a.$f, b.$f));
            })+
        };
    }
    fields!(
        commitment_id,
        state,
        items,
        terminal,
        category,
        flags,
        next_move,
        next_move_reason,
        assignment,
        open_revokes,
        disputes,
        deferral,
        version,
        obligee,
        obligor,
        acceptor,
        forward_count,
        reopened_as,
        reopens,
        execution,
        control,
        control_holder,
        liveness,
        gates,
        candidates,
        principal,
        accountable,
        budget,
        consumed,
        budget_exhausted,
        lease_until_unix_ms,
        counter_version,
        pending_delegate,
        pending_assign,
        nominees,
        stop,
        handover,
        attention_marks,
        terms_version_number,
    );
    if a.history != b.history {
        out.push(format!(
            "history: {} vs {}",
            history_text(&a.history),
            history_text(&b.history)
        ));
    }
    if out.is_empty() && a != b {
        out.push(format!("a field not listed here: {a:?} vs {b:?}"));
    }
    out
}

/// Asserts that every node in `nodes` holds `c` and shows the same view of it (GetCommitment
/// as the node's operator), minus what is legitimately per-node (see [`comparable`]); names
/// every field that differs. Returns the first node's view.
pub async fn assert_same_view(nodes: &[&TestNode], c: &str) -> work::GetCommitmentResponse {
    let mut views = Vec::new();
    for n in nodes {
        match view(n, c).await {
            Ok(v) => views.push(v),
            Err(s) => panic!("{}: {c} not held: {s}", n.name),
        }
    }
    let first = comparable(&views[0]);
    let mut report = Vec::new();
    for (n, v) in nodes.iter().zip(&views).skip(1) {
        let d = differing(&first, &comparable(v));
        if !d.is_empty() {
            report.push(format!(
                "{} vs {}:\n  {}",
                nodes[0].name,
                n.name,
                d.join("\n  ")
            ));
        }
    }
    assert!(
        report.is_empty(),
        "{c}: the nodes disagree\n{}",
        report.join("\n")
    );
    views.remove(0)
}

/// The ledger entry of `id` at `n`.
pub async fn entry(n: &TestNode, id: &[u8; 32]) -> Option<work::LedgerEntry> {
    super::work(n)
        .await
        .get_record(work::GetRecordRequest {
            record_id: id.to_vec().into(),
        })
        .await
        .ok()?
        .into_inner()
        .entry
}

/// `id`'s outcome at every node, from the commitment's history and from GetRecord: the same
/// at both, `None` when the node does not hold the record.
async fn outcomes(nodes: &[&TestNode], c: &str, id: &[u8; 32]) -> Vec<Option<work::Outcome>> {
    let mut out = Vec::new();
    for n in nodes {
        let in_history = view(n, c).await.ok().and_then(|v| {
            v.history
                .into_iter()
                .find(|h| h.record_id.as_ref() == id.as_slice())
                .map(|h| h.outcome.unwrap_or_default())
        });
        let recorded = entry(n, id).await.map(|e| e.outcome.unwrap_or_default());
        assert_eq!(
            in_history.as_ref().map(|o| (o.applied, &o.rejection_code)),
            recorded.as_ref().map(|o| (o.applied, &o.rejection_code)),
            "{}: history and GetRecord disagree about {}",
            n.name,
            hex::encode(id)
        );
        out.push(in_history);
    }
    out
}

/// Asserts that the record `id` lost: every node holds it, rejected with `code`.
pub async fn assert_rejected_everywhere(nodes: &[&TestNode], c: &str, id: &[u8; 32], code: &str) {
    let got = outcomes(nodes, c, id).await;
    let bad: Vec<String> = nodes
        .iter()
        .zip(&got)
        .filter(|(_, o)| {
            !o.as_ref()
                .is_some_and(|o| !o.applied && o.rejection_code == code)
        })
        .map(|(n, o)| format!("{}: {o:?}", n.name))
        .collect();
    assert!(
        bad.is_empty(),
        "{c}: {} is not rejected {code} everywhere: {bad:?}",
        hex::encode(id)
    );
    // Its author is told, in its attention list at its own node (issue 26, item 3: "the record
    // that loses is rejected at every node with a code its author can see").
    let author = super::decode(&entry(nodes[0], id).await.expect("held"))
        .author
        .expect("author");
    let at = nodes
        .iter()
        .find(|n| n.name == author.organisation)
        .expect("the author's node is among the nodes");
    let told = super::work(at)
        .await
        .list_attention(work::ListAttentionRequest {
            party: Some(author.clone()),
            ..Default::default()
        })
        .await
        .expect("the operator reads a party's attention list")
        .into_inner()
        .items;
    assert!(
        told.iter().any(|a| a.about == "record_rejected"
            && a.record_id.as_ref() == id.as_slice()
            && a.detail == code
            && a.commitment_id == c),
        "{c}: {}/{} is not told that {} lost ({code}): {told:?}",
        author.organisation,
        author.name,
        hex::encode(id)
    );
}

/// Asserts that the record `id` is held and applied at every node.
pub async fn assert_applied_everywhere(nodes: &[&TestNode], c: &str, id: &[u8; 32]) {
    let got = outcomes(nodes, c, id).await;
    let bad: Vec<String> = nodes
        .iter()
        .zip(&got)
        .filter(|(_, o)| !o.as_ref().is_some_and(|o| o.applied))
        .map(|(n, o)| format!("{}: {o:?}", n.name))
        .collect();
    assert!(
        bad.is_empty(),
        "{c}: {} is not applied everywhere: {bad:?}",
        hex::encode(id)
    );
}

/// Asserts that the only Work service records on `c`, at every node, are `home`'s (one author
/// for every record time produces), and returns how many of them each node holds.
pub async fn assert_time_records_by(nodes: &[&TestNode], c: &str, home: &str) -> Vec<usize> {
    let mut counts = Vec::new();
    let mut foreign = Vec::new();
    for n in nodes {
        let v = view(n, c).await.expect("commitment");
        let mut count = 0;
        for h in &v.history {
            let id: [u8; 32] = h.record_id.as_ref().try_into().unwrap();
            let e = entry(n, &id).await.expect("history entry is recorded");
            let r = Record::decode(e.record.expect("record").payload.as_ref()).unwrap();
            let author = r.author.unwrap_or_default();
            // A node's admission declarations are its own decisions about peer records, not
            // records time produces (DESIGN.md, "Federation": every node declares each admission).
            if author.name != "work-service" || h.operation == "admission" {
                continue;
            }
            if author.organisation == home {
                count += 1;
            } else {
                foreign.push(format!(
                    "{}: {}/work-service wrote {} ({:?})",
                    n.name, author.organisation, h.operation, h.outcome
                ));
            }
        }
        counts.push(count);
    }
    assert!(
        foreign.is_empty(),
        "{c}: time records by another node than the home {home}: {foreign:?}"
    );
    counts
}

/// The records of `c`'s history at `n` whose operation is `op`: (author `org/name`, the record,
/// applied).
pub async fn history_records(n: &TestNode, c: &str, op: &str) -> Vec<(String, Record, bool)> {
    let v = view(n, c).await.expect("commitment");
    let mut out = Vec::new();
    for h in v.history.iter().filter(|h| h.operation == op) {
        let id: [u8; 32] = h.record_id.as_ref().try_into().unwrap();
        let e = entry(n, &id).await.expect("history entry is recorded");
        let r = Record::decode(e.record.expect("record").payload.as_ref()).unwrap();
        let a = r.author.clone().unwrap_or_default();
        let applied = h.outcome.as_ref().is_some_and(|o| o.applied);
        out.push((format!("{}/{}", a.organisation, a.name), r, applied));
    }
    out
}

/// Asserts that at every node `c`'s history holds exactly one applied `promise` resting on the
/// claim `claim`, authored by `by` (`org/name`): the promise record the claim produced (seed
/// 000, "Assignment": claim — "a promise record is produced"), written by the claimant.
pub async fn assert_produced_promise(nodes: &[&TestNode], c: &str, claim: &[u8; 32], by: &str) {
    for n in nodes {
        let found: Vec<(String, bool)> = history_records(n, c, "promise")
            .await
            .into_iter()
            .filter(|(_, r, _)| r.basis.iter().any(|b| b.as_ref() == claim.as_slice()))
            .map(|(a, _, applied)| (a, applied))
            .collect();
        assert_eq!(
            found,
            vec![(by.to_string(), true)],
            "{}: the promise {} produced",
            n.name,
            hex::encode(claim)
        );
    }
}
