//! Executor claims and the three axes they drive (seed 000, "Other state axes": "Execution,
//! control and liveness come from executor or external Claims. 'Stopped' appears on the
//! execution axis only when the executor confirms it").
//!
//! * An `observation` is authored by the executor (a party of the obligor's organisation) or by
//!   an external claimant (a party Access grants `Observer` for the obligor's organisation);
//!   anyone else is refused `wrong_role`. Each one is a heartbeat. An executor may declare a heartbeat interval: liveness is `stale` once
//!   `now` is later than its last heartbeat plus that interval — derived from `now`, no record.
//! * Execution is the latest execution claimed, except while a stop holds: then it is `stopped`
//!   (or `paused` for a pause) only once the executor confirmed it after the request, and
//!   `unknown` until then. An external state the executor cannot map makes execution `unknown`.
//!   Only the executor confirms a stop; an external claimant's `stopped` shows `unknown`.
//! * Executor and external claims weigh alike otherwise: every present claimant's latest
//!   execution claim must agree, else the `contradiction` flag is raised and execution is
//!   `unknown`; liveness looks at every present claimant's heartbeat.
//! * Control is manual (with the holder) while a control lease is held, intervened after control
//!   was handed back until the re-check, otherwise the latest control claimed, or not declared.

use serde::{Deserialize, Serialize};

use crate::commitment::{Commitment, ExecutorState, HandoverPhase, StopState};
use crate::ctx::Ctx;
use crate::record::{ControlReport, ExecutionReport, Operation, Party, StopMode};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};

macro_rules! axis {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $v:ident => $w:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $v,)+ }
        impl $name {
            /// Every value, in the seed's order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            /// The wire name.
            pub const fn wire_name(self) -> &'static str {
                match self { $($name::$v => $w,)+ }
            }
        }
    };
}

axis!(
    /// The execution axis.
    Execution {
        /// Not started.
        NotStarted => "not_started",
        /// Running.
        Running => "running",
        /// Paused.
        Paused => "paused",
        /// Completed (reported).
        Completed => "completed_reported",
        /// Failed.
        Failed => "failed",
        /// Cancelled (reported).
        Cancelled => "cancelled_reported",
        /// Unknown.
        Unknown => "unknown",
        /// Stopped: only when the executor confirmed a stop.
        Stopped => "stopped",
    }
);

axis!(
    /// The control axis.
    Control {
        /// automatic
        Automatic => "automatic",
        /// intervened
        Intervened => "intervened",
        /// manual
        Manual => "manual",
        /// No control capability declared.
        NotDeclared => "not_declared",
    }
);

axis!(
    /// The liveness axis.
    Liveness {
        /// live
        Live => "live",
        /// stale
        Stale => "stale",
        /// unknown
        Unknown => "unknown",
        /// left cleanly
        LeftCleanly => "left_cleanly",
        /// not applicable
        NotApplicable => "not_applicable",
    }
);

fn mapped(r: ExecutionReport) -> Execution {
    match r {
        ExecutionReport::NotStarted => Execution::NotStarted,
        ExecutionReport::Running => Execution::Running,
        ExecutionReport::Paused => Execution::Paused,
        ExecutionReport::Completed => Execution::Completed,
        ExecutionReport::Failed => Execution::Failed,
        ExecutionReport::Cancelled => Execution::Cancelled,
        ExecutionReport::Stopped => Execution::Stopped,
        ExecutionReport::Unspecified | ExecutionReport::Unknown(_) => Execution::Unknown,
    }
}

