//! Errors that say what to do next: a failed connection or a refused call is turned into one
//! line naming the likely cause and the flag to fix (issue 9, "errors that say what to do next").

use std::path::Path;

/// The messages of an error and its sources, joined with ": ".
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let m = s.to_string();
        if parts.last() != Some(&m) {
            parts.push(m);
        }
        cur = s.source();
    }
    parts.join(": ")
}

/// A failed connection to `endpoint`, with the likely cause and what to check.
pub fn connect_error(endpoint: &str, ca: &Path, e: &tonic::transport::Error) -> anyhow::Error {
    let detail = chain(e);
    let low = detail.to_lowercase();
    let hint = if low.contains("connection refused") {
        "connection refused — is the node running? check --node (the address `accord-node serve` \
         printed as `listening ADDR`)"
            .to_string()
    } else if low.contains("dns") || low.contains("lookup") || low.contains("resolve") {
        "the host name does not resolve — check --node".to_string()
    } else if low.contains("certificate") || low.contains("unknownissuer") || low.contains("tls") {
        format!(
            "the TLS handshake failed ({detail}) — pass the node's CA with --ca (its tls/ca.pem; now {}), and --domain if its certificate names another host",
            ca.display()
        )
    } else if low.contains("timed out") || low.contains("timeout") {
        "timed out — is --node the right address, and is the port reachable?".to_string()
    } else {
        format!("{detail} — is the node running? check --node")
    };
    anyhow::anyhow!("cannot connect to {endpoint}: {hint}")
}

/// A refused call, with the reason and what to do next (`token_flag`: how a token is passed).
pub fn status_error(s: &tonic::Status, token_flag: &str) -> anyhow::Error {
    let meta = |k: &str| {
        s.metadata()
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let (reason, field) = (meta("accord-reason"), meta("accord-field"));
    let code = s.code();
    let what = match (reason.is_empty(), field.is_empty()) {
        (true, _) => format!("{code:?}: {}", s.message()),
        (false, true) => format!("{code:?} ({reason}): {}", s.message()),
        (false, false) => format!("{code:?} ({reason}, field {field}): {}", s.message()),
    };
    let next = match code {
        tonic::Code::Unauthenticated => format!(" — pass {token_flag}"),
        tonic::Code::PermissionDenied if reason.contains("token") || reason.is_empty() => {
            format!(" — the token is not accepted for this call: pass {token_flag}")
        }
        tonic::Code::Unavailable => {
            " — is the node running and reachable? check --node".to_string()
        }
        tonic::Code::DeadlineExceeded => " — the node did not answer in time; try again".into(),
        tonic::Code::Unimplemented => {
            " — the node does not serve this call: is --node a node (not a witness) of this version?"
                .into()
        }
        _ => String::new(),
    };
    anyhow::anyhow!("{what}{next}")
}
