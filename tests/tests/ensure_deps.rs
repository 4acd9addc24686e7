//! `scripts/ensure-deps.sh` detects the libclang that bindgen loads (issue 9: a machine with only
//! Debian's `libclang-cpp` was taken for one with libclang, and the first build failed). The
//! script's detection runs against directory trees made here (`ACCORD_DEPS_ROOT`), in `--check`
//! mode, which prints the packages it would install and installs nothing.

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

#[test]
fn only_libclang_cpp_is_not_libclang() {
    // Debian 12 with llvm-14 but not libclang1-14: exactly the machine of issue 9.
    let got = missing(
        &[
            CXX,
            "usr/lib/llvm-14/lib/libclang-cpp.so.14",
            "usr/lib/x86_64-linux-gnu/libclang-cpp.so.14",
        ],
        None,
    );
    assert_eq!(got, vec!["libclang-dev".to_string()]);
}

#[test]
fn an_empty_machine_needs_libclang_and_a_compiler() {
    assert_eq!(missing(&[], None), vec!["libclang-dev", "g++"]);
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
            missing(&[CXX, "usr/lib/llvm-14/lib/libclang-cpp.so.14", f], None).is_empty(),
            "{f} should count as libclang"
        );
    }
}

#[test]
fn libclang_path_is_searched() {
    // An LLVM in a directory of its own, named by LIBCLANG_PATH (relative to the test root).
    assert!(missing(&[CXX, "opt/llvm/lib/libclang.so"], Some("/opt/llvm/lib")).is_empty());
    assert_eq!(
        missing(
            &[CXX, "opt/llvm/lib/libclang-cpp.so.17"],
            Some("/opt/llvm/lib")
        ),
        vec!["libclang-dev"]
    );
}
