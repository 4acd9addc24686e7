//! Issue 26 item 6: the convergence checks can fire. Each test breaks one thing on purpose in
//! what the checks read (`accord_sim::Tamper`) and expects the check to report it; the seeds
//! on which today's nodes diverge without any tampering are in RELIABILITY.md ("Convergence").

use accord_sim::{Options, Tamper};

fn run(seed: u64, tamper: Tamper) -> Vec<String> {
    let opts = Options {
        tamper,
        ..Options::default()
    };
    accord_sim::run(seed, opts).expect("run").violations
}

fn fired(v: &[String], what: &str) -> bool {
    v.iter().any(|x| x.contains(what))
}

/// One holder's view shows another state: `same_view` names the field.
#[test]
fn same_view_fires_on_a_skewed_view() {
    let v = run(5, Tamper::View);
    assert!(fired(&v, "same_view") && fired(&v, "tampered"), "{v:#?}");
}

/// One holder does not show a commitment it is named in: `same_view` says who.
#[test]
fn same_view_fires_on_a_missing_holder() {
    let v = run(5, Tamper::Missing);
    assert!(
        fired(&v, "same_view") && fired(&v, "does not show it"),
        "{v:#?}"
    );
}

/// A race record still waits for its order after quiescence: `decided` reports it.
#[test]
fn decided_fires_on_a_pending_record() {
    let v = run(5, Tamper::Pending);
    assert!(fired(&v, "decided:"), "{v:#?}");
}

/// Every class runs: over a few seeds each race kind submits records.
#[test]
fn every_class_runs() {
    use accord_sim::workload::Class;
    for class in Class::ALL {
        let opts = Options {
            classes: class.bit(),
            races: 4,
            ..Options::default()
        };
        let acked: usize = (0..3)
            .map(|s| accord_sim::run(s, opts).expect("run").race_records)
            .sum();
        assert!(
            acked > 3,
            "class {} barely ran: {acked} records",
            class.name()
        );
    }
}
