//! When the Work service party next has work on a commitment (issue 15, item 3): the key of the
//! commitment in the deadline index (`pj_due`), so that a clock tick reads only what is due
//! instead of scanning every open commitment.
//!
//! The kernel's `due_work` (seed 000, "Records written by the Work service") is a step function
//! of time: each action becomes due when `now` reaches one of the commitment's own times (a
//! deferral's return, a claim's lease end, an item's validity end, a stated item's implicit
//! window end, a gate's deadline) and stays due until a record changes the commitment, which
//! recomputes its key. So the earliest time with work is the first of those times (or the
//! record's own time) at which `due_work` answers something — asked of the kernel itself, so
//! the index never disagrees with what a tick then writes.

use accord_kernel as k;

/// The earliest time at or after `now` at which the Work service party has work on `c`: now if
/// a produced promise is still to be written; `None` when nothing will ever be due without a
/// new record (closed, or no timed rule applies).
pub fn next_due(c: &k::Commitment, promise_due: bool, now: i64) -> Option<i64> {
    if c.is_closed() {
        return None;
    }
    if promise_due {
        return Some(now);
    }
    let mut times = vec![now];
    times.extend(c.deferral.as_ref().and_then(|d| d.return_at));
    times.extend(c.claim.as_ref().and_then(|cl| cl.lease_until));
    for it in c.items.values() {
        times.extend(it.validity.map(|v| v.until));
        if let (Some(w), Some(s)) = (c.implicit_window_ms, &it.statement) {
            times.push(s.at.saturating_add(w));
        }
    }
    times.extend(c.conditions.iter().filter_map(|oc| oc.condition.deadline));
    times.sort_unstable();
    times.dedup();
    times
        .into_iter()
        .filter(|t| *t >= now)
        .find(|t| !k::due_work(c, *t).is_empty())
}