/// observation: records the executor's claim (its author is the executor).
pub(crate) fn observe(ctx: &Ctx, next: &mut Commitment) -> Result<(), Rejection> {
    let Operation::Observation(o) = &ctx.r.op else {
        unreachable!()
    };
    if let ExecutionReport::Unknown(n) = o.execution {
        return reject(C::Malformed, format!("execution {n}"));
    }
    if let ControlReport::Unknown(n) = o.control {
        return reject(C::Malformed, format!("control {n}"));
    }
    ensure(
        o.heartbeat_interval_ms.is_none_or(|i| i > 0),
        C::Malformed,
        "the heartbeat interval must be positive",
    )?;
    let seq = ctx.c.history.len();
    let author = &ctx.r.author;
    // The role table admitted the author as the executor or as an external claimant; which one
    // it is decides whether its `stopped` confirms a stop.
    let external = !crate::roles::holds(ctx, crate::rules::Role::Executor);
    let idx = match next.executors.iter().position(|e| e.executor == *author) {
        Some(i) => i,
        None => {
            next.executors.push(ExecutorState {
                executor: author.clone(),
                last_record: ctx.r.id,
                last_seen: ctx.now,
                heartbeat_interval_ms: None,
                execution: None,
                control: None,
                left_cleanly: false,
                unmapped_state: None,
                checkpoint: None,
                seq,
                external,
            });
            next.executors.len() - 1
        }
    };
    let e = &mut next.executors[idx];
    e.last_record = ctx.r.id;
    e.last_seen = ctx.now;
    e.seq = seq;
    e.external = external;
    e.left_cleanly = o.left_cleanly;
    if o.heartbeat_interval_ms.is_some() {
        e.heartbeat_interval_ms = o.heartbeat_interval_ms;
    }
    if o.execution != ExecutionReport::Unspecified {
        e.execution = Some((o.execution, ctx.r.id, seq));
        e.unmapped_state = None;
    } else if !o.external_state.trim().is_empty() {
        e.unmapped_state = Some(o.external_state.clone());
    }
    if o.control != ControlReport::Unspecified {
        e.control = Some(o.control);
    }
    if !o.checkpoint.trim().is_empty() {
        e.checkpoint = Some((o.checkpoint.clone(), ctx.r.id, seq));
    }
    // A report that execution is anything but not started (or a state the executor cannot
    // map) begins the work of every item in its work phase (the category's ready row).
    let begins = !matches!(
        o.execution,
        ExecutionReport::Unspecified | ExecutionReport::NotStarted
    ) || (o.execution == ExecutionReport::Unspecified
        && !o.external_state.trim().is_empty());
    if begins {
        for w in next.items.values_mut().filter_map(|i| i.work.as_mut()) {
            w.begun = true;
        }
    }
    // The executor's confirmation of the stop that holds (seed 000, "Stop requests":
    // "executor confirmation (an observation Claim) ──► execution axis shows stopped"); an
    // external claimant's never confirms it.
    if !external
        && let Some(st) = next.stop.as_mut().filter(|s| s.in_effect())
        && st.confirmed.is_none()
        && (o.execution == ExecutionReport::Stopped
            || (st.mode == StopMode::Pause && o.execution == ExecutionReport::Paused))
    {
        st.confirmed = Some((ctx.r.id, seq));
    }
    Ok(())
}

/// Whether a claim at history position `seq` was made after `since` (every claim counts for
/// `None`). The summary category reads an item's claims from its work phase on
/// ([`crate::commitment::WorkPhase`]): what an executor said, or stopped saying, about an
/// earlier attempt does not describe this one.
fn after(seq: usize, since: Option<usize>) -> bool {
    since.is_none_or(|s| seq > s)
}

/// The latest execution claim across claimants (by record order), made after `since`. An
/// external claimant's `stopped` counts as `unknown`: "'Stopped' appears on the execution axis
/// only when the executor confirms it" (seed 000).
fn latest(c: &Commitment, since: Option<usize>) -> Option<(ExecutionReport, usize)> {
    c.executors
        .iter()
        .filter_map(|e| {
            e.execution.map(|(r, _, seq)| match r {
                ExecutionReport::Stopped if e.external => (ExecutionReport::Unspecified, seq),
                r => (r, seq),
            })
        })
        .filter(|(_, seq)| after(*seq, since))
        .max_by_key(|(_, seq)| *seq)
}

/// The stop request that holds, if it was made after `since`.
fn stop_in_effect(c: &Commitment, since: Option<usize>) -> Option<&StopState> {
    c.stop
        .as_ref()
        .filter(|s| s.in_effect() && after(s.seq, since))
}

/// Whether an executor confirmed the stop: it claimed `stopped` (or `paused`, for a pause)
/// after the stop request.
pub fn stop_confirmed(c: &Commitment) -> bool {
    c.stop.as_ref().is_some_and(|st| st.confirmed.is_some())
}

