//! Input bounds for identifiers (issue 8, "Input bounds"): pure functions that the config, `init`,
//! the record conversion (`Submit`, `Declare`, federation) and the AdminService share, so every
//! edge rejects the same things with the same words.
//!
//! | kind | rule |
//! |---|---|
//! | names (organisation, party, queue, peer) | 1–[`MAX_NAME`] bytes of `[A-Za-z0-9._-]`, not starting with `.` (so never `.` or `..`) |
//! | ids (commitment, item, reference) | 1–[`MAX_ID`] bytes, printable (no control character, incl. newline and NUL), no leading or trailing whitespace, and if `/`-separated, no empty, `.` or `..` part |
//! | endpoints (peers, witnesses) | exactly `https://host:port`: no userinfo, path, query or fragment; port 1–65535; host ≤ [`MAX_HOST`] bytes, a DNS name or an IP literal |
//!
//! Errors quote the offending value through [`quote`], which shows at most [`QUOTE_CHARS`]
//! characters, so a 1 MB id is never echoed back.

use std::net::IpAddr;

/// The node's own parties inside its organisation. They are here, in this leaf module, so the
/// config can reserve them without depending on the modules that write their records.
///
/// The Work service party: writes the node's own kernel records (expiries, implicit accepts).
pub const WORK_SERVICE: &str = "work-service";
/// The party that writes the node's envelope lifecycle records, votes and ticks (issue 27).
pub const ENVELOPE_SERVICE: &str = "envelope-service";
/// The operator's party: author of hand-made admission decisions and hold releases.
pub const OPERATOR_PARTY: &str = "operator";
/// Party names no configured party may take: records in these names are the node's own.
pub const RESERVED_PARTIES: [&str; 3] = [WORK_SERVICE, ENVELOPE_SERVICE, OPERATOR_PARTY];

/// Longest name (organisation, party, queue, peer), in bytes.
pub const MAX_NAME: usize = 64;
/// Longest id (commitment, line item, ...), in bytes.
pub const MAX_ID: usize = 256;
/// Longest endpoint host, in bytes (RFC 1035's limit for a DNS name).
pub const MAX_HOST: usize = 253;
/// Characters of a value quoted in an error message.
pub const QUOTE_CHARS: usize = 64;

/// Quotes `s` for an error message: at most [`QUOTE_CHARS`] characters (Debug-escaped, so a
/// newline or NUL shows as an escape), then `…(N bytes)` when cut.
pub fn quote(s: &str) -> String {
    if s.chars().count() <= QUOTE_CHARS {
        return format!("{s:?}");
    }
    let head: String = s.chars().take(QUOTE_CHARS).collect();
    format!("{head:?}…({} bytes)", s.len())
}

/// Cuts `s` to at most `max` bytes (on a character boundary), marking the cut with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A name: organisation, party, queue or peer. Err is the reason (the caller names the field).
pub fn name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.len() > MAX_NAME {
        return Err(format!("{}: longer than {MAX_NAME} bytes", quote(s)));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "{}: {c:?} is not allowed (use [A-Za-z0-9._-])",
            quote(s)
        ));
    }
    if s.starts_with('.') {
        return Err(format!("{}: must not start with '.'", quote(s)));
    }
    Ok(())
}

/// A party written `organisation/name`; returns the two parts.
pub fn party(s: &str) -> Result<(&str, &str), String> {
    let Some((o, n)) = s.split_once('/') else {
        return Err(format!("{}: expected \"organisation/party\"", quote(s)));
    };
    name(o).map_err(|r| format!("organisation: {r}"))?;
    name(n).map_err(|r| format!("party: {r}"))?;
    Ok((o, n))
}

/// An id: commitment, line item, reference.
pub fn id(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.len() > MAX_ID {
        return Err(format!("{}: longer than {MAX_ID} bytes", quote(s)));
    }
    if s.chars().any(char::is_control) {
        return Err(format!(
            "{}: control characters (newline, NUL, ...) are not allowed",
            quote(s)
        ));
    }
    if s.trim() != s {
        return Err(format!("{}: leading or trailing whitespace", quote(s)));
    }
    if s.contains('/') && s.split('/').any(|p| p.is_empty() || p == "." || p == "..") {
        return Err(format!("{}: empty, '.' or '..' part between '/'", quote(s)));
    }
    if s == "." || s == ".." {
        return Err(format!("{}: not an id", quote(s)));
    }
    Ok(())
}

/// A peer or witness endpoint: exactly `https://host:port`.
pub fn endpoint(s: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("{}: {why}; expected https://host:port", quote(s)));
    let Some(rest) = s.strip_prefix("https://") else {
        return bad("the scheme must be https");
    };
    if rest.contains(['/', '?', '#']) {
        return bad("no path, query or fragment");
    }
    if rest.contains('@') {
        return bad("no user information");
    }
    if rest.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return bad("no whitespace or control characters");
    }
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let Some((h, p)) = v6.split_once("]:") else {
            return bad("a bracketed IPv6 host needs ]:port");
        };
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return bad("not an IPv6 address");
        }
        (h, p)
    } else {
        let Some((h, p)) = rest.rsplit_once(':') else {
            return bad("the port is required");
        };
        (h, p)
    };
    match port.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) && !port.starts_with('+') => {}
        _ => return bad("the port must be 1-65535"),
    }
    if host.is_empty() {
        return bad("the host is required");
    }
    if host.len() > MAX_HOST {
        return bad(&format!("the host is longer than {MAX_HOST} bytes"));
    }
    if rest.starts_with('[') || host.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let labels_ok = host.trim_end_matches('.').split('.').all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    });
    if !labels_ok {
        return bad("the host is not a DNS name or IP address");
    }
    Ok(())
}

