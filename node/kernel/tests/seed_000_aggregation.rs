//! Seed 000's multi-party aggregation, read from the seed's text (issue 29 item 4): the answer
//! table ("Counts as acceptance?") and the policy table (satisfied / becomes unsatisfiable),
//! transcribed in `seed_tables/000_aggregation.txt`. The expected status of a gate comes from
//! [`oracle`], a reading of the seed's rows written here, each branch quoting the row it reads
//! (checked against the file), never from the kernel's `aggregate()` or `threshold()`.

mod common;
mod seed_tables;

use std::collections::BTreeSet;

use accord_kernel::gates::aggregate;
use accord_kernel::*;
use common::*;
use proptest::prelude::*;
use seed_tables as seed;

/// The rows the oracle reads, quoted from the seed: (policy, satisfied, becomes
/// unsatisfiable). `the_oracle_reads_the_seeds_rows` holds them to the transcription.
const ROWS: [(&str, &str, &str); 6] = [
    (
        "All",
        "All N accepted",
        "Any rejection, timeout or close without an answer",
    ),
    (
        "Any",
        "The first acceptance",
        "All closed with something other than acceptance",
    ),
    (
        "K of N",
        "K acceptances",
        "Open participants can no longer reach K",
    ),
    (
        "Sequential",
        "The current participant accepted and the sequence is finished; the next request opens only after the previous acceptance",
        "Any non-acceptance in sequence",
    ),
    (
        "Percentage",
        "Acceptances ≥ ⌈N × p⌉",
        "The rest can no longer reach the threshold",
    ),
    (
        "Any rejection rejects",
        "Added to another policy",
        "Any rejection",
    ),
];

/// The seed's answers ("Conditions and gates").
const ACCEPT: &str = "Accept";
const REJECT: &str = "Reject";
const CLOSED: &str = "Closed without an answer";
const TIMED_OUT: &str = "Timed out";

/// Where a participant stands, in the seed's words: its request open, or closed with one of
/// the seed's answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stand {
    Open,
    Closed(&'static str),
}

