//! The envelope types a node knows (issue 13 items 1 and 7): the built-in `budget_transfer`
//! (seed 003's declaration, verbatim) and whatever the config declares in `[[envelope_types]]`
//! (a declared type of the same name replaces the built-in one). Each is checked with
//! [`ke::EnvelopeType::validate`] when the config is validated, before any port is bound.

use super::{Config, ConfigError};
use accord_kernel::envelope::{self as ke, Severity};
use std::collections::BTreeMap;

/// The built-in atomic budget transfer (`budget_transfer`): every participant debits or
/// credits budget accounts (commitment ids) at its node; all apply or none does.
/// Seed 003's declaration of the transfer, in the config's TOML shape; its rules run like any
/// declared type's (issue 29 item 3): the source's debit reserves on `reserved`, both roles
/// mark the account `pending` until the outcome, the cleanup reverts both.
const BUDGET_TRANSFER_DECL: &str = r#"
name = "budget_transfer"
lifecycle = { prepare_event = "TRANSFER_PREPARED", prepared_event = "TRANSFER_PREPARE_CONFIRMED", commit_event = "TRANSFER_COMMITTED", abort_event = "TRANSFER_ABORTED" }
timeout = { abort_after_seconds = 30, tick_event = "CLOCK_TICK" }

[events.TRANSFER_PREPARED]
state = "envelope_state"
[events.TRANSFER_PREPARE_CONFIRMED]
state = "envelope_state"
[events.TRANSFER_COMMITTED]
state = "envelope_state"
[events.TRANSFER_ABORTED]
state = "envelope_state"
[events.CLOCK_TICK]
kind = "system"
state = "scheduler"
entity_expr = "event.tick_id"
payload = { tick_id = "string", instant_time = "integer" }

[[participants]]
role = "source"
stage = [{ op = "debit", field = "budget" }, { op = "append", field = "pending", on_commit = "remove" }]
abort_cleanup = [{ op = "subtract", field = "reserved", cap = { min = 0 } }, { op = "remove_from_list", field = "pending", filter = "dedup" }]

[[participants]]
role = "destination"
stage = [{ op = "credit", field = "budget" }, { op = "append", field = "pending", on_commit = "remove" }]
abort_cleanup = [{ op = "remove_from_list", field = "pending", filter = "dedup" }]
"#;

/// The built-in atomic cross-organisation delegate (`obligation_delegate`, issue 13 item 7b):
/// the obligation moves from a party of one organisation to a party of another — the kernel's
/// own delegate (seed 000, "Operations": the obligor's `delegate_offer`, the new obligor's
/// `delegate_acceptance`), both pre-signed and carried as record changes — or stays. Every
/// participant (the obligee's organisation too) holds the commitment and validates the two
/// records against its copy on prepare; on commit the offer's and then the acceptance's
/// organisation write them; on abort they are dropped.
const OBLIGATION_DELEGATE_DECL: &str = r#"
name = "obligation_delegate"
lifecycle = { prepare_event = "DELEGATE_PREPARED", prepared_event = "DELEGATE_PREPARE_CONFIRMED", commit_event = "DELEGATE_COMMITTED", abort_event = "DELEGATE_ABORTED" }
timeout = { abort_after_seconds = 30, tick_event = "CLOCK_TICK" }

[events.DELEGATE_PREPARED]
state = "envelope_state"
[events.DELEGATE_PREPARE_CONFIRMED]
state = "envelope_state"
[events.DELEGATE_COMMITTED]
state = "envelope_state"
[events.DELEGATE_ABORTED]
state = "envelope_state"
[events.CLOCK_TICK]
kind = "system"
state = "scheduler"
entity_expr = "event.tick_id"
payload = { tick_id = "string", instant_time = "integer" }

[[participants]]
role = "obligee"
stage = [{ op = "hold", field = "commitment" }]
abort_cleanup = [{ op = "remove_from_list", field = "holds", filter = "dedup" }]

[[participants]]
role = "obligor"
stage = [{ op = "hold", field = "commitment" }, { op = "submit", field = "delegate_offer" }]
abort_cleanup = [{ op = "remove_from_list", field = "holds", filter = "dedup" }]

[[participants]]
role = "new_obligor"
stage = [{ op = "hold", field = "commitment" }, { op = "submit", field = "delegate_acceptance" }]
abort_cleanup = [{ op = "remove_from_list", field = "holds", filter = "dedup" }]
"#;

/// The built-in types.
pub fn defaults() -> Vec<ke::EnvelopeType> {
    [BUDGET_TRANSFER_DECL, OBLIGATION_DELEGATE_DECL]
        .into_iter()
        .filter_map(|decl| match toml::from_str(decl) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!(error = %e, "built-in envelope type does not parse");
                None
            }
        })
        .collect()
}

/// The built-in types, by name.
pub fn all_defaults() -> BTreeMap<String, ke::EnvelopeType> {
    defaults()
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect()
}

/// Every type the node knows, by name: the built-ins, then the config's.
pub fn all(config: &Config) -> BTreeMap<String, ke::EnvelopeType> {
    let mut all = all_defaults();
    all.extend(
        config
            .envelope_types
            .iter()
            .map(|t| (t.name.clone(), t.clone())),
    );
    all
}

