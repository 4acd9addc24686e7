//! `ListCommitments` and `WatchCommitments` (issue 11, item 8): commitment summaries filtered by
//! summary category, flag and "what needs me", under the visibility rules of
//! [`super::visibility`] (a party sees only the commitments it may read).

use super::visibility::Visibility;
use crate::auth::Caller;
use crate::error::Error;
use crate::node::Node;
use crate::projection::CommitmentRef;
use accord_kernel as k;
use accord_proto::pb::record::v1::PartyRef;
use accord_proto::pb::work::v1 as pb;

#[path = "commitments_watch.rs"]
mod watch;
pub use watch::watch;

/// Default and largest page sizes.
pub const DEFAULT_PAGE: usize = 100;
/// Largest page a client may ask for.
pub const MAX_PAGE: usize = 1000;
/// Commitments visited per hold of the projection's read lock by `ListCommitments`
/// ([`Filter::scan`]; `WatchCommitments` reads smaller chunks, [`watch`]).
pub const SCAN_CHUNK: usize = 256;

/// A validated `ListCommitmentsRequest` filter.
#[derive(Debug, Clone)]
pub struct Filter {
    category: Option<String>,
    flag: Option<String>,
    needs: Option<k::Party>,
    /// The caller as a party; `None` for the operator (reads everything).
    reader: Option<k::Party>,
    /// This organisation's Access: whose move names the queue owners it lets act.
    access: std::sync::Arc<k::Access>,
}

/// The page size asked for, bounded.
pub fn page_size(n: u32) -> usize {
    match n as usize {
        0 => DEFAULT_PAGE,
        n => n.min(MAX_PAGE),
    }
}

/// A page token: the last key of the previous page, hex-encoded (opaque to clients).
pub fn token_of(last: &str) -> String {
    hex::encode(last)
}

/// Parses a page token; empty = the first page.
pub fn parse_token(field: &str, t: &str) -> Result<String, Error> {
    if t.is_empty() {
        return Ok(String::new());
    }
    hex::decode(t)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| Error::invalid(field, "not a page token this node issued"))
}

impl Filter {
    /// Validates the request's filter for `caller`.
    pub fn parse(
        node: &Node,
        caller: &Caller,
        req: &pb::ListCommitmentsRequest,
    ) -> Result<Filter, Error> {
        let category = match req.category.as_str() {
            "" => None,
            c if k::view::Category::ALL.iter().any(|x| x.wire_name() == c) => Some(c.to_string()),
            _ => {
                return Err(Error::invalid(
                    "category",
                    "not a summary category (closed, deferred, triage, awaiting_acceptance, waiting, unknown, active, ready)",
                ));
            }
        };
        let flag = match req.flag.as_str() {
            "" => None,
            f if k::view::Flag::ALL.iter().any(|x| x.wire_name() == f) => Some(f.to_string()),
            _ => {
                return Err(Error::invalid(
                    "flag",
                    "not a flag (overdue, at_risk, contradiction, stale, taken_over, unevidenced)",
                ));
            }
        };
        let reader = match caller {
            Caller::Operator => None,
            Caller::Party(p) => Some(k::Party::new(node.name(), p.as_str())),
        };
        let needs = match &req.needs {
            Some(p) if !(p.organisation.is_empty() && p.name.is_empty()) => {
                crate::ident::name(&p.organisation)
                    .map_err(|r| Error::invalid("needs.organisation", r))?;
                crate::ident::name(&p.name).map_err(|r| Error::invalid("needs.name", r))?;
                let p = k::Party::new(&p.organisation, &p.name);
                if reader.as_ref().is_some_and(|r| *r != p) {
                    return Err(Error::PermissionDenied(
                        "needs: a party may only ask what needs itself".into(),
                    ));
                }
                Some(p)
            }
            _ => None,
        };
        let access = node
            .projection
            .read()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?
            .view_access
            .clone();
        Ok(Filter {
            category,
            flag,
            needs,
            reader,
            access,
        })
    }

    /// Every commitment after `after` (id order) that the reader (and the party asked about)
    /// may read, handed to `f` in chunks of at most `chunk` visited commitments; stops when `f`
    /// returns false. The projection's read lock is held only while one chunk is gathered and
    /// is free while `f` runs, so a scan over 10^5 commitments never holds off the ledger
    /// writer's publish for longer than one chunk (issue 14, "nothing stalls the writer").
    pub fn scan(
        &self,
        node: &Node,
        rules: &Visibility,
        after: &str,
        chunk: usize,
        mut f: impl FnMut(Vec<CommitmentRef>) -> bool,
    ) -> Result<(), Error> {
        let mut cursor = after.to_string();
        loop {
            let (visible, last) = {
                let p = node
                    .projection
                    .read()
                    .map_err(|_| Error::Internal("projection lock poisoned".into()))?;
                let piece = p.commitments_after(&cursor, chunk.max(1));
                let last = piece.last().map(|c| c.id.clone());
                let visible: Vec<_> = piece
                    .into_iter()
                    .filter(|c| {
                        [&self.reader, &self.needs]
                            .into_iter()
                            .flatten()
                            .all(|who| rules.may_read(&p, who, &c.id))
                    })
                    .collect();
                (visible, last)
            };
            let Some(last) = last else { return Ok(()) };
            if !visible.is_empty() && !f(visible) {
                return Ok(());
            }
            cursor = last;
        }
    }

