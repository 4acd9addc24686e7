//! accordctl's offline verification against the public vectors (proto/tests/vectors), run as the
//! real binary: the real Sigsum checkpoint with its eight witness cosignatures verifies with
//! `accordctl note verify`, a tampered copy does not, and usage errors exit 2. Also: a node with
//! a bad config exits non-zero naming the field, before binding any port.

use accord_tests::{bin, run_bin};

/// The public vectors; their absence fails the test (issue 16: no silent pass).
fn vectors() -> String {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../proto/tests/vectors/signed-note.txt"
    );
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{p}: {e} (the public vectors are in proto/tests/vectors)"))
}

/// The Sigsum note (the second BEGIN/END block after the "real Sigsum" heading) and the vkeys of
/// its eight witnesses (`vkey=` fields).
fn sigsum(text: &str) -> (String, Vec<String>) {
    let section = &text[text.find("real Sigsum").expect("sigsum section")..];
    let blocks: Vec<&str> = section
        .split("-----BEGIN-----\n")
        .skip(1)
        .map(|b| b.split("-----END-----").next().unwrap())
        .collect();
    let note = blocks[1].to_string();
    let vkeys = section
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("vkey="))
        .map(str::to_string)
        .collect();
    (note, vkeys)
}

#[test]
fn sigsum_checkpoint_and_eight_cosignatures_verify() {
    let text = vectors();
    let (note, vkeys) = sigsum(&text);
    assert_eq!(vkeys.len(), 8, "eight witness keys in the vectors");
    let mut args = vec!["note", "verify"];
    for v in &vkeys {
        args.extend(["--vkey", v.as_str()]);
    }
    args.push("-");
    let (code, out, err) = run_bin("accordctl", &args, Some(&note)).unwrap();
    assert_eq!(code, 0, "{out}{err}");
    for v in &vkeys {
        let name = v.split('+').next().unwrap();
        assert!(out.contains(name), "{name} missing from {out}");
    }
    assert!(
        out.contains("1770193051"),
        "cosignature timestamps are printed: {out}"
    );

    // One flipped character in a cosignature: invalid, exit 1 with a one-line reason.
    let tampered = note.replacen("rDC+YQAAAABpgwCb", "rDC+YQAAAABpgwCc", 1);
    let (code, _, err) = run_bin("accordctl", &args, Some(&tampered)).unwrap();
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one-line reason: {err}");
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, _) = run_bin(
        "accordctl",
        &["tlog", "verify-inclusion", "--index", "x"],
        None,
    )
    .unwrap();
    assert_eq!(code, 2);
    let (code, _, _) = run_bin(
        "accordctl",
        &["note", "verify", "--vkey", "not-a-key", "-"],
        Some("x\n"),
    )
    .unwrap();
    assert_eq!(code, 2);
}

#[test]
fn bad_node_config_names_the_field_and_binds_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("acme");
    let out = std::process::Command::new(bin("accord-node"))
        .args(["init", "--dir"])
        .arg(&dir)
        .args(["--name", "acme", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let cfg = dir.join("accord.toml");
    let good = std::fs::read_to_string(&cfg).unwrap();
    // Hold a port: if the node bound before validating, it would fail on the port, not the field.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    for (edit, field) in [
        (
            good.replace(
                "checkpoint_interval_ms = 1000",
                "checkpoint_interval_ms = 0",
            ),
            "log.checkpoint_interval_ms",
        ),
        (good.replace("k = 0", "k = 3"), "witnesses.k"),
        (
            good.replace("node = \"keys/node.skey\"", "node = \"keys/missing.skey\""),
            "keys.node",
        ),
        (
            good.replace(
                "administrative_close = []",
                "administrative_close = [\"nobody\"]",
            ),
            "authorities.administrative_close[0]",
        ),
    ] {
        let edit = edit.replace(
            "listen = \"127.0.0.1:0\"",
            &format!("listen = \"127.0.0.1:{port}\""),
        );
        std::fs::write(&cfg, edit).unwrap();
        let out = std::process::Command::new(bin("accord-node"))
            .args(["serve", "--config"])
            .arg(&cfg)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{field}: should fail");
        assert!(err.contains(field), "{field} not named in: {err}");
        assert!(!err.contains("bind"), "validated before binding: {err}");
    }
    drop(held);
}
