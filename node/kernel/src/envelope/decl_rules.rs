//! Validation of the participants' rules of an envelope type (issue 29 item 3): the rules are
//! executed as declared (`rules.rs`), so a declaration that could not be executed, or whose
//! abort would not revert what its prepare staged, is refused before the node binds a port.
//! Seed 003, "What happens on abort": "Each participant executes its abort_cleanup rules
//! (reverting any staged state changes)" and "Your abort_cleanup rules must be idempotent …
//! Use cap: { min: 0 } on balance subtractions and filter to de-duplicate list reversals".
//!
//! Every problem names its field (`participants[i].stage[j].field`, …) and one of the `DECL_*`
//! codes.

use std::collections::BTreeMap;

use super::decl::{
    CleanupRule, DECL_AMBIGUOUS_ROLE, DECL_CLEANUP_NOT_IDEMPOTENT, DECL_CLEANUP_REVERTS_NOTHING,
    DECL_DUPLICATE_ROLE, DECL_FIELD_KIND_CONFLICT, DECL_MISSING_FIELD, DECL_STAGE_NOT_REVERTED,
    DECL_UNREACHABLE_ROLE, DeclIssue, HOLDS_LIST, ParticipantDecl, Severity, StageRule,
};

/// A field's kind: a counter (a number per account) or a list (of envelope ids per account).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Counter,
    List,
}

