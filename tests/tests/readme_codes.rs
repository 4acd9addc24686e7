//! Issue 9, README for a new user: it lists every rejection code — the kernel's closed list and
//! federation's admission and refusal codes, taken from the code — and names the `[[peers]]`
//! fields next to the `peer add` flags with the same names.

use accord_kernel::RejectionCode;
use accord_proto::codes;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap()
}

#[test]
fn readme_lists_every_rejection_code() {
    let text = readme();
    let section = &text[text
        .find("## Rejection codes")
        .expect("a Rejection codes section")..];
    let missing: Vec<&str> = RejectionCode::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(codes::ADMISSION_CODES.iter().copied())
        .chain(codes::REFUSAL_CODES.iter().copied())
        .filter(|c| !section.contains(&format!("`{c}`")))
        .collect();
    assert!(missing.is_empty(), "README.md does not list {missing:?}");
}

#[test]
fn readme_names_peer_fields_and_flags_alike() {
    let text = readme();
    for (field, flag) in [
        ("`name`", "`--name`"),
        ("`endpoint`", "`--endpoint`"),
        ("`vkeys = [...]`", "`--vkeys KEY`"),
        ("`tls_pem` (also `ca`)", "`--tls-pem FILE`"),
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("| {field} | {flag}"))),
            "README: the [[peers]] field {field} next to the flag {flag}"
        );
    }
    for needle in [
        "authorization",
        "Bearer <token>",
        "`decline`",
        "**`withdrawn`**",
        "`receipt fetch\n--wait [SECS]`",
        "Two nodes on one machine",
    ] {
        assert!(text.contains(needle), "README mentions {needle:?}");
    }
}