/// A policy row of the seed, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    All,
    Any,
    KOfN(usize),
    Sequential,
    /// p in percent.
    Percentage(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SeedPolicy {
    policy: Policy,
    /// "Any rejection rejects — Added to another policy".
    any_rejection_rejects: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Waiting,
    Satisfied,
    Unsatisfiable,
    /// Both columns hold at once: the seed's table does not say which wins (only the time
    /// order does: the first decision closes the rest).
    Both,
}

/// The seed's table read over a set of standings (participant order matters only for
/// Sequential).
fn oracle(sp: &SeedPolicy, stands: &[Stand]) -> Verdict {
    let counts = seed::answer_counts();
    let n = stands.len();
    let accepted = stands
        .iter()
        .filter(|s| matches!(s, Stand::Closed(a) if counts[*a]))
        .count();
    let not_accepted = stands
        .iter()
        .filter(|s| matches!(s, Stand::Closed(a) if !counts[*a]))
        .count();
    let open = stands.iter().filter(|s| **s == Stand::Open).count();
    let rejections = stands
        .iter()
        .filter(|s| **s == Stand::Closed(REJECT))
        .count();
    let (satisfied, mut unsatisfiable) = match sp.policy {
        // "All N accepted" / "Any rejection, timeout or close without an answer".
        Policy::All => (accepted == n, not_accepted > 0),
        // "The first acceptance" / "All closed with something other than acceptance".
        Policy::Any => (accepted >= 1, open == 0 && not_accepted == n),
        // "K acceptances" / "Open participants can no longer reach K".
        Policy::KOfN(k) => (accepted >= k, accepted + open < k),
        // "The current participant accepted and the sequence is finished" / "Any
        // non-acceptance in sequence".
        Policy::Sequential => (accepted == n, not_accepted > 0),
        // "Acceptances ≥ ⌈N × p⌉" / "The rest can no longer reach the threshold".
        Policy::Percentage(p) => {
            let threshold = (n as f64 * f64::from(p) / 100.0).ceil() as usize;
            (accepted >= threshold, accepted + open < threshold)
        }
    };
    // "Any rejection rejects": "Any rejection".
    if sp.any_rejection_rejects && rejections > 0 {
        unsatisfiable = true;
    }
    match (satisfied, unsatisfiable) {
        (true, true) => Verdict::Both,
        (true, false) => Verdict::Satisfied,
        (false, true) => Verdict::Unsatisfiable,
        (false, false) => Verdict::Waiting,
    }
}

/// The kernel's form of a seed policy.
fn kernel_policy(sp: &SeedPolicy) -> Aggregation {
    let (rule, k, percent) = match sp.policy {
        Policy::All => (AggregationRule::All, 0, 0),
        Policy::Any => (AggregationRule::Any, 0, 0),
        Policy::KOfN(k) => (AggregationRule::KOfN, k as u32, 0),
        Policy::Sequential => (AggregationRule::Sequential, 0, 0),
        Policy::Percentage(p) => (AggregationRule::Percentage, 0, p),
    };
    Aggregation {
        rule,
        k,
        percent,
        any_rejection_rejects: sp.any_rejection_rejects,
    }
}

fn kernel_verdict(s: GateStatus) -> Verdict {
    match s {
        GateStatus::Waiting => Verdict::Waiting,
        GateStatus::Satisfied => Verdict::Satisfied,
        GateStatus::Unsatisfiable => Verdict::Unsatisfiable,
    }
}

/// The kernel's standings for the seed's (Sequential: a request after the current one has
/// not opened yet).
fn kernel_standings(sp: &SeedPolicy, stands: &[Stand]) -> Vec<Participation> {
    let mut previous_accepted = true;
    stands
        .iter()
        .map(|s| {
            let k = match s {
                Stand::Open if sp.policy == Policy::Sequential && !previous_accepted => {
                    Participation::NotYetOpen
                }
                Stand::Open => Participation::Open,
                Stand::Closed(ACCEPT) => Participation::Accepted,
                Stand::Closed(REJECT) => Participation::Rejected,
                Stand::Closed(CLOSED) => Participation::ClosedWithoutAnswer,
                Stand::Closed(TIMED_OUT) => Participation::TimedOut,
                Stand::Closed(other) => panic!("no such answer {other:?}"),
            };
            previous_accepted = *s == Stand::Closed(ACCEPT);
            k
        })
        .collect()
}

/// Every policy the seed's rows make for `n` participants.
fn policies_for(n: usize) -> Vec<SeedPolicy> {
    let mut base = vec![Policy::All, Policy::Any, Policy::Sequential];
    base.extend((1..=n).map(Policy::KOfN));
    base.extend([1, 25, 33, 34, 50, 66, 67, 99, 100].map(Policy::Percentage));
    base.into_iter()
        .flat_map(|policy| {
            [false, true].map(|any_rejection_rejects| SeedPolicy {
                policy,
                any_rejection_rejects,
            })
        })
        .collect()
}

#[test]
fn the_oracle_reads_the_seeds_rows() {
    let rows = seed::policies();
    let ours: Vec<(String, String, String)> = ROWS
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(
        rows, ours,
        "the oracle quotes every row of the seed's table"
    );
    let counts = seed::answer_counts();
    let answers: BTreeSet<&str> = counts.keys().map(String::as_str).collect();
    assert_eq!(
        answers,
        BTreeSet::from([ACCEPT, REJECT, CLOSED, TIMED_OUT]),
        "the seed's answers"
    );
    // The kernel's closed list of rules is the seed's policies (the modifier row aside).
    let wire = |s: &str| s.to_lowercase().replace(' ', "_");
    let seed_rules: BTreeSet<String> = rows
        .iter()
        .filter(|(_, satisfied, _)| satisfied != "Added to another policy")
        .map(|(name, _, _)| wire(name))
        .collect();
    let kernel_rules: BTreeSet<String> = AggregationRule::ALL
        .iter()
        .filter_map(|r| r.wire_name())
        .map(String::from)
        .collect();
    assert_eq!(kernel_rules, seed_rules, "the kernel's aggregation rules");
    assert!(
        seed::aggregation_prose()
            .contains("the remaining open participant requests close as obsolete")
    );
}

/// `aggregate()` against the oracle on every set of answers of up to four participants, for
/// every policy of the seed's table, with and without "any rejection rejects".
#[test]
fn aggregate_agrees_with_the_seed_on_every_answer_set() {
    let kinds = [
        Stand::Open,
        Stand::Closed(ACCEPT),
        Stand::Closed(REJECT),
        Stand::Closed(CLOSED),
        Stand::Closed(TIMED_OUT),
    ];
    let (mut checked, mut both) = (0, 0);
    for n in 1..=4usize {
        for code in 0..kinds.len().pow(n as u32) {
            let stands: Vec<Stand> = (0..n)
                .map(|i| kinds[code / kinds.len().pow(i as u32) % kinds.len()])
                .collect();
            for sp in policies_for(n) {
                if sp.policy == Policy::Sequential {
                    // In sequence: acceptances, then at most one closed request, then
                    // requests not yet open.
                    let first_other = stands
                        .iter()
                        .position(|s| *s != Stand::Closed(ACCEPT))
                        .unwrap_or(n);
                    if stands[first_other.min(n)..]
                        .iter()
                        .skip(1)
                        .any(|s| *s != Stand::Open)
                    {
                        continue;
                    }
                }
                let want = oracle(&sp, &stands);
                if want == Verdict::Both {
                    both += 1;
                    continue;
                }
                let got = kernel_verdict(aggregate(
                    &kernel_policy(&sp),
                    &kernel_standings(&sp, &stands),
                ));
                assert_eq!(got, want, "{sp:?} over {stands:?}");
                checked += 1;
            }
        }
    }
    assert!(
        checked > 10_000,
        "{checked} sets checked ({both} ambiguous)"
    );
}

/// One event of a gate's life: participant `who` answers, or the gate's deadline passes.
#[derive(Clone, Copy, Debug)]
enum Event {
    Answer(usize, &'static str),
    Deadline,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        5 => (0usize..6, prop_oneof![Just(ACCEPT), Just(REJECT), Just(CLOSED)])
            .prop_map(|(i, a)| Event::Answer(i, a)),
        1 => Just(Event::Deadline),
    ]
}

fn seed_policy() -> impl Strategy<Value = (SeedPolicy, usize)> {
    (1usize..6).prop_flat_map(|n| {
        (
            prop_oneof![
                Just(Policy::All),
                Just(Policy::Any),
                Just(Policy::Sequential),
                (1..=n).prop_map(Policy::KOfN),
                (1u32..=100).prop_map(Policy::Percentage),
            ],
            any::<bool>(),
        )
            .prop_map(move |(policy, any_rejection_rejects)| {
                (
                    SeedPolicy {
                        policy,
                        any_rejection_rejects,
                    },
                    n,
                )
            })
    })
}

fn kernel_answer(a: &str) -> GateAnswer {
    match a {
        ACCEPT => GateAnswer::Accept,
        REJECT => GateAnswer::Reject,
        CLOSED => GateAnswer::ClosedWithoutAnswer,
        other => panic!("{other:?} is not given by a participant"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Driven through records in time order: after every answer (or the deadline) the gate's
    /// status is the oracle's; the first decision stops the answers and the requests still
    /// open close as obsolete (the seed's sentence after the table); in Sequential a later
    /// participant cannot answer before the previous acceptance.
    #[test]
    fn gates_decide_as_the_seed_says_through_records(
        (sp, n) in seed_policy(),
        events in proptest::collection::vec(event(), 0..10),
    ) {
        let people: Vec<Party> = (0..n).map(|i| p("panel", &format!("m{i}"))).collect();
        let mut w = promised();
        w.access = w.access.clone().with_organisation("panel");
        let deadline = w.now + 1_000_000;
        let g = w.ok(&Cast::o(), Operation::OpenCondition {
            condition: Condition {
                description: "seed gate".into(),
                addressed_to: None,
                kind: GateKind::Approval,
                deadline: Some(deadline),
                participants: people.clone(),
                aggregation: kernel_policy(&sp),
            },
        });
        let v = w.c().terms_version;
        let mut stands = vec![Stand::Open; n];
        let status = |w: &World| kernel_verdict(w.view().gates[0].status);
        let mut verdict = oracle(&sp, &stands);
        prop_assert_eq!(verdict, Verdict::Waiting);
        prop_assert_eq!(status(&w), verdict);
        for e in events {
            if verdict != Verdict::Waiting {
                break;
            }
            match e {
                Event::Deadline => {
                    w.now = deadline + 1;
                    // Every open request times out (Sequential: only the current one is open).
                    for s in stands.iter_mut().filter(|s| **s == Stand::Open) {
                        *s = Stand::Closed(TIMED_OUT);
                        if sp.policy == Policy::Sequential {
                            break;
                        }
                    }
                }
                Event::Answer(i, a) => {
                    let who = if sp.policy == Policy::Sequential {
                        let cur = stands.iter().position(|s| *s == Stand::Open).unwrap();
                        // "the next request opens only after the previous acceptance".
                        if let Some(later) = (cur + 1..n).nth(i % n) {
                            let r = w.try_op(&people[later], answer(kernel_answer(a), v), &[g], &[]);
                            prop_assert!(r.is_err(), "m{} answered before m{} accepted", later, cur);
                        }
                        cur
                    } else {
                        let Some(j) = (0..n).map(|d| (i + d) % n).find(|j| stands[*j] == Stand::Open) else {
                            continue;
                        };
                        j
                    };
                    w.ok_with(&people[who], answer(kernel_answer(a), v), &[g], &[]);
                    stands[who] = Stand::Closed(a);
                }
            }
            verdict = oracle(&sp, &stands);
            prop_assert_ne!(verdict, Verdict::Both, "one event decides one way");
            prop_assert_eq!(status(&w), verdict, "{:?} after {:?}", sp, stands);
        }
        if verdict != Verdict::Waiting {
            // The requests still open: Sequential's later requests never opened.
            let open: BTreeSet<Party> = (0..n)
                .filter(|i| stands[*i] == Stand::Open)
                .filter(|i| sp.policy != Policy::Sequential || (0..*i).all(|j| stands[j] == Stand::Closed(ACCEPT)))
                .map(|i| people[i].clone())
                .collect();
            let closing: BTreeSet<Party> = due_work(w.c(), w.now)
                .into_iter()
                .filter(|a| a.kind == ServiceKind::CloseParticipant)
                .filter_map(|a| match a.op {
                    Operation::GateDecision { answer: GateAnswer::Obsolete, participant, .. } => participant,
                    _ => None,
                })
                .collect();
            prop_assert_eq!(closing, open);
        }
    }
}