/// The most endpoints one peer may list.
pub const MAX_ENDPOINTS: usize = 8;

/// A peer's endpoints: one [`endpoint`], or several separated by commas — the instances of one
/// organisation's node (issue 31: a writer and its standbys), tried in order until one answers.
pub fn endpoints(s: &str) -> Result<Vec<&str>, String> {
    let list: Vec<&str> = s.split(',').map(str::trim).collect();
    if list.len() > MAX_ENDPOINTS {
        return Err(format!(
            "{} endpoints: at most {MAX_ENDPOINTS}, separated by commas",
            list.len()
        ));
    }
    for e in &list {
        endpoint(e)?;
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_endpoints_are_separated_by_commas() {
        assert_eq!(
            super::endpoints("https://a.example:1, https://b.example:2").unwrap(),
            vec!["https://a.example:1", "https://b.example:2"]
        );
        assert_eq!(
            super::endpoints("https://a:1").unwrap(),
            vec!["https://a:1"]
        );
        assert!(
            super::endpoints("https://a:1,")
                .unwrap_err()
                .contains("expected https://host:port")
        );
        assert!(
            super::endpoints("https://a:1,http://b:2")
                .unwrap_err()
                .contains("scheme")
        );
        let nine = ["https://a:1"; 9].join(",");
        assert!(super::endpoints(&nine).unwrap_err().contains("at most 8"));
    }

    #[test]
    fn names() {
        let big = "a".repeat(65);
        for (s, ok) in [
            ("acme", true),
            ("a.b-c_D9", true),
            (&"a".repeat(64), true),
            ("", false),
            (".", false),
            ("..", false),
            (".hidden", false),
            ("a/b", false),
            ("a b", false),
            (" a", false),
            ("a\n", false),
            ("a\0", false),
            ("é", false),
            (&big, false),
        ] {
            assert_eq!(name(s).is_ok(), ok, "{s:?}");
        }
    }

    #[test]
    fn parties() {
        for (s, ok) in [
            ("acme/alice", true),
            ("acme/", false),
            ("/alice", false),
            ("acme//alice", false),
            ("acme/al/ice", false),
            ("acme/..", false),
            ("acme/al\nice", false),
            ("acme", false),
        ] {
            assert_eq!(party(s).is_ok(), ok, "{s:?}");
        }
    }

    #[test]
    fn ids() {
        let big = "x".repeat(MAX_ID + 1);
        for (s, ok) in [
            ("r-1", true),
            ("federation:acme", true),
            ("HR: salary review", true),
            ("a/b/c", true),
            (&"x".repeat(MAX_ID), true),
            ("", false),
            (".", false),
            ("..", false),
            ("a//b", false),
            ("a/", false),
            ("/a", false),
            ("a/../b", false),
            ("a\nb", false),
            ("a\0b", false),
            ("a\tb", false),
            (" a", false),
            ("a ", false),
            (&big, false),
        ] {
            assert_eq!(id(s).is_ok(), ok, "{s:?}");
        }
    }

    #[test]
    fn endpoints() {
        let long_host = format!("https://{}:7443", "a".repeat(5000));
        for (s, ok) in [
            ("https://127.0.0.1:7443", true),
            ("https://node.example.org:443", true),
            ("https://localhost:1", true),
            ("https://[::1]:7443", true),
            ("https://h:65535", true),
            ("http://127.0.0.1:7443", false),
            ("https://user:pw@127.0.0.1:7443", false),
            ("https://127.0.0.1:99999", false),
            ("https://127.0.0.1:0", false),
            ("https://127.0.0.1", false),
            ("https://127.0.0.1:7443/path", false),
            ("https://127.0.0.1:7443?q=1", false),
            ("https://127.0.0.1:7443#f", false),
            ("https://:7443", false),
            ("https://bad_host:7443", false),
            ("https://-a.b:7443", false),
            ("https://[zz]:7443", false),
            ("https://a b:7443", false),
            (&long_host, false),
        ] {
            assert_eq!(endpoint(s).is_ok(), ok, "{s:?}");
        }
    }

    #[test]
    fn errors_never_echo_large_values() {
        let big = "x".repeat(4 << 20);
        for r in [name(&big), id(&big), endpoint(&big)] {
            let e = r.unwrap_err();
            assert!(e.len() < 300, "{} bytes", e.len());
            assert!(e.contains(&format!("({} bytes)", big.len())), "{e}");
        }
        assert_eq!(truncate("abcdef", 4), "a…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(quote("a\nb"), "\"a\\nb\"");
    }
}
