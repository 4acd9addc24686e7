//! Flag values of the write commands (`work declare`, `run create|move|...`), checked before
//! anything is sent: each bad value is a [`FlagError`] naming the flag, with a machine-readable
//! [`Reason`]. Printed as `accordctl: --flag: reason: message` (and, with `--output json`, as one
//! JSON document on stdout); the command exits 2 and sends nothing.

use accord_proto::pb::record::v1::PartyRef;
use accord_proto::pb::work::v1 as pb;
use serde_json::{Value, json};

use crate::output::{self, Output};

/// Why a flag's value was refused (a closed list; the `reason` of the JSON error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A flag the operation requires is absent.
    MissingFlag,
    /// Not a party `org/name` of valid names.
    InvalidParty,
    /// Not a valid commitment, item or run id.
    InvalidId,
    /// Not a record id (64 hex digits).
    InvalidRecordId,
    /// Outside the flag's closed list of values.
    UnknownValue,
    /// Not a time (Unix ms, RFC 3339 UTC, or +N{s,m,h,d} from now).
    InvalidTime,
    /// Not a number in the flag's range.
    InvalidNumber,
    /// Not `KEY=VALUE` where one is expected.
    InvalidPair,
    /// Flags that cannot go together, or a choice between flags not made.
    ConflictingFlags,
    /// A file named by a flag cannot be read.
    UnreadableFile,
}

impl Reason {
    /// The snake_case reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::MissingFlag => "missing_flag",
            Reason::InvalidParty => "invalid_party",
            Reason::InvalidId => "invalid_id",
            Reason::InvalidRecordId => "invalid_record_id",
            Reason::UnknownValue => "unknown_value",
            Reason::InvalidTime => "invalid_time",
            Reason::InvalidNumber => "invalid_number",
            Reason::InvalidPair => "invalid_pair",
            Reason::ConflictingFlags => "conflicting_flags",
            Reason::UnreadableFile => "unreadable_file",
        }
    }
}

/// A flag whose value was refused before sending.
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {}: {message}", reason.as_str())]
pub struct FlagError {
    /// The flag, e.g. `--reason`.
    pub flag: &'static str,
    /// Why.
    pub reason: Reason,
    /// What was wrong and what is expected.
    pub message: String,
}

/// A command that already reported its outcome and exits with this code (`main` prints nothing
/// more).
#[derive(Debug, thiserror::Error)]
#[error("exit {0}")]
pub struct Exit(pub u8);

/// Exit code: a flag was refused, nothing was sent.
pub const EXIT_FLAG: u8 = 2;
/// Exit code: the record was recorded but the kernel rejected it.
pub const EXIT_REJECTED: u8 = 3;

/// Shorthand for a [`FlagError`].
pub fn err(flag: &'static str, reason: Reason, message: impl Into<String>) -> FlagError {
    FlagError {
        flag,
        reason,
        message: message.into(),
    }
}

/// Reports a refused flag (stderr; and one JSON document on stdout with `--output json`) and
/// returns the error that makes `main` exit 2.
pub fn report(e: FlagError, out: Output) -> anyhow::Error {
    if out == Output::Json {
        output::json(&json!({
            "error": "invalid_flag",
            "flag": e.flag,
            "reason": e.reason.as_str(),
            "message": e.message,
        }));
    }
    eprintln!("accordctl: {e} (nothing was sent)");
    Exit(EXIT_FLAG).into()
}

/// A flag's value quoted for a message: at most 64 characters.
fn q(s: &str) -> String {
    if s.chars().count() <= 64 {
        format!("{s:?}")
    } else {
        format!(
            "{:?}…({} bytes)",
            s.chars().take(64).collect::<String>(),
            s.len()
        )
    }
}

/// The value of a flag the operation requires.
pub fn required<'a>(flag: &'static str, v: &'a Option<String>) -> Result<&'a str, FlagError> {
    v.as_deref()
        .ok_or_else(|| err(flag, Reason::MissingFlag, "required by this operation"))
}

