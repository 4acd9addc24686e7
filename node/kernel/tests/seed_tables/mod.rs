//! The seed tables the kernel implements, transcribed once from the seeds' text into the files
//! beside this one (issue 29 item 4: tests that read the seed, not the code). Each file names
//! the seed and section it quotes; the parsers here turn the quoted text into plain data, and
//! no expected value in the tests that use them comes from a kernel constant or function.
//!
//! File format: `#` lines are comments (the header naming the seed); `@name` starts a section;
//! every other line belongs to the section above it, exactly as the seed writes it.
#![allow(dead_code)]

use std::collections::BTreeMap;

/// Seed 003, "Lifecycle & Timeout".
pub const LIFECYCLE_003: &str = include_str!("003_lifecycle.txt");

/// The lines of section `name` of `text` (panics if there is none: the transcription is the
/// test's data, a missing section is a broken test).
pub fn section<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let mut out = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if let Some(s) = line.strip_prefix('@') {
            if out.is_some() {
                break;
            }
            if s.trim() == name {
                out = Some(Vec::new());
            }
            continue;
        }
        if let Some(v) = out.as_mut() {
            v.push(line);
        }
    }
    out.unwrap_or_else(|| panic!("no section @{name}"))
}

/// The rows of a tab-separated seed table in `lines`, the header row first, blank lines and
/// prose (a line without a tab) skipped.
pub fn tsv<'a>(lines: &[&'a str]) -> Vec<Vec<&'a str>> {
    lines
        .iter()
        .filter(|l| l.contains('\t'))
        .map(|l| l.split('\t').map(str::trim).collect())
        .collect()
}

/// `key: value` lines under the line `head:` (the seed's YAML-like blocks), one level deep.
pub fn yaml_block<'a>(lines: &[&'a str], head: &str) -> BTreeMap<&'a str, &'a str> {
    let start = lines
        .iter()
        .position(|l| l.trim() == format!("{head}:"))
        .unwrap_or_else(|| panic!("no {head}: block"));
    let indent = |l: &str| l.len() - l.trim_start().len();
    let base = indent(lines[start]);
    let mut out = BTreeMap::new();
    let mut inner = None;
    for l in &lines[start + 1..] {
        if l.trim().is_empty() || indent(l) <= base {
            break;
        }
        let level = *inner.get_or_insert(indent(l));
        if indent(l) != level {
            continue;
        }
        let (k, v) = l.trim().split_once(':').expect("key: value");
        out.insert(k.trim(), v.trim());
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Seed 003: the commit-envelope lifecycle.

/// One arrow of the seed's state diagram: the diagram's label, from (`None`: the start), to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrow {
    pub label: String,
    pub from: Option<String>,
    pub to: String,
}

/// The phase names in the diagram's boxes (`│  NAME  │`), in the diagram's order.
pub fn diagram_phases() -> Vec<String> {
    let mut out = Vec::new();
    for line in section(LIFECYCLE_003, "diagram") {
        for cell in line.split('│') {
            let w = cell.trim();
            if !w.is_empty()
                && w.chars().all(|c| c.is_ascii_uppercase())
                && !out.contains(&w.into())
            {
                out.push(w.to_string());
            }
        }
    }
    out
}

/// The phases the diagram marks `(terminal)`: the boxes on the line above the marks whose
/// column range holds a mark.
pub fn diagram_terminal() -> Vec<String> {
    let d = section(LIFECYCLE_003, "diagram");
    let cols = |l: &str| l.chars().collect::<Vec<char>>();
    let mut out = Vec::new();
    for (i, line) in d.iter().enumerate() {
        let marks: Vec<usize> = {
            let c = cols(line);
            (0..c.len())
                .filter(|&j| c[j..].iter().collect::<String>().starts_with("(terminal)"))
                .collect()
        };
        if marks.is_empty() {
            continue;
        }
        // The nearest line above with box names.
        let boxes = d[..i]
            .iter()
            .rev()
            .find(|l| l.chars().any(|c| c.is_ascii_uppercase()))
            .expect("a box line above the marks");
        let c = cols(boxes);
        for m in marks {
            // The name whose box spans the mark's middle column.
            let mid = m + "(terminal)".len() / 2;
            let (mut lo, mut hi) = (mid.min(c.len() - 1), mid.min(c.len() - 1));
            while lo > 0 && c[lo] != '│' {
                lo -= 1;
            }
            while hi + 1 < c.len() && c[hi] != '│' {
                hi += 1;
            }
            let name: String = c[lo + 1..hi].iter().collect::<String>().trim().to_string();
            assert!(
                !name.is_empty() && name.chars().all(|ch| ch.is_ascii_uppercase()),
                "(terminal) at column {m} is under a box: {name:?}"
            );
            out.push(name);
        }
    }
    out
}

/// The arrows, as transcribed in `@arrows` (checked word by word against `@diagram`).
pub fn arrows() -> Vec<Arrow> {
    let diagram = section(LIFECYCLE_003, "diagram").join("\n");
    section(LIFECYCLE_003, "arrows")
        .into_iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            let [label, from, to] = f[..] else {
                panic!("arrow line {l:?}")
            };
            for w in label.split_whitespace() {
                assert!(
                    diagram.contains(w),
                    "arrow label word {w:?} is not in the diagram"
                );
            }
            Arrow {
                label: label.into(),
                from: (from != "-").then(|| from.to_string()),
                to: to.into(),
            }
        })
        .collect()
}

