//! Seed 003's envelope lifecycle, read from the seed's text (issue 29 item 4): the phases, the
//! terminal marks and the arrows of its state diagram, and the declaration (lifecycle events,
//! timeout, tick event), transcribed in `seed_tables/003_lifecycle.txt`. Every arrow the
//! diagram draws is taken by the kernel's machine (`accord_kernel::envelope`) on the event
//! its label names; every other event, in every phase, moves nothing — a lifecycle event the
//! diagram has no arrow for in that phase is refused (`terminal_state` where the seed marks the
//! phase terminal, `invalid_state` elsewhere). The expected values come from the seed file
//! only, never from `ENVELOPE_TRANSITIONS` or another kernel table.

mod common;
mod seed_tables;

use std::collections::{BTreeMap, BTreeSet};

use accord_kernel::envelope::*;
use accord_kernel::*;
use common::*;
use seed_tables as seed;

/// The participants (organisations) and the party answering for each; the coordinator is the
/// hub's party.
const PARTICIPANTS: [&str; 2] = ["buyer", "supplier"];
fn party_of(org: &str) -> Party {
    match org {
        "buyer" => Cast::o(),
        "supplier" => Cast::c(),
        _ => Cast::q(),
    }
}

/// What a record or tick stands for, in the seed's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Trigger {
    /// "start_action submitted".
    Start,
    /// "prepare_event emitted".
    Prepare,
    /// An ACK after which not every participant has ACKed.
    SomeAck,
    /// "all ACK": the ACK after which every participant has ACKed.
    AllAck,
    /// "any NACK".
    Nack,
    /// A tick after abort_after_seconds ("timeout fires during PREPARING").
    Timeout,
    /// A tick before abort_after_seconds.
    EarlyTick,
    /// prepared_event.
    Prepared,
    /// "commit event emitted".
    Commit,
    /// "abort event emitted".
    Abort,
}

impl Trigger {
    /// The trigger an arrow's label names (the seed's words).
    fn of_label(label: &str) -> Trigger {
        let l = label.to_ascii_lowercase();
        if l.contains("start_action") {
            Trigger::Start
        } else if l.contains("prepare_event") {
            Trigger::Prepare
        } else if l.contains("nack") {
            Trigger::Nack
        } else if l.contains("all ack") {
            Trigger::AllAck
        } else if l.contains("timeout") {
            Trigger::Timeout
        } else if l.contains("commit") {
            Trigger::Commit
        } else if l.contains("abort") {
            Trigger::Abort
        } else {
            panic!("no trigger for the label {label:?}")
        }
    }

    /// The four lifecycle events (emitted by the runtime, not answered by participants).
    fn lifecycle(self) -> Option<&'static str> {
        match self {
            Trigger::Prepare => Some("prepare_event"),
            Trigger::Prepared => Some("prepared_event"),
            Trigger::Commit => Some("commit_event"),
            Trigger::Abort => Some("abort_event"),
            _ => None,
        }
    }
}

/// One envelope driven record by record, remembering which lifecycle events it recorded.
#[derive(Clone)]
struct Run {
    types: BTreeMap<String, EnvelopeType>,
    access: Access,
    env: Option<Envelope>,
    now: i64,
    next: u64,
    /// Every record id applied (each new record names them all in basis, so a refusal is the
    /// state's, never a missing cause's).
    ids: Vec<RecordId>,
    /// The lifecycle fields recorded so far.
    recorded: BTreeSet<&'static str>,
    acked: BTreeSet<String>,
    nacked: bool,
    /// The participants that answered (ACK or NACK).
    voted: BTreeSet<String>,
    prepared_at: Option<i64>,
    effects: Vec<EnvelopeEffect>,
}

/// What the kernel did with one event.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Moved(String),
    Stayed,
    Refused(RejectionCode),
}

impl Run {
    fn new() -> Run {
        let ty = seed::envelope_type();
        Run {
            types: BTreeMap::from([(ty.name.clone(), ty)]),
            access: access(),
            env: None,
            now: T0,
            next: 9000,
            ids: Vec::new(),
            recorded: BTreeSet::new(),
            acked: BTreeSet::new(),
            nacked: false,
            voted: BTreeSet::new(),
            prepared_at: None,
            effects: Vec::new(),
        }
    }