/// Every problem with the participants' rules, in declaration order.
pub(super) fn validate_rules(participants: &[ParticipantDecl]) -> Vec<DeclIssue> {
    let mut out = Vec::new();
    let mut err = |field: String, code, detail: String| {
        out.push(DeclIssue {
            severity: Severity::Error,
            field,
            code,
            detail,
        })
    };
    // The first rule that used each field, and as what (a field is one kind in the type).
    let mut kinds: BTreeMap<String, (Kind, String)> = BTreeMap::new();
    let mut kind = |name: &str, k: Kind, at: String| -> Option<String> {
        match kinds.get(name) {
            Some((other, first)) if *other != k => Some(format!(
                "{name:?} is a {} here but a {} at {first}",
                kind_name(k),
                kind_name(*other)
            )),
            Some(_) => None,
            None => {
                kinds.insert(name.to_string(), (k, at));
                None
            }
        }
    };
    // Which rule takes each change kind (a change finds its role by its kind).
    let mut takers: BTreeMap<&'static str, String> = BTreeMap::new();
    let mut roles: Vec<&str> = Vec::new();
    for (i, p) in participants.iter().enumerate() {
        let at = format!("participants[{i}]");
        if p.role.trim().is_empty() {
            err(
                format!("{at}.role"),
                DECL_MISSING_FIELD,
                "a participant role needs a name".into(),
            );
        } else if roles.contains(&p.role.as_str()) {
            err(
                format!("{at}.role"),
                DECL_DUPLICATE_ROLE,
                format!("role {:?} is declared twice", p.role),
            );
        }
        roles.push(&p.role);
        let mut reachable = false;
        for (j, rule) in p.stage.iter().enumerate() {
            let here = format!("{at}.stage[{j}]");
            if rule.field().trim().is_empty() {
                err(
                    format!("{here}.field"),
                    DECL_MISSING_FIELD,
                    format!("{} needs a field", rule.op()),
                );
                continue;
            }
            let used: Vec<(&str, Kind, &str)> = match rule {
                StageRule::Debit { field, .. } => {
                    vec![
                        (field.as_str(), Kind::Counter, "field"),
                        (rule.reserve().unwrap_or_default(), Kind::Counter, "reserve"),
                    ]
                }
                StageRule::Credit { field } => vec![(field.as_str(), Kind::Counter, "field")],
                StageRule::Append { field, .. } => vec![(field.as_str(), Kind::List, "field")],
                StageRule::Hold { .. } => vec![(HOLDS_LIST, Kind::List, "field")],
                StageRule::Submit { .. } => vec![],
            };
            for (name, k, attr) in used {
                if name.trim().is_empty() {
                    err(
                        format!("{here}.{attr}"),
                        DECL_MISSING_FIELD,
                        format!("{} needs a {attr}", rule.op()),
                    );
                } else if let Some(d) = kind(name, k, format!("{here}.{attr}")) {
                    err(format!("{here}.{attr}"), DECL_FIELD_KIND_CONFLICT, d);
                }
            }
            match rule {
                StageRule::Debit { .. } | StageRule::Credit { .. } => {
                    reachable = true;
                    if let Some(first) = takers.insert(rule.op(), here.clone()) {
                        err(
                            here.clone(),
                            DECL_AMBIGUOUS_ROLE,
                            format!(
                                "{} changes are taken by {first} already: a change finds its role by its kind",
                                rule.op()
                            ),
                        );
                    }
                }
                StageRule::Hold { .. } | StageRule::Submit { .. } => reachable = true,
                StageRule::Append { .. } => {}
            }
            // What must the cleanup revert?
            let reverted = match rule {
                StageRule::Debit { .. } => rule.reserve().is_none_or(|r| {
                    p.abort_cleanup.iter().any(
                        |c| matches!(c, CleanupRule::Subtract { field, .. } if field == r),
                    )
                }),
                StageRule::Append { field, .. } => p.abort_cleanup.iter().any(
                    |c| matches!(c, CleanupRule::RemoveFromList { field: f, .. } if f == field),
                ),
                StageRule::Hold { .. } => p.abort_cleanup.iter().any(
                    |c| matches!(c, CleanupRule::RemoveFromList { field, .. } if field == HOLDS_LIST),
                ),
                StageRule::Credit { .. } | StageRule::Submit { .. } => true,
            };
            if !reverted {
                let what = match rule {
                    StageRule::Debit { .. } => format!(
                        "subtract {:?} (the debit's reservation)",
                        rule.reserve().unwrap_or_default()
                    ),
                    StageRule::Hold { .. } => format!("remove_from_list {HOLDS_LIST:?}"),
                    _ => format!("remove_from_list {:?}", rule.field()),
                };
                err(
                    here,
                    DECL_STAGE_NOT_REVERTED,
                    format!(
                        "no abort_cleanup rule of role {:?} reverts it: add {what}",
                        p.role
                    ),
                );
            }
        }
        let declares_rules = !p.stage.is_empty() || !p.abort_cleanup.is_empty();
        if !reachable && declares_rules {
            err(
                format!("{at}.stage"),
                DECL_UNREACHABLE_ROLE,
                format!(
                    "no change reaches role {:?}: it needs a debit, credit, hold or submit rule",
                    p.role
                ),
            );
        }
        for (j, rule) in p.abort_cleanup.iter().enumerate() {
            let here = format!("{at}.abort_cleanup[{j}]");
            if rule.field().trim().is_empty() {
                err(
                    format!("{here}.field"),
                    DECL_MISSING_FIELD,
                    "a cleanup rule needs a field".into(),
                );
                continue;
            }
            match rule {
                CleanupRule::Subtract { cap, .. } if cap.is_none_or(|c| c.min != 0) => err(
                    format!("{here}.cap"),
                    DECL_CLEANUP_NOT_IDEMPOTENT,
                    "a subtraction in abort cleanup needs cap = { min = 0 }".into(),
                ),
                CleanupRule::RemoveFromList { filter, .. }
                    if filter.as_deref() != Some("dedup") =>
                {
                    err(
                        format!("{here}.filter"),
                        DECL_CLEANUP_NOT_IDEMPOTENT,
                        "a list reversal in abort cleanup needs filter = \"dedup\"".into(),
                    )
                }
                _ => {}
            }
            let reverts = match rule {
                CleanupRule::Subtract { field, .. } => {
                    p.stage.iter().any(|s| s.reserve() == Some(field.as_str()))
                }
                CleanupRule::RemoveFromList { field, .. } => p.stage.iter().any(|s| match s {
                    StageRule::Append { field: f, .. } => f == field,
                    StageRule::Hold { .. } => field == HOLDS_LIST,
                    _ => false,
                }),
            };
            if !reverts {
                let (what, needs) = match rule {
                    CleanupRule::Subtract { .. } => ("subtract", "a debit reserving on it"),
                    CleanupRule::RemoveFromList { .. } => {
                        ("remove_from_list", "an append to it (or a hold, for holds)")
                    }
                };
                err(
                    format!("{here}.field"),
                    DECL_CLEANUP_REVERTS_NOTHING,
                    format!(
                        "{what} {:?} reverts no stage rule of role {:?}: it needs {needs}",
                        rule.field(),
                        p.role
                    ),
                );
            }
        }
    }
    out
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Counter => "counter",
        Kind::List => "list",
    }
}