/// The tick interval the node's own scheduler uses, if it ticks.
fn interval(config: &Config) -> Option<u64> {
    (!config.envelopes.external_ticks).then_some(config.envelopes.tick_interval_seconds)
}

/// The first error of the declared types, naming the field (`envelope_types[i].<field>`).
pub fn validate(config: &Config) -> Result<(), ConfigError> {
    let e = &config.envelopes;
    if e.tick_interval_seconds == 0 && !e.external_ticks {
        return Err(ConfigError {
            field: "envelopes.tick_interval_seconds".into(),
            reason: "must be > 0 (or set envelopes.external_ticks)".into(),
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, t) in config.envelope_types.iter().enumerate() {
        if let Some(issue) = t
            .validate(interval(config))
            .into_iter()
            .find(|x| x.severity == Severity::Error)
        {
            return Err(ConfigError {
                field: format!("envelope_types[{i}].{}", issue.field),
                reason: format!("{}: {}", issue.code, issue.detail),
            });
        }
        if !seen.insert(t.name.as_str()) {
            return Err(ConfigError {
                field: format!("envelope_types[{i}].name"),
                reason: format!("duplicate envelope type {:?}", t.name),
            });
        }
    }
    Ok(())
}

/// The warnings of every type the node knows (seed 003: a tick interval not shorter than the
/// timeout lets envelopes run up to twice the timeout), as "field: detail" lines.
pub fn warnings(config: &Config) -> Vec<String> {
    all(config)
        .values()
        .flat_map(|t| {
            t.validate(interval(config))
                .into_iter()
                .filter(|x| x.severity == Severity::Warning)
                .map(|x| format!("envelope type {:?}: {}: {}", t.name, x.field, x.detail))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let text = format!(
            "name = \"acme\"\ndata_dir = \"d\"\nlisten = \"127.0.0.1:0\"\n[tls]\ncert = \"c\"\nkey = \"k\"\n[keys]\nnode = \"n\"\n{extra}"
        );
        toml::from_str(&text).expect("config parses")
    }

    #[test]
    fn a_declared_type_is_validated_and_errors_name_the_field() {
        // The seed's declaration without its abort event declared in events.
        let decl = BUDGET_TRANSFER_DECL
            .replace("name = \"budget_transfer\"", "name = \"mine\"")
            .replace(
                "[events.TRANSFER_ABORTED]\nstate = \"envelope_state\"\n",
                "",
            );
        let body: String = decl
            .lines()
            .map(|l| {
                if l.starts_with("[events.") {
                    l.replace("[events.", "[envelope_types.events.")
                } else if l.starts_with("[[participants]]") {
                    "[[envelope_types.participants]]".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let c = config(&format!("[[envelope_types]]{body}\n"));
        assert_eq!(c.envelope_types.len(), 1);
        let e = validate(&c).unwrap_err();
        assert_eq!(e.field, "envelope_types[0].lifecycle.abort_event");
        assert!(e.reason.starts_with("undeclared_event"), "{e}");
        // Ticking every 60 s against the 30 s timeout: valid, with the seed's warning.
        let c = config("[envelopes]\ntick_interval_seconds = 60\n");
        assert!(validate(&c).is_ok());
        let w = warnings(&c);
        assert!(w.iter().any(|w| w.contains("twice the timeout")), "{w:?}");
        assert!(warnings(&config("")).is_empty());
        let e = validate(&config("[envelopes]\ntick_interval_seconds = 0\n")).unwrap_err();
        assert_eq!(e.field, "envelopes.tick_interval_seconds");
    }

    /// Issue 29 item 3: a declared type's rules are validated before bind; a cleanup that
    /// reverts no stage rule is refused with its field and code.
    #[test]
    fn a_declared_types_rules_are_validated_with_their_field() {
        let body = BUDGET_TRANSFER_DECL
            .replace("name = \"budget_transfer\"", "name = \"mine\"")
            .replace("field = \"reserved\"", "field = \"held\"")
            .replace("[events.", "[envelope_types.events.")
            .replace("[[participants]]", "[[envelope_types.participants]]");
        let c = config(&format!("[[envelope_types]]{body}\n"));
        let e = validate(&c).unwrap_err();
        assert_eq!(e.field, "envelope_types[0].participants[0].stage[0]");
        assert!(e.reason.starts_with(ke::DECL_STAGE_NOT_REVERTED), "{e}");
    }

    #[test]
    fn the_built_in_transfer_is_the_seeds_and_valid() {
        let d = defaults();
        assert_eq!(d.len(), 2, "budget_transfer and obligation_delegate");
        assert_eq!(d[0].name, "budget_transfer");
        assert_eq!(d[1].name, "obligation_delegate");
        assert!(d[1].is_valid(Some(5)), "{:?}", d[1].validate(Some(5)));
        assert_eq!(d[0].lifecycle.abort_event, "TRANSFER_ABORTED");
        assert!(d[0].is_valid(Some(5)), "{:?}", d[0].validate(Some(5)));
        // Ticking every 30 s against a 30 s timeout is the seed's warning.
        assert!(
            d[0].validate(Some(30))
                .iter()
                .any(|i| i.code == ke::DECL_TICK_NOT_SHORTER)
        );
    }
}