    fn phase(&self) -> Option<String> {
        self.env.as_ref().map(|e| e.phase.wire_name().to_string())
    }

    fn record(&mut self, author: Party, event: &str, step: EnvelopeStep) -> Record {
        self.next += 1;
        Record {
            id: rid(self.next),
            author,
            commitment: String::new(),
            basis: self.ids.clone(),
            items: Vec::new(),
            op: Operation::Envelope(Box::new(EnvelopeOperation {
                envelope: "e-seed".into(),
                event: event.into(),
                step,
            })),
        }
    }

    fn seed_name(field: &str) -> String {
        seed::lifecycle_names()[field].clone()
    }

    /// The record (or tick) for `t`, by the party the seed has emit or answer it, and what the
    /// seed calls it; `who` picks the answering participant for votes.
    fn event(&mut self, t: Trigger, who: &str) -> Result<(), Rejection> {
        self.now += 1_000;
        let hub = Cast::q();
        let r = match t {
            Trigger::Start => self.record(
                hub,
                "",
                EnvelopeStep::Start(EnvelopeStart {
                    envelope_type: "budget_transfer".into(),
                    participants: PARTICIPANTS
                        .iter()
                        .map(|p| ParticipantChanges {
                            participant: (*p).into(),
                            changes: Vec::new(),
                        })
                        .collect(),
                }),
            ),
            Trigger::Prepare => self.record(
                hub,
                &Self::seed_name("prepare_event"),
                EnvelopeStep::Prepare,
            ),
            Trigger::Prepared => self.record(
                hub,
                &Self::seed_name("prepared_event"),
                EnvelopeStep::Prepared,
            ),
            Trigger::Commit => {
                self.record(hub, &Self::seed_name("commit_event"), EnvelopeStep::Commit)
            }
            Trigger::Abort => self.record(
                hub,
                &Self::seed_name("abort_event"),
                EnvelopeStep::Abort {
                    cause: AbortCause::Nack,
                },
            ),
            Trigger::SomeAck | Trigger::AllAck | Trigger::Nack => self.record(
                party_of(who),
                "",
                EnvelopeStep::Vote {
                    participant: who.into(),
                    vote: if t == Trigger::Nack {
                        Vote::Nack
                    } else {
                        Vote::Ack
                    },
                    reason: String::new(),
                },
            ),
            Trigger::Timeout | Trigger::EarlyTick => {
                let (secs, _) = seed::timeout();
                let since = self.prepared_at.unwrap_or(self.now);
                let ms = i64::try_from(secs).unwrap() * 1000;
                // Clear of the boundary either way ("within abort_after_seconds").
                let instant_time = if t == Trigger::Timeout {
                    since + ms + 1_000
                } else {
                    since + ms - 1_000
                };
                self.next += 1;
                let r = Record {
                    id: rid(self.next),
                    author: Cast::q(),
                    commitment: String::new(),
                    basis: Vec::new(),
                    items: Vec::new(),
                    op: Operation::Tick(Tick {
                        tick_id: format!("t{}", self.next),
                        instant_time,
                    }),
                };
                let a = apply_tick(self.env.as_ref().unwrap(), &r, &self.access, self.now)?;
                self.env = Some(a.next);
                self.effects = a.effects;
                self.ids.push(r.id);
                return Ok(());
            }
        };
        let a = apply_envelope(self.env.as_ref(), &self.types, &r, &self.access, self.now)?;
        self.env = Some(a.next);
        self.effects = a.effects;
        self.ids.push(r.id);
        if let Some(f) = t.lifecycle() {
            self.recorded.insert(f);
        }
        match t {
            Trigger::Prepare => {
                self.prepared_at.get_or_insert(self.now);
            }
            Trigger::SomeAck | Trigger::AllAck => {
                self.acked.insert(who.into());
            }
            Trigger::Nack => self.nacked = true,
            _ => {}
        }
        if matches!(t, Trigger::SomeAck | Trigger::AllAck | Trigger::Nack) {
            self.voted.insert(who.into());
        }
        Ok(())
    }

    /// Applies `t` and says what happened (the run is left as it was).
    fn try_event(&self, t: Trigger, who: &str) -> Outcome {
        let mut r = self.clone();
        let before = r.phase();
        match r.event(t, who) {
            Err(e) => Outcome::Refused(e.code),
            Ok(()) if r.phase() != before => Outcome::Moved(r.phase().unwrap()),
            Ok(()) => Outcome::Stayed,
        }
    }

