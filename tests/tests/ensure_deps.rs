//! `scripts/ensure-deps.sh` detects the libclang that bindgen loads (issue 9: a machine with only
//! Debian's `libclang-cpp` was taken for one with libclang, and the first build failed), and what
//! the suite's real clients and the alert rules' check need (issue 28: Python's venv with
//! ensurepip, Node.js, npm, promtool). The script's detection runs against directory trees made
//! here (`ACCORD_DEPS_ROOT`), in `--check` mode, which prints the packages it would install and
//! installs nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ensure-deps.sh")
}

/// Makes a tree holding `files` (relative paths) and returns what `--check` says is missing.
fn missing(files: &[&str], libclang_path: Option<&str>) -> Vec<String> {
    let root = tempfile::tempdir().unwrap();
    for f in files {
        let p = root.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"").unwrap();
    }
    let mut cmd = Command::new("bash");
    cmd.arg(script())
        .arg("--check")
        .env("ACCORD_DEPS_ROOT", root.path())
        .env_remove("LIBCLANG_PATH");
    if let Some(p) = libclang_path {
        cmd.env("LIBCLANG_PATH", p);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "ensure-deps --check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

const CXX: &str = "usr/bin/c++";

/// What the clients and the rules' check need, all present: Debian's python3 with python3-venv's
/// ensurepip, nodejs, npm, prometheus's promtool and PostgreSQL's server programs.
const CLIENT_TOOLS: [&str; 7] = [
    "usr/bin/python3",
    "usr/lib/python3.11/ensurepip/__init__.py",
    "usr/bin/node",
    "usr/bin/npm",
    "usr/bin/promtool",
    "usr/lib/postgresql/15/bin/initdb",
    "usr/lib/postgresql/15/bin/pg_ctl",
];

/// `files` and [`CLIENT_TOOLS`].
fn with_tools<'a>(files: &[&'a str]) -> Vec<&'a str> {
    files.iter().copied().chain(CLIENT_TOOLS).collect()
}

#[test]
fn only_libclang_cpp_is_not_libclang() {
    // Debian 12 with llvm-14 but not libclang1-14: exactly the machine of issue 9.
    let got = missing(
        &with_tools(&[
            CXX,
            "usr/lib/llvm-14/lib/libclang-cpp.so.14",
            "usr/lib/x86_64-linux-gnu/libclang-cpp.so.14",
        ]),
        None,
    );
    assert_eq!(got, vec!["libclang-dev".to_string()]);
}

#[test]
fn an_empty_machine_needs_libclang_a_compiler_and_the_client_tools() {
    assert_eq!(
        missing(&[], None),
        vec![
            "libclang-dev",
            "g++",
            "python3-venv",
            "nodejs",
            "npm",
            "prometheus",
            "postgresql"
        ]
    );
}

#[test]
fn each_client_tool_missing_is_named() {
    const LIBCLANG: &str = "usr/lib/llvm-14/lib/libclang.so";
    assert!(missing(&with_tools(&[CXX, LIBCLANG]), None).is_empty());
    for (absent, package) in [
        ("usr/bin/node", "nodejs"),
        ("usr/bin/npm", "npm"),
        ("usr/bin/promtool", "prometheus"),
        ("usr/lib/postgresql/15/bin/initdb", "postgresql"),
        ("usr/lib/postgresql/15/bin/pg_ctl", "postgresql"),
        // Debian's python3 without python3-venv: no ensurepip, so `python3 -m venv` fails.
        ("usr/lib/python3.11/ensurepip/__init__.py", "python3-venv"),
        ("usr/bin/python3", "python3-venv"),
    ] {
        let files: Vec<&str> = with_tools(&[CXX, LIBCLANG])
            .into_iter()
            .filter(|f| *f != absent)
            .collect();
        assert_eq!(missing(&files, None), vec![package], "without {absent}");
    }
    // A command installed outside Debian's packages (npm bundled with another nodejs, a
    // promtool in /usr/local/bin) counts.
    let files: Vec<&str> = with_tools(&[CXX, LIBCLANG, "usr/local/bin/promtool"])
        .into_iter()
        .filter(|f| *f != "usr/bin/promtool")
        .collect();
    assert!(missing(&files, None).is_empty());
}

#[test]
fn every_name_bindgen_loads_counts() {
    for f in [
        "usr/lib/llvm-14/lib/libclang.so",
        "usr/lib/llvm-14/lib/libclang-14.so",
        "usr/lib/llvm-14/lib/libclang.so.1",
        "usr/lib/x86_64-linux-gnu/libclang-14.so.1",
        "usr/local/lib/libclang.so",
        "usr/lib64/libclang.so.16",
    ] {
        assert!(
            missing(
                &with_tools(&[CXX, "usr/lib/llvm-14/lib/libclang-cpp.so.14", f]),
                None
            )
            .is_empty(),
            "{f} should count as libclang"
        );
    }
}

#[test]
fn libclang_path_is_searched() {
    // An LLVM in a directory of its own, named by LIBCLANG_PATH (relative to the test root).
    assert!(
        missing(
            &with_tools(&[CXX, "opt/llvm/lib/libclang.so"]),
            Some("/opt/llvm/lib")
        )
        .is_empty()
    );
    assert_eq!(
        missing(
            &with_tools(&[CXX, "opt/llvm/lib/libclang-cpp.so.17"]),
            Some("/opt/llvm/lib")
        ),
        vec!["libclang-dev"]
    );
}
