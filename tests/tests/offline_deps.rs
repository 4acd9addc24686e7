//! Issue 10, item 3: `accordctl`'s offline commands (`tlog`, `note`, `key`, `receipt verify`)
//! depend on protocol code only. Built without its default `node` feature, accordctl links
//! neither the node nor the witness, and so no RocksDB; with it (the default), it does.
//! (`scripts/test.sh` also builds that offline accordctl and runs its commands.)

use std::process::Command;

/// The crate names in `cargo tree -p accordctl` (normal dependencies), with `extra` flags.
fn deps(extra: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(["tree", "--offline", "-p", "accordctl", "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .args(extra)
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn offline_accordctl_links_protocol_code_only() {
    let offline = deps(&["--no-default-features"]);
    assert!(offline.iter().any(|c| c == "accord-proto"), "{offline:?}");
    for heavy in [
        "accord-node",
        "accord-witness",
        "accord-daemon",
        "rocksdb",
        "librocksdb-sys",
    ] {
        assert!(
            !offline.iter().any(|c| c == heavy),
            "accordctl --no-default-features depends on {heavy}"
        );
    }
    // The default build (demo, bench, admin) does link the node, and with it RocksDB.
    let full = deps(&[]);
    for c in ["accord-node", "accord-witness", "rocksdb"] {
        assert!(full.iter().any(|d| d == c), "default accordctl lacks {c}");
    }
}