    /// The trigger an ACK by `who` is, by the seed's words ("all ACK").
    fn ack_kind(&self, who: &str) -> Trigger {
        let mut after = self.acked.clone();
        after.insert(who.into());
        if !self.nacked && PARTICIPANTS.iter().all(|p| after.contains(*p)) {
            Trigger::AllAck
        } else {
            Trigger::SomeAck
        }
    }
}

/// Every envelope state the seed's diagram reaches, with the path taken to it.
fn states() -> Vec<(&'static str, Run)> {
    let mut out = Vec::new();
    let mut r = Run::new();
    r.event(Trigger::Start, "").unwrap();
    out.push(("after start", r.clone()));
    r.event(Trigger::Prepare, "").unwrap();
    out.push(("after prepare", r.clone()));
    let preparing = r.clone();
    r.event(Trigger::SomeAck, PARTICIPANTS[0]).unwrap();
    out.push(("after one ACK", r.clone()));
    r.event(Trigger::AllAck, PARTICIPANTS[1]).unwrap();
    out.push(("after all ACK", r.clone()));
    r.event(Trigger::Prepared, "").unwrap();
    out.push(("after prepared_event", r.clone()));
    r.event(Trigger::Commit, "").unwrap();
    out.push(("after commit", r.clone()));
    let mut n = preparing.clone();
    n.event(Trigger::Nack, PARTICIPANTS[1]).unwrap();
    out.push(("after a NACK", n.clone()));
    n.event(Trigger::Abort, "").unwrap();
    out.push(("after abort (NACK)", n));
    let mut t = preparing;
    t.event(Trigger::Timeout, "").unwrap();
    out.push(("after the timeout", t.clone()));
    t.event(Trigger::Abort, "").unwrap();
    out.push(("after abort (timeout)", t));
    out
}

#[test]
fn the_diagram_names_the_kernels_phases_and_terminals() {
    let seed_phases: BTreeSet<String> = seed::diagram_phases().into_iter().collect();
    assert_eq!(
        seed_phases.len(),
        6,
        "the seed's six boxes: {seed_phases:?}"
    );
    let kernel: BTreeSet<String> = Phase::ALL.iter().map(|p| p.wire_name().into()).collect();
    assert_eq!(
        kernel, seed_phases,
        "the kernel's phases are the diagram's boxes"
    );
    let terminal: BTreeSet<String> = seed::diagram_terminal().into_iter().collect();
    assert_eq!(terminal.len(), 2, "two (terminal) marks: {terminal:?}");
    for p in Phase::ALL {
        assert_eq!(
            p.is_terminal(),
            terminal.contains(p.wire_name()),
            "{p}: terminal as the diagram marks it"
        );
    }
    for a in seed::arrows() {
        assert!(seed_phases.contains(&a.to), "{a:?}");
        assert!(
            a.from.as_ref().is_none_or(|f| seed_phases.contains(f)),
            "{a:?}"
        );
    }
}

#[test]
fn the_seeds_declaration_is_a_valid_envelope_type() {
    let ty = seed::envelope_type();
    let issues = ty.validate(None);
    assert!(
        issues.is_empty(),
        "the seed's declaration is valid: {issues:?}"
    );
    // "If the tick fires every 30 seconds and your timeout is 30 seconds …": a warning only.
    let (secs, _) = seed::timeout();
    let at_timeout = ty.validate(Some(secs));
    assert_eq!(at_timeout.len(), 1, "{at_timeout:?}");
    assert_eq!(at_timeout[0].severity, Severity::Warning);
    assert!(ty.is_valid(Some(secs)));
}

