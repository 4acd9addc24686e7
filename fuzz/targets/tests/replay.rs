//! Every fuzz target's body, run on the stable toolchain over its saved inputs (issue 30, item
//! 2): the committed seeds (`fuzz/seeds/<target>/`), and, when a fuzzing run left them on this
//! machine, the corpus it grew (`fuzz/corpus/<target>/`) and the inputs that crashed it
//! (`fuzz/artifacts/<target>/`). An input whose run panics fails the test, naming the file; a
//! target without seeds fails too (a replay over nothing checks nothing).

use std::path::{Path, PathBuf};

/// `fuzz/`, beside this crate.
fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fuzz/")
        .to_path_buf()
}

/// The files directly in `dir`, sorted; none when it does not exist.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str) {
    let run = accord_fuzz_targets::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no target {target}"))
        .1;
    let fuzz = fuzz_dir();
    let seeds = inputs(&fuzz.join("seeds").join(target));
    assert!(
        !seeds.is_empty(),
        "fuzz/seeds/{target}/ is empty: run fuzz/seeds.sh"
    );
    let mut failed = Vec::new();
    let mut count = 0;
    for kind in ["seeds", "corpus", "artifacts"] {
        for path in inputs(&fuzz.join(kind).join(target)) {
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            count += 1;
            if std::panic::catch_unwind(|| run(&data)).is_err() {
                failed.push(path.display().to_string());
            }
        }
    }
    if target.ends_with("_config") {
        // The directory `init` made for the config targets (`scratch_dir`, one per process).
        let _ =
            std::fs::remove_dir_all(accord_fuzz_targets::scratch_dir(&target.replace('_', "-")));
    }
    eprintln!("{target}: {count} inputs replayed ({} seeds)", seeds.len());
    assert!(failed.is_empty(), "{target} failed on {failed:#?}");
}

macro_rules! replay_tests {
    (proto: [$($p:ident),*], node: [$($n:ident),*]) => {
        $(
            #[test]
            fn $p() {
                replay(stringify!($p));
            }
        )*
        $(
            #[cfg(feature = "node")]
            #[test]
            fn $n() {
                replay(stringify!($n));
            }
        )*
        /// The targets with a replay test here.
        #[cfg_attr(not(feature = "node"), allow(dead_code))]
        const REPLAYED: &[&str] = &[$(stringify!($p),)* $(stringify!($n)),*];
    };
}

replay_tests!(
    proto: [note, keys, checkpoint, merkle, signed_record, receipt],
    node: [record_edge, envelope, node_config, witness_config, witness_body]
);

/// A target added to `fuzz/fuzz_targets/` without its body here, or without a replay test
/// above, fails this.
#[cfg(feature = "node")]
#[test]
fn every_target_is_replayed() {
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let wrappers = sorted(
        inputs(&fuzz_dir().join("fuzz_targets"))
            .iter()
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect(),
    );
    let listed = sorted(
        accord_fuzz_targets::TARGETS
            .iter()
            .map(|(n, _)| n.to_string())
            .collect(),
    );
    let replayed = sorted(REPLAYED.iter().map(|n| n.to_string()).collect());
    assert_eq!(wrappers, listed, "fuzz_targets/ vs TARGETS");
    assert_eq!(listed, replayed, "TARGETS vs the replay tests");
}
