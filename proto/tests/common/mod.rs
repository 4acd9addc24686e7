//! Shared helpers for the integration tests: locating the public vectors in
//! `proto/tests/vectors/` (in the repository, with their provenance and licences in its
//! README.md) and picking pieces out of them.
#![allow(dead_code)]

use std::path::PathBuf;

/// The vectors directory. Its absence fails the calling test (issue 16: a public-vector test
/// that passes without its vectors checks nothing).
pub fn vectors_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/"));
    assert!(
        dir.is_dir(),
        "{} is absent: the public-vector tests need proto/tests/vectors",
        dir.display()
    );
    dir
}

/// The contents of a vectors file; fails the test when it is absent.
pub fn vector_file(name: &str) -> String {
    let path = vectors_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text between the `n`th (0-based) `-----BEGIN-----` line and the next `-----END-----`
/// line, with a newline after each line, as the file's blocks are meant.
pub fn block(file: &str, n: usize) -> String {
    let mut blocks = Vec::new();
    let mut cur: Option<String> = None;
    for line in file.lines() {
        match (line, cur.as_mut()) {
            ("-----BEGIN-----", None) => cur = Some(String::new()),
            ("-----END-----", Some(_)) => blocks.push(cur.take().unwrap()),
            (l, Some(c)) => {
                c.push_str(l);
                c.push('\n');
            }
            _ => {}
        }
    }
    blocks
        .get(n)
        .cloned()
        .unwrap_or_else(|| panic!("vector block {n} not found"))
}

/// The first whole line that starts with `prefix`.
pub fn line_starting<'a>(file: &'a str, prefix: &str) -> &'a str {
    file.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?}"))
}

/// The first line that starts with `prefix`, without the prefix.
pub fn line_after<'a>(file: &'a str, prefix: &str) -> &'a str {
    file.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?}"))
}

/// The line that follows the first line equal to `header`.
pub fn line_following<'a>(file: &'a str, header: &str) -> &'a str {
    let mut it = file.lines();
    it.by_ref().find(|l| l.trim_end() == header);
    it.next()
        .unwrap_or_else(|| panic!("no line after {header:?}"))
}

/// The whitespace-delimited word that follows the first occurrence of `marker`.
pub fn word_after<'a>(file: &'a str, marker: &str) -> &'a str {
    let at = file
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} not found"));
    file[at + marker.len()..]
        .split_whitespace()
        .next()
        .unwrap_or("")
}