    /// The summary of `c` at `now` if it passes the filter.
    pub fn summary(&self, c: &k::Commitment, now: i64) -> Option<pb::CommitmentSummary> {
        let v = crate::view::to_pb(c, now, &self.access);
        if self.category.as_ref().is_some_and(|cat| *cat != v.category)
            || self
                .flag
                .as_ref()
                .is_some_and(|f| !v.flags.iter().any(|x| x == f))
        {
            return None;
        }
        let needs = match &self.needs {
            Some(who) => {
                let n = needs(&v, &crate::convert::party_to_pb(who));
                if n.is_empty() {
                    return None;
                }
                n
            }
            None => Vec::new(),
        };
        Some(pb::CommitmentSummary {
            commitment_id: v.commitment_id,
            state: v.state,
            category: v.category,
            flags: v.flags,
            next_move: v.next_move,
            next_move_reason: v.next_move_reason,
            assignment: v.assignment,
            execution: v.execution,
            control: v.control,
            liveness: v.liveness,
            obligee: v.obligee,
            obligor: v.obligor,
            needs,
            change: String::new(),
        })
    }
}

/// Why a commitment needs `who` ("what needs me"): its move in triage, its acceptance awaited,
/// another row of "Whose move it is" naming it, an unknown category, the overdue flag.
fn needs(v: &pb::GetCommitmentResponse, who: &PartyRef) -> Vec<String> {
    let mut out = Vec::new();
    if v.next_move.iter().any(|p| p == who) {
        out.push(match v.category.as_str() {
            "triage" => "triage",
            "awaiting_acceptance" => "awaiting_acceptance",
            _ => "waiting_on",
        });
    }
    if v.category == "unknown" {
        out.push("unknown");
    }
    if v.flags.iter().any(|f| f == "overdue") {
        out.push("overdue");
    }
    out.into_iter().map(str::to_string).collect()
}

/// One page of `ListCommitments`.
pub fn page(
    node: &Node,
    rules: &Visibility,
    caller: &Caller,
    req: &pb::ListCommitmentsRequest,
) -> Result<pb::ListCommitmentsResponse, Error> {
    let filter = Filter::parse(node, caller, req)?;
    let after = parse_token("page_token", &req.page_token)?;
    let size = page_size(req.page_size);
    let now = node.clock.now_ms();
    let mut out = pb::ListCommitmentsResponse::default();
    let mut last = None;
    filter.scan(node, rules, &after, SCAN_CHUNK, |chunk| {
        for c in chunk {
            if out.commitments.len() == size {
                // More remain: the next page starts after the last one returned.
                out.next_page_token = last.as_deref().map(token_of).unwrap_or_default();
                return false;
            }
            last = Some(c.id.clone());
            if let Some(s) = filter.summary(&c, now) {
                out.commitments.push(s);
            }
        }
        true
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::ledger::Append;
    use crate::projection::tests::request;
    use accord_proto::pb::record::v1 as rec;

    fn append_of(node: &Node, r: &rec::Record) -> Append<k::Record> {
        // The node key speaks for any party of its organisation.
        crate::projection::tests::append_of(&node.signer, r)
    }

    /// A long scan lets go of the projection's lock between chunks: while the scan is under way
    /// the writer takes the lock, an append is published, and the scan goes on to see it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_scan_does_not_hold_off_the_writer() {
        let tmp = tempfile::tempdir().unwrap();
        let made = crate::init::init(&crate::init::InitOptions {
            dir: tmp.path().join("acme"),
            name: "acme".into(),
            parties: vec!["alice".into(), "bob".into()],
            listen: "127.0.0.1:0".into(),
            sans: vec![],
        })
        .unwrap();
        let config = crate::config::Config::load(&made.config).unwrap();
        let (clock, _manual) = Clock::manual(1_000);
        let node = crate::node::open(config, clock).await.unwrap().node;
        let appends = (0..6)
            .map(|i| append_of(&node, &request(&format!("c-{i}"))))
            .collect();
        for r in node.ledger.append_many(appends).await {
            assert!(r.unwrap().outcome.applied);
        }
        let rules = Visibility::new(&node.config);
        let filter = Filter {
            category: None,
            flag: None,
            needs: None,
            reader: None,
            access: Default::default(),
        };
        let n = node.clone();
        let handle = tokio::runtime::Handle::current();
        let seen = tokio::task::spawn_blocking(move || {
            let mut seen = Vec::new();
            filter
                .scan(&n, &rules, "", 2, |chunk| {
                    // The lock is free while the scan works on a chunk ...
                    assert!(n.projection.try_write().is_ok(), "scan holds the lock");
                    if seen.is_empty() {
                        // ... so the writer's publish goes through mid-scan.
                        let r = handle
                            .block_on(n.ledger.append(append_of(&n, &request("c-9"))))
                            .unwrap();
                        assert!(r.outcome.applied);
                    }
                    seen.extend(chunk.iter().map(|c| c.id.clone()));
                    true
                })
                .unwrap();
            seen
        })
        .await
        .unwrap();
        assert_eq!(seen, ["c-0", "c-1", "c-2", "c-3", "c-4", "c-5", "c-9"]);
    }
}
