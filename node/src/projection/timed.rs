//! What a watch needs from the writer (issue 27, item 3): which commitments' summaries a batch
//! changed, for the change feed ([`super::feed`]), and when a commitment's summary next changes
//! by time alone, for the time index (`pj_timed`).
//!
//! A summary (`CommitmentSummary`: state, category, flags, whose move, assignment, execution,
//! control, liveness, obligee, obligor) depends on time only through four kernel functions —
//! `category`, `flags`, `assignment` and `liveness` — and those compare `now` with a handful of
//! the commitment's own times: the terms' due time (overdue), each executor's last heartbeat
//! plus its interval (stale), a claim's lease end and a queue's start deadline (assignment), a
//! gate's deadline (waiting). So, between two records, the summary is a step function of time
//! whose steps can only be at those times (or one millisecond after, for a strict `>`):
//! [`change_points`] asks the kernel at each such candidate whether the summary differs from a
//! millisecond before, so the index never names a time at which nothing changes, and it is a
//! function of the commitment alone (a record's change deletes exactly the old points).
//!
//! Chosen over re-evaluating, on each tick, every commitment a watcher was sent (which needs a
//! per-watcher map that grows with what it matched): a tick now reads only the index entries
//! that came due since the last one, O(changes), for each watcher.

use accord_kernel as k;

/// The parts of a commitment's summary, as the kernel derives them at `now`.
#[derive(Debug, PartialEq)]
pub struct SummaryKey {
    state: Option<k::State>,
    category: k::Category,
    flags: Vec<k::Flag>,
    moves: Vec<k::Move>,
    assignment: k::Assignment,
    execution: k::Execution,
    control: k::Control,
    liveness: k::Liveness,
    obligee: k::Party,
    obligor: Option<k::Party>,
    offered_to: Option<k::Party>,
}

/// The summary of `c` at `now`, in kernel terms (cheaper than the wire view: no items, gates,
/// revokes or history).
pub fn summary_key(c: &k::Commitment, now: i64, access: &k::Access) -> SummaryKey {
    SummaryKey {
        state: c.state(),
        category: k::view::category(c, now),
        flags: k::view::flags(c, now),
        moves: k::view::whose_move(c, access),
        assignment: k::assignment(c, now),
        execution: k::claims::execution(c),
        control: k::claims::control(c).0,
        liveness: k::claims::liveness(c, now),
        obligee: c.obligee.clone(),
        obligor: c.obligor.clone(),
        offered_to: c.offered_to.clone(),
    }
}

/// The time-dependent parts only.
fn timed_key(c: &k::Commitment, t: i64) -> (k::Category, Vec<k::Flag>, k::Assignment, k::Liveness) {
    (
        k::view::category(c, t),
        k::view::flags(c, t),
        k::assignment(c, t),
        k::claims::liveness(c, t),
    )
}

/// Every time at which `c`'s summary changes by time alone (no record), ascending: the
/// candidates of the module doc, each kept only if the kernel's answer at it differs from the
/// answer a millisecond before.
pub fn change_points(c: &k::Commitment) -> Vec<i64> {
    let mut raw: Vec<i64> = Vec::new();
    raw.extend(c.terms.due);
    raw.extend(c.claim.as_ref().and_then(|cl| cl.lease_until));
    raw.extend(c.queue.as_ref().and_then(|q| q.queue.start_deadline));
    raw.extend(c.conditions.iter().filter_map(|oc| oc.condition.deadline));
    raw.extend(c.executors.iter().filter_map(|e| {
        e.heartbeat_interval_ms
            .map(|i| e.last_seen.saturating_add(i))
    }));
    let mut candidates: Vec<i64> = raw
        .into_iter()
        .flat_map(|t| [t, t.saturating_add(1)])
        .filter(|t| *t > i64::MIN)
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    candidates
        .into_iter()
        .filter(|t| timed_key(c, *t) != timed_key(c, t - 1))
        .collect()
}

/// `pj_timed` key: the time (u64 BE; times before the epoch sort first) ‖ commitment id.
pub fn key(t: i64, id: &str) -> Vec<u8> {
    super::store::due_key(t, id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use accord_proto::pb::record::v1 as rec;

    /// A request with a due time, as the kernel derives it.
    fn requested(due: Option<i64>) -> k::Commitment {
        let mut r = crate::projection::tests::request("c-1");
        if let Some(rec::record::Operation::Request(q)) = &mut r.operation {
            q.terms.as_mut().unwrap().due_unix_ms = due.unwrap_or(0);
        }
        let record = crate::convert::record_from_pb([7; 32], &r).unwrap();
        let access = k::Access::new(k::Party::new("acme", "work-service"))
            .with_members("acme", ["alice".to_string(), "bob".to_string()]);
        k::apply(None, &record, &access, 1).unwrap().0
    }

    #[test]
    fn a_due_time_is_a_change_point_and_nothing_else_is() {
        let c = requested(Some(5_000));
        // Requested (before a statement): overdue from 5,001, the kernel says.
        assert!(!k::view::flags(&c, 5_000).contains(&k::Flag::Overdue));
        assert!(k::view::flags(&c, 5_001).contains(&k::Flag::Overdue));
        assert_eq!(change_points(&c), [5_001]);
        assert!(change_points(&requested(None)).is_empty());
    }
}