/// An organisation or party name: 1–64 bytes of `[A-Za-z0-9._-]`, not starting with `.`.
fn name_ok(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A party written `org/name`.
pub fn party(flag: &'static str, s: &str) -> Result<PartyRef, FlagError> {
    match s.split_once('/') {
        Some((o, n)) if name_ok(o) && name_ok(n) => Ok(PartyRef {
            organisation: o.into(),
            name: n.into(),
        }),
        _ => Err(err(
            flag,
            Reason::InvalidParty,
            format!(
                "{} is not a party: expected org/name (e.g. acme/alice)",
                q(s)
            ),
        )),
    }
}

/// An optional party.
pub fn opt_party(flag: &'static str, v: &Option<String>) -> Result<Option<PartyRef>, FlagError> {
    v.as_deref().map(|s| party(flag, s)).transpose()
}

/// Repeated parties.
pub fn parties(flag: &'static str, v: &[String]) -> Result<Vec<PartyRef>, FlagError> {
    v.iter().map(|s| party(flag, s)).collect()
}

/// A commitment, line-item or run id: 1–256 bytes, no control characters, no leading or
/// trailing space, no empty, `.` or `..` part between `/`.
pub fn id(flag: &'static str, s: &str) -> Result<String, FlagError> {
    let ok = (1..=256).contains(&s.len())
        && !s.chars().any(char::is_control)
        && s.trim() == s
        && s.split('/').all(|p| !matches!(p, "" | "." | ".."));
    if ok {
        Ok(s.to_string())
    } else {
        Err(err(
            flag,
            Reason::InvalidId,
            format!(
                "{} is not an id: 1-256 bytes, no control characters, no leading or trailing space, no empty, . or .. part between /",
                q(s)
            ),
        ))
    }
}

/// A record id: 64 hex digits.
pub fn record_id(flag: &'static str, s: &str) -> Result<Vec<u8>, FlagError> {
    match hex::decode(s.trim()) {
        Ok(b) if b.len() == 32 => Ok(b),
        _ => Err(err(
            flag,
            Reason::InvalidRecordId,
            format!(
                "{} is not a record id: 64 hex digits (as `work declare` and `work show --output json` print them)",
                q(s)
            ),
        )),
    }
}

/// An optional record id (empty bytes when absent).
pub fn opt_record_id(flag: &'static str, v: &Option<String>) -> Result<Vec<u8>, FlagError> {
    v.as_deref()
        .map(|s| record_id(flag, s))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// Repeated record ids.
pub fn record_ids(flag: &'static str, v: &[String]) -> Result<Vec<Vec<u8>>, FlagError> {
    v.iter().map(|s| record_id(flag, s)).collect()
}

/// A number.
pub fn num<T: std::str::FromStr>(flag: &'static str, s: &str) -> Result<T, FlagError> {
    s.trim().parse().map_err(|_| {
        err(
            flag,
            Reason::InvalidNumber,
            format!("{} is not a number in range", q(s)),
        )
    })
}

/// An optional number (the type's default when absent).
pub fn opt_num<T: std::str::FromStr + Default>(
    flag: &'static str,
    v: &Option<String>,
) -> Result<T, FlagError> {
    v.as_deref()
        .map(|s| num(flag, s))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// One value of a closed list, by its wire name; `list` pairs names with enum numbers.
pub fn choice(flag: &'static str, s: &str, list: &[(&str, i32)]) -> Result<i32, FlagError> {
    list.iter()
        .find(|(n, _)| *n == s)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            err(
                flag,
                Reason::UnknownValue,
                format!(
                    "{} is not one of: {}",
                    q(s),
                    list.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                ),
            )
        })
}

/// An optional closed-list value (0, unspecified, when absent).
pub fn opt_choice(
    flag: &'static str,
    v: &Option<String>,
    list: &[(&str, i32)],
) -> Result<i32, FlagError> {
    v.as_deref()
        .map(|s| choice(flag, s, list))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// `KEY=VALUE`.
pub fn pair<'a>(flag: &'static str, s: &'a str) -> Result<(&'a str, &'a str), FlagError> {
    s.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| {
            err(
                flag,
                Reason::InvalidPair,
                format!("{} is not KEY=VALUE", q(s)),
            )
        })
}

