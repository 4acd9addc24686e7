//! `ListCommitments` and `WatchCommitments` (issue 11, item 8): commitment summaries filtered by
//! summary category, flag and "what needs me", under the visibility rules of
//! [`super::visibility`] (a party sees only the commitments it may read).

use super::visibility::Visibility;
use crate::auth::Caller;
use crate::error::Error;
use crate::node::Node;
use crate::projection::{CommitmentRef, Projection};
use accord_kernel as k;
use accord_proto::pb::record::v1::PartyRef;
use accord_proto::pb::work::v1 as pb;
use std::collections::HashMap;
use std::sync::Arc;

/// Default and largest page sizes.
pub const DEFAULT_PAGE: usize = 100;
/// Largest page a client may ask for.
pub const MAX_PAGE: usize = 1000;
/// Stored commitments read per step of a listing.
const CHUNK: usize = 256;
/// Most stored commitments one `ListCommitments` page looks at (a filtered page may be short).
const SCAN_MAX: usize = 16 * 1024;

/// A validated `ListCommitmentsRequest` filter.
#[derive(Debug, Clone)]
pub struct Filter {
    category: Option<String>,
    flag: Option<String>,
    needs: Option<k::Party>,
    /// The caller as a party; `None` for the operator (reads everything).
    reader: Option<k::Party>,
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
        Ok(Filter {
            category,
            flag,
            needs,
            reader,
        })
    }

    /// Whether the reader (and the party asked about) may read `c`.
    fn visible(&self, p: &Projection, rules: &Visibility, c: &k::Commitment) -> bool {
        [&self.reader, &self.needs]
            .into_iter()
            .flatten()
            .all(|who| rules.may_read(p, who, &c.id))
    }

    /// Up to `max` commitments after `after` (id order) read from the store, with those the
    /// reader (and the party asked about) may read; `None` when the store has no more.
    pub fn chunk(
        &self,
        node: &Node,
        rules: &Visibility,
        after: &str,
        max: usize,
    ) -> Result<Option<(String, Vec<CommitmentRef>)>, Error> {
        let p = node
            .projection
            .read()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?;
        let all = p.commitments_after(after, max);
        let Some(last) = all.last().map(|c| c.id.clone()) else {
            return Ok(None);
        };
        Ok(Some((
            last,
            all.into_iter()
                .filter(|c| self.visible(&p, rules, c))
                .collect(),
        )))
    }

    /// Every commitment after `after` (id order) that the reader (and the party asked about)
    /// may read, read from the store chunk by chunk.
    pub fn candidates(
        &self,
        node: &Node,
        rules: &Visibility,
        after: &str,
    ) -> Result<Vec<CommitmentRef>, Error> {
        let mut after = after.to_string();
        let mut out = Vec::new();
        while let Some((last, cs)) = self.chunk(node, rules, &after, CHUNK)? {
            out.extend(cs);
            after = last;
        }
        Ok(out)
    }

    /// The summary of `c` at `now` if it passes the filter.
    pub fn summary(&self, c: &k::Commitment, now: i64) -> Option<pb::CommitmentSummary> {
        let v = crate::view::to_pb(c, now);
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
    // Pages through `pj_commitments` in id order (issue 15): at most SCAN_MAX stored
    // commitments are looked at per page; a page cut short there still carries a token.
    let (mut after, mut scanned) = (after, 0usize);
    'pages: while let Some((last_read, cs)) = filter.chunk(node, rules, &after, CHUNK)? {
        for c in cs {
            if out.commitments.len() == size {
                // More remain: the next page starts after the last one looked at.
                out.next_page_token = token_of(&after);
                break 'pages;
            }
            after = c.id.clone();
            if let Some(s) = filter.summary(&c, now) {
                out.commitments.push(s);
            }
        }
        after = last_read;
        scanned += CHUNK;
        if scanned >= SCAN_MAX && out.commitments.len() < size {
            out.next_page_token = token_of(&after);
            break;
        }
    }
    Ok(out)
}

/// The watch loop of `WatchCommitments`: sends each matching summary once, then again whenever
/// it changes. It wakes when the ledger grows (a record was published) and on each Work service
/// clock tick (flags and axes also change with time). Ends when the client goes away.
pub async fn watch(
    node: Arc<Node>,
    rules: Arc<Visibility>,
    filter: Filter,
    tx: tokio::sync::mpsc::Sender<Result<pb::CommitmentSummary, tonic::Status>>,
) {
    let mut len = node.ledger.watch_len();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(
        node.config.clock.tick_ms.max(1),
    ));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent: HashMap<String, pb::CommitmentSummary> = HashMap::new();
    let mut first = true;
    loop {
        let scan = {
            let (node, rules, filter) = (node.clone(), rules.clone(), filter.clone());
            tokio::task::spawn_blocking(move || {
                let now = node.clock.now_ms();
                filter.candidates(&node, &rules, "").map(|cs| {
                    cs.iter()
                        .filter_map(|c| filter.summary(c, now))
                        .collect::<Vec<_>>()
                })
            })
            .await
        };
        let summaries = match scan {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                let _ = tx.send(Err(e.into())).await;
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, "watch scan failed");
                let _ = tx.send(Err(Error::Internal(e.to_string()).into())).await;
                return;
            }
        };
        for mut s in summaries {
            if sent.get(&s.commitment_id) == Some(&s) {
                continue;
            }
            sent.insert(s.commitment_id.clone(), s.clone());
            s.change = if first { "initial" } else { "changed" }.into();
            if tx.send(Ok(s)).await.is_err() {
                return;
            }
        }
        first = false;
        tokio::select! {
            _ = tx.closed() => return,
            r = len.changed() => if r.is_err() { return },
            _ = tick.tick() => {}
        }
    }
}