/// The seed's declaration: `lifecycle:` (field → event name).
pub fn lifecycle_names() -> BTreeMap<String, String> {
    yaml_block(&section(LIFECYCLE_003, "lifecycle"), "lifecycle")
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The seed's declaration: `timeout:` (abort_after_seconds, tick_event).
pub fn timeout() -> (u64, String) {
    let t = yaml_block(&section(LIFECYCLE_003, "timeout"), "timeout");
    (
        t["abort_after_seconds"].parse().expect("seconds"),
        t["tick_event"].to_string(),
    )
}

/// The entity type the seed says the four lifecycle events target ("… targeting the X entity
/// type").
pub fn lifecycle_entity_type() -> String {
    let text = section(LIFECYCLE_003, "lifecycle_fields").join("\n");
    let after = text
        .split("targeting the ")
        .nth(1)
        .expect("the seed's sentence on the events section");
    after
        .split(" entity type")
        .next()
        .expect("… entity type")
        .to_string()
}

/// The "Emitted by" column of the seed's lifecycle-events table, by field.
pub fn emitted_by() -> BTreeMap<String, String> {
    tsv(&section(LIFECYCLE_003, "lifecycle_fields"))
        .into_iter()
        .skip(1)
        .map(|r| (r[0].trim_matches('`').to_string(), r[1].to_string()))
        .collect()
}

/// The tick event as the seed's `events:` block declares it: (name, kind, state, entity_expr,
/// payload).
pub fn tick_event() -> (String, String, String, String, BTreeMap<String, String>) {
    let lines = section(LIFECYCLE_003, "events");
    let events = yaml_block(&lines, "events");
    let (name, _) = events.iter().next().expect("one event");
    // The event's own block is indented under `events:`; find it by its line.
    let at = lines
        .iter()
        .position(|l| l.trim() == format!("{name}:"))
        .expect("the event's block");
    let own = yaml_block(&lines[at..], name);
    let payload = yaml_block(&lines[at..], "payload")
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (
        name.to_string(),
        own["kind"].to_string(),
        own["state"].to_string(),
        own["entity_expr"].to_string(),
        payload,
    )
}

/// The envelope type built from the seed's declaration alone (named `budget_transfer`, as the
/// node names it; seed 003's quoted text declares no participants' rules, so it has none).
pub fn envelope_type() -> accord_kernel::envelope::EnvelopeType {
    use accord_kernel::envelope::{EnvelopeType, EventDecl, LifecycleEvents, Timeout};
    let names = lifecycle_names();
    let (secs, tick) = timeout();
    let target = lifecycle_entity_type();
    let (tick_name, kind, state, entity_expr, payload) = tick_event();
    assert_eq!(
        tick_name, tick,
        "the seed's tick event is the one it declares"
    );
    let mut events: BTreeMap<String, EventDecl> = names
        .values()
        .map(|n| {
            (
                n.clone(),
                EventDecl {
                    state: target.clone(),
                    ..EventDecl::default()
                },
            )
        })
        .collect();
    events.insert(
        tick_name,
        EventDecl {
            kind,
            state,
            entity_expr,
            payload,
        },
    );
    EnvelopeType {
        name: "budget_transfer".into(),
        lifecycle: LifecycleEvents {
            prepare_event: names["prepare_event"].clone(),
            prepared_event: names["prepared_event"].clone(),
            commit_event: names["commit_event"].clone(),
            abort_event: names["abort_event"].clone(),
        },
        timeout: Timeout {
            abort_after_seconds: secs,
            tick_event: tick,
        },
        events,
        participants: Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// Seed 000: conditions, gates and multi-party aggregation.

/// Seed 000, "Conditions and gates" and "Multi-party aggregation".
pub const AGGREGATION_000: &str = include_str!("000_aggregation.txt");

/// The seed's answer table: answer → whether it counts as acceptance.
pub fn answer_counts() -> BTreeMap<String, bool> {
    tsv(&section(AGGREGATION_000, "conditions_and_gates"))
        .into_iter()
        .skip(1)
        .map(|r| {
            let yes = match r[1] {
                "Yes" => true,
                "No" => false,
                other => panic!("counts as acceptance: {other:?}"),
            };
            (r[0].to_string(), yes)
        })
        .collect()
}

/// The seed's aggregation table: (policy, satisfied, becomes unsatisfiable), in its order.
pub fn policies() -> Vec<(String, String, String)> {
    tsv(&section(AGGREGATION_000, "aggregation"))
        .into_iter()
        .skip(1)
        .map(|r| (r[0].to_string(), r[1].to_string(), r[2].to_string()))
        .collect()
}

/// The seed's sentences after the aggregation table.
pub fn aggregation_prose() -> String {
    section(AGGREGATION_000, "aggregation")
        .into_iter()
        .filter(|l| !l.contains('\t'))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------
// Seed 000: the commitment's states and operations.

/// Seed 000, "Commitment": "States" and "Operations".
pub const OPERATIONS_000: &str = include_str!("000_operations.txt");

/// The seed's states: (wire name, terminal).
pub fn states() -> Vec<(String, bool)> {
    tsv(&section(OPERATIONS_000, "states"))
        .into_iter()
        .skip(1)
        .map(|r| (r[1].to_string(), r[2] == "Yes"))
        .collect()
}

/// One row of the seed's "Operations" table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRow {
    pub operation: String,
    pub who: String,
    pub from: String,
    pub result: String,
    pub content: String,
}

/// The seed's operations table, in its order.
pub fn operations() -> Vec<OperationRow> {
    tsv(&section(OPERATIONS_000, "operations"))
        .into_iter()
        .skip(1)
        .map(|r| OperationRow {
            operation: r[0].to_string(),
            who: r[1].to_string(),
            from: r[2].to_string(),
            result: r[3].to_string(),
            content: r[4].to_string(),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Seed 000: revoke requests, reason codes, records written by the Work service, assignment.

/// Seed 000, "Revoke requests".
pub const REVOKE_000: &str = include_str!("000_revoke.txt");
/// Seed 000, "Reason codes".
pub const REASON_CODES_000: &str = include_str!("000_reason_codes.txt");
/// Seed 000, "Records written by the Work service".
pub const SERVICE_RECORDS_000: &str = include_str!("000_service_records.txt");
/// Seed 000, "Assignment": `@values` and `@operations`.
pub const ASSIGNMENT_000: &str = include_str!("000_assignment.txt");

/// The rows of the tab-separated table in section `name` of `text`, without the header row,
/// as owned strings.
pub fn rows(text: &str, name: &str) -> Vec<Vec<String>> {
    tsv(&section(text, name))
        .into_iter()
        .skip(1)
        .map(|r| r.into_iter().map(String::from).collect())
        .collect()
}

/// The header row of the table in section `name` of `text`.
pub fn header(text: &str, name: &str) -> Vec<String> {
    tsv(&section(text, name))[0]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The prose lines (no tab, not blank) of section `name` of `text`.
pub fn prose(text: &str, name: &str) -> Vec<String> {
    section(text, name)
        .into_iter()
        .filter(|l| !l.contains('\t') && !l.trim().is_empty())
        .map(String::from)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Seed 000: whose move it is.

/// Seed 000, "Commitment": "Whose move it is" and "Revoke requests".
pub const WHOSE_MOVE_000: &str = include_str!("000_whose_move.txt");

/// The seed's "Whose move it is" table: (state or situation, next move), in its order.
pub fn whose_move() -> Vec<(String, String)> {
    tsv(&section(WHOSE_MOVE_000, "whose_move"))
        .into_iter()
        .skip(1)
        .map(|r| (r[0].to_string(), r[1].to_string()))
        .collect()
}

/// The seed's "Revoke requests" table: request → (asked by, asked of).
pub fn revoke_parties() -> BTreeMap<String, (String, String)> {
    tsv(&section(WHOSE_MOVE_000, "revoke_requests"))
        .into_iter()
        .skip(1)
        .map(|r| (r[0].to_string(), (r[1].to_string(), r[2].to_string())))
        .collect()
}

// Seed 000: the summary category.

/// Seed 000, "Summary category": the precedence, the category table and the Flags paragraph.
pub const CATEGORIES_000: &str = include_str!("000_categories.txt");

/// The precedence line ("closed > deferred > …"): the category names, first wins.
pub fn precedence() -> Vec<String> {
    let lines = section(CATEGORIES_000, "precedence");
    let line = lines
        .iter()
        .find(|l| l.contains(" > "))
        .expect("the precedence line");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("When several apply, the first in this order wins")),
        "the sentence that gives the line its meaning"
    );
    line.split(" > ").map(|w| w.trim().to_string()).collect()
}

/// One row of the seed's category table, its cells as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CategoryRow {
    pub category: String,
    pub derived_from: String,
    pub changed_by: String,
    pub can_move_to: String,
}

/// The category table, in the seed's order.
pub fn category_rows() -> Vec<CategoryRow> {
    let rows = tsv(&section(CATEGORIES_000, "categories"));
    assert_eq!(
        rows[0],
        ["Category", "Derived from", "Changed by", "Can move to"],
        "the table's header"
    );
    rows.into_iter()
        .skip(1)
        .map(|r| CategoryRow {
            category: r[0].to_string(),
            derived_from: r[1].to_string(),
            changed_by: r[2].to_string(),
            can_move_to: r[3].to_string(),
        })
        .collect()
}

/// A "Can move to" cell: the categories it names, each with the note the seed puts after it
/// ("active (on rejection)"), and whether it says "The previous category" ("None": nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MovesTo {
    pub to: BTreeMap<String, Option<String>>,
    pub previous: bool,
}

/// The "Can move to" column, by category; every name it uses is one of the precedence line's.
pub fn can_move_to() -> BTreeMap<String, MovesTo> {
    let names = precedence();
    category_rows()
        .into_iter()
        .map(|row| {
            let mut m = MovesTo::default();
            for entry in row.can_move_to.split(", ").map(str::trim) {
                match entry {
                    "None" => {}
                    "The previous category" => m.previous = true,
                    _ => {
                        let (name, note) = match entry.split_once(" (") {
                            Some((n, rest)) => (
                                n.trim(),
                                Some(rest.trim_end_matches(')').trim().to_string()),
                            ),
                            None => (entry, None),
                        };
                        assert!(
                            names.iter().any(|n| n == name),
                            "{}: {name:?} is not a category",
                            row.category
                        );
                        m.to.insert(name.to_string(), note);
                    }
                }
            }
            (row.category, m)
        })
        .collect()
}

/// The flags the Flags paragraph names ("Flags: a, b, c.").
pub fn flag_names() -> Vec<String> {
    let text = section(CATEGORIES_000, "flags").join(" ");
    let list = text
        .strip_prefix("Flags: ")
        .and_then(|t| t.split('.').next())
        .expect("Flags: …");
    list.split(", ").map(|f| f.trim().to_string()).collect()
}

/// The Flags paragraph's sentences after the list.
pub fn flag_sentences() -> Vec<String> {
    let text = section(CATEGORIES_000, "flags").join(" ");
    text.split(". ")
        .skip(1)
        .map(|s| s.trim().trim_end_matches('.').to_string())
        .collect()
}