/// A time as Unix milliseconds: digits (Unix ms), RFC 3339 in UTC
/// (`2030-01-31T17:00:00Z`, optional `.fff`), or `+N` with a unit `s`, `m`, `h` or `d` (from
/// now, by this machine's clock).
pub fn time(flag: &'static str, s: &str, now_ms: i64) -> Result<i64, FlagError> {
    let bad = || {
        err(
            flag,
            Reason::InvalidTime,
            format!(
                "{} is not a time: Unix milliseconds, RFC 3339 UTC (2030-01-31T17:00:00Z) or +N{{s,m,h,d}} from now",
                q(s)
            ),
        )
    };
    let t = s.trim();
    if let Some(rel) = t.strip_prefix('+') {
        let (n, unit) = rel.split_at(rel.len().saturating_sub(1));
        let n: i64 = n.parse().map_err(|_| bad())?;
        let ms = match unit {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        return n
            .checked_mul(ms)
            .and_then(|d| now_ms.checked_add(d))
            .ok_or_else(bad);
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| bad());
    }
    rfc3339_ms(t).ok_or_else(bad)
}

/// An optional time (0, none, when absent).
pub fn opt_time(flag: &'static str, v: &Option<String>, now_ms: i64) -> Result<i64, FlagError> {
    v.as_deref()
        .map(|s| time(flag, s, now_ms))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` as Unix ms.
fn rfc3339_ms(s: &str) -> Option<i64> {
    let s = s.strip_suffix('Z').or_else(|| s.strip_suffix('z'))?;
    let (date, clock) = s.split_once(['T', 't', ' '])?;
    let mut d = date.splitn(3, '-');
    let (y, mo, da): (i64, i64, i64) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut c = hms.splitn(3, ':');
    let (h, mi, se): (i64, i64, i64) = (
        c.next()?.parse().ok()?,
        c.next()?.parse().ok()?,
        c.next()?.parse().ok()?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let ms: i64 = if frac.is_empty() {
        0
    } else if frac.len() <= 9 && frac.bytes().all(|b| b.is_ascii_digit()) {
        format!("{frac:0<3}")[..3].parse().ok()?
    } else {
        return None;
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy.rem_euclid(400);
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3_600 + mi * 60 + se) * 1_000) + ms)
}

/// This machine's clock in Unix ms.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The `SubmitResponse` durability's wire name (`recorded`, ...).
fn durability(d: i32) -> String {
    pb::Durability::try_from(d)
        .map(|d| {
            d.as_str_name()
                .trim_start_matches("DURABILITY_")
                .to_lowercase()
        })
        .unwrap_or_else(|_| "unspecified".into())
}

/// The rejection code the node answers for a record recorded at a node that is not its
/// commitment's home, until the home's decision arrives.
pub const AWAITING_SEQUENCE: &str = "awaiting_sequence";

/// What a kernel rejection code means: the row of README.md's table of rejection codes (the
/// documented closed list; `readme_codes.rs` keeps it complete).
pub fn meaning(code: &str) -> String {
    if code == AWAITING_SEQUENCE {
        return "Recorded and sent to the commitment's home, which orders its records; the home's decision arrives in about one round trip (--wait waits for it).".into();
    }
    const README: &str = include_str!("../../README.md");
    let table = README
        .split_once("## Rejection codes")
        .map_or("", |(_, rest)| rest);
    let table = table.split("**Federation admission**").next().unwrap_or("");
    let key = format!("| `{code}` |");
    table
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .map(|m| m.trim().trim_end_matches('|').trim().to_string())
        .unwrap_or_default()
}

/// How a write's answer is reported: one line per field, or one JSON document; the exit code
/// says the outcome (0 applied or awaiting the home's order, 3 rejected by the kernel).
pub fn submitted(
    what: &[(&str, String)],
    r: &pb::SubmitResponse,
    outcome: Option<&pb::Outcome>,
    out: Output,
) -> anyhow::Result<()> {
    let o = outcome.or(r.outcome.as_ref());
    let applied = o.is_some_and(|o| o.applied);
    let code = o.map(|o| o.rejection_code.clone()).unwrap_or_default();
    let detail = o.map(|o| o.rejection_detail.clone()).unwrap_or_default();
    let status = if applied {
        "applied"
    } else if code == AWAITING_SEQUENCE {
        AWAITING_SEQUENCE
    } else {
        "rejected"
    };
    let meaning = if applied {
        String::new()
    } else {
        meaning(&code)
    };
    if out == Output::Json {
        let mut doc = serde_json::Map::new();
        for (k, v) in what {
            doc.insert((*k).to_string(), Value::String(v.clone()));
        }
        for (k, v) in [
            ("record_id", json!(hex::encode(&r.record_id))),
            ("sequence", json!(r.sequence)),
            ("durability", json!(durability(r.durability))),
            ("duplicate", json!(r.duplicate)),
            ("outcome", json!(status)),
            ("applied", json!(applied)),
            ("rejection_code", json!(code)),
            ("rejection_detail", json!(detail)),
            ("meaning", json!(meaning)),
        ] {
            doc.insert(k.into(), v);
        }
        output::json(&Value::Object(doc));
    } else {
        let mut f: Vec<(&str, String)> = what.to_vec();
        f.push(("record", hex::encode(&r.record_id)));
        f.push((
            "sequence",
            format!(
                "{}{}",
                r.sequence,
                if r.duplicate { " (duplicate)" } else { "" }
            ),
        ));
        f.push(("durability", durability(r.durability)));
        f.push(("outcome", status.to_string()));
        if !applied {
            f.push(("code", code.clone()));
            f.push(("meaning", meaning));
            if !detail.is_empty() {
                f.push(("detail", detail));
            }
        }
        output::fields(&f);
    }
    if applied || code == AWAITING_SEQUENCE {
        Ok(())
    } else {
        Err(Exit(EXIT_REJECTED).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(
            time("--due", "1700000000000", 0).unwrap(),
            1_700_000_000_000
        );
        assert_eq!(time("--due", "+2h", 1_000).unwrap(), 7_201_000);
        assert_eq!(
            time("--due", "2030-01-31T17:00:00Z", 0).unwrap(),
            1_896_109_200_000
        );
        assert_eq!(time("--due", "1970-01-01T00:00:01.5Z", 0).unwrap(), 1_500);
        for bad in ["tomorrow", "+3w", "2030-13-01T00:00:00Z", "", "+h"] {
            let e = time("--due", bad, 0).unwrap_err();
            assert_eq!((e.flag, e.reason), ("--due", Reason::InvalidTime), "{bad}");
        }
    }

    #[test]
    fn parties_and_ids() {
        assert_eq!(party("--obligee", "acme/alice").unwrap().name, "alice");
        for bad in ["alice", "acme/", "/alice", "a//b", "acme/al ice", "acme/.x"] {
            let e = party("--obligee", bad).unwrap_err();
            assert_eq!(e.reason, Reason::InvalidParty, "{bad}");
        }
        assert!(id("COMMITMENT", "deal-1/a").is_ok());
        for bad in ["", " x", "a//b", "a/../b", "x\n"] {
            assert_eq!(id("COMMITMENT", bad).unwrap_err().reason, Reason::InvalidId);
        }
        assert_eq!(
            record_id("--basis", "abc").unwrap_err().reason,
            Reason::InvalidRecordId
        );
    }

    #[test]
    fn every_kernel_code_has_a_meaning() {
        assert_eq!(
            meaning("invalid_state"),
            "The state of an item acted on does not allow the operation."
        );
        assert!(meaning(AWAITING_SEQUENCE).contains("home"));
        assert_eq!(meaning("no_such_code"), "");
    }
}