/// Whether the executor reported a checkpoint after the stop request (seed 000, "Control
/// handover": "pause request → executor confirmation or checkpoint → control_lease"; control is
/// taken from the executor, so an external claimant's checkpoint does not stand in for it).
pub fn checkpoint_since_stop(c: &Commitment) -> bool {
    let Some(st) = &c.stop else { return false };
    c.executors.iter().filter(|e| !e.external).any(|e| {
        e.checkpoint
            .as_ref()
            .is_some_and(|(_, _, seq)| *seq > st.seq)
    })
}

/// Work claimed running after a confirmed stop that was never resumed: two claims that cannot
/// both hold.
fn running_after_stop(c: &Commitment, since: Option<usize>) -> bool {
    let Some((_, confirmed_at)) = stop_in_effect(c, since).and_then(|s| s.confirmed) else {
        return false;
    };
    latest(c, since).is_some_and(|(r, seq)| r == ExecutionReport::Running && seq > confirmed_at)
}

/// The execution axis.
pub fn execution(c: &Commitment) -> Execution {
    execution_since(c, None)
}

/// The execution axis over the claims made after history position `since`.
pub fn execution_since(c: &Commitment, since: Option<usize>) -> Execution {
    if contradiction_since(c, since) {
        return Execution::Unknown;
    }
    if let Some(st) = stop_in_effect(c, since) {
        if st.confirmed.is_none() {
            return Execution::Unknown;
        }
        return if st.mode == StopMode::Pause
            && latest(c, since).is_some_and(|(r, _)| r == ExecutionReport::Paused)
        {
            Execution::Paused
        } else {
            Execution::Stopped
        };
    }
    if c.executors
        .iter()
        .any(|e| e.unmapped_state.is_some() && after(e.seq, since))
    {
        return Execution::Unknown;
    }
    latest(c, since).map_or(Execution::NotStarted, |(r, _)| mapped(r))
}

/// Two executors' latest execution claims about the same work disagree, or work was claimed
/// running after a confirmed stop.
pub fn contradiction(c: &Commitment) -> bool {
    contradiction_since(c, None)
}

fn contradiction_since(c: &Commitment, since: Option<usize>) -> bool {
    let claims: Vec<ExecutionReport> = c
        .executors
        .iter()
        .filter(|e| !e.left_cleanly)
        .filter_map(|e| e.execution)
        .filter(|(_, _, seq)| after(*seq, since))
        .map(|(r, _, _)| r)
        .collect();
    let disagree = claims.windows(2).any(|w| w[0] != w[1]);
    disagree || running_after_stop(c, since)
}

/// The control axis and the control lease holder.
pub fn control(c: &Commitment) -> (Control, Option<Party>) {
    if let Some(h) = &c.handover {
        return match h.phase {
            HandoverPhase::Leased => (Control::Manual, Some(h.holder.clone())),
            HandoverPhase::HandedBack => (Control::Intervened, None),
        };
    }
    let last = c
        .executors
        .iter()
        .filter(|e| e.control.is_some())
        .max_by_key(|e| e.seq)
        .and_then(|e| e.control);
    match last {
        Some(ControlReport::Automatic) => (Control::Automatic, None),
        Some(ControlReport::Intervened) => (Control::Intervened, None),
        Some(ControlReport::Manual) => (Control::Manual, None),
        _ => (Control::NotDeclared, None),
    }
}

/// The liveness axis at `now`: not applicable without executors; otherwise stale if any
/// executor that has not left missed its heartbeat interval, unknown if one declared none,
/// left cleanly if all left, else live.
pub fn liveness(c: &Commitment, now: i64) -> Liveness {
    liveness_since(c, None, now)
}

/// The liveness axis at `now` over the executors heard from after history position `since`.
pub fn liveness_since(c: &Commitment, since: Option<usize>, now: i64) -> Liveness {
    let heard: Vec<&ExecutorState> = c.executors.iter().filter(|e| after(e.seq, since)).collect();
    if heard.is_empty() {
        return Liveness::NotApplicable;
    }
    let present: Vec<&&ExecutorState> = heard.iter().filter(|e| !e.left_cleanly).collect();
    if present.is_empty() {
        return Liveness::LeftCleanly;
    }
    let stale = present.iter().any(|e| {
        e.heartbeat_interval_ms
            .is_some_and(|i| now > e.last_seen.saturating_add(i))
    });
    if stale {
        Liveness::Stale
    } else if present.iter().any(|e| e.heartbeat_interval_ms.is_none()) {
        Liveness::Unknown
    } else {
        Liveness::Live
    }
}