/// Every arrow of the diagram is taken on the event its label names, from the phase it leaves,
/// and each lifecycle event is emitted as the seed's "Emitted by" column says, under the
/// declared name.
#[test]
fn every_arrow_the_seed_draws_is_taken() {
    let arrows = seed::arrows();
    assert!(arrows.len() >= 6, "{arrows:?}");
    let states = states();
    for a in &arrows {
        let t = Trigger::of_label(&a.label);
        let taken = match &a.from {
            None => {
                let r = Run::new();
                r.try_event(t, "") == Outcome::Moved(a.to.clone())
            }
            Some(from) => states.iter().any(|(_, r)| {
                r.phase().as_deref() == Some(from.as_str())
                    && (t != Trigger::AllAck || r.ack_kind(PARTICIPANTS[1]) == Trigger::AllAck)
                    && r.try_event(t, PARTICIPANTS[1]) == Outcome::Moved(a.to.clone())
            }),
        };
        assert!(taken, "the seed's arrow {a:?} is taken by the kernel");
    }
    // "Emitted by": start_action emits prepare_event; all ACK → prepared_event; after
    // prepared_event → commit_event; NACK or timeout → abort_event.
    let by = seed::emitted_by();
    assert!(by["prepare_event"].contains("start_action"));
    assert!(by["prepared_event"].contains("all participants ACK"));
    assert!(by["commit_event"].contains("after `prepared_event`"));
    assert!(by["abort_event"].contains("NACK or timeout"));
    let emitted = |r: &Run| -> Vec<String> {
        r.effects
            .iter()
            .map(|EnvelopeEffect::Emit { event, .. }| event.clone())
            .collect()
    };
    let name = Run::seed_name;
    for (label, r) in &states {
        let want: Vec<String> = match *label {
            "after start" => vec![name("prepare_event")],
            "after all ACK" => vec![name("prepared_event")],
            "after prepared_event" => vec![name("commit_event")],
            "after a NACK" | "after the timeout" => vec![name("abort_event")],
            _ => vec![],
        };
        assert_eq!(emitted(r), want, "{label}: what the runtime emits next");
    }
}

/// No event moves an envelope along an arrow the diagram does not draw; a lifecycle event not
/// yet recorded, in a phase the diagram gives it no arrow from, is refused.
#[test]
fn every_move_the_seed_does_not_draw_is_refused() {
    let arrows = seed::arrows();
    let terminal: BTreeSet<String> = seed::diagram_terminal().into_iter().collect();
    let allowed: BTreeSet<(Trigger, String, String)> = arrows
        .iter()
        .filter_map(|a| Some((Trigger::of_label(&a.label), a.from.clone()?, a.to.clone())))
        .collect();
    let all = [
        Trigger::Prepare,
        Trigger::SomeAck,
        Trigger::Nack,
        Trigger::Timeout,
        Trigger::EarlyTick,
        Trigger::Prepared,
        Trigger::Commit,
        Trigger::Abort,
    ];
    let mut checked = 0;
    for (label, r) in states() {
        let from = r.phase().unwrap();
        for t0 in all {
            for who in PARTICIPANTS {
                // An ACK is "all ACK" when the seed's words make it so.
                let t = if t0 == Trigger::SomeAck {
                    r.ack_kind(who)
                } else {
                    t0
                };
                let got = r.try_event(t, who);
                // A participant answering again is no "ACK" or "NACK" of the diagram's.
                let again = matches!(t, Trigger::SomeAck | Trigger::AllAck | Trigger::Nack)
                    && r.voted.contains(who);
                let arrow = allowed
                    .iter()
                    .filter(|_| !again)
                    .find(|(at, af, _)| *at == t && *af == from)
                    .map(|(_, _, to)| to.clone());
                // commit_event comes "after `prepared_event`" (seed, "Emitted by").
                let arrow =
                    arrow.filter(|_| t != Trigger::Commit || r.recorded.contains("prepared_event"));
                let what = format!("{label} ({from}), {t:?} by {who}: {got:?}");
                match (&arrow, t.lifecycle()) {
                    (Some(to), _) => assert_eq!(got, Outcome::Moved(to.clone()), "{what}"),
                    // prepared_event once every participant ACKed: emitted, no arrow of its own.
                    (None, Some("prepared_event"))
                        if from == "COMMITTING" && !r.recorded.contains("prepared_event") =>
                    {
                        assert_eq!(got, Outcome::Stayed, "{what}")
                    }
                    (None, Some(field)) if !r.recorded.contains(field) => {
                        let code = if terminal.contains(&from) {
                            RejectionCode::TerminalState
                        } else {
                            RejectionCode::InvalidState
                        };
                        assert_eq!(got, Outcome::Refused(code), "{what}");
                    }
                    // A vote, a tick, or a lifecycle event delivered again: nothing moves.
                    (None, _) => assert!(!matches!(got, Outcome::Moved(_)), "{what}"),
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 10 * 8 * 2);
}
