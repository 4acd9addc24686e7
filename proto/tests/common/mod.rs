//! Shared helpers for the integration tests: locating the public vectors in
//! `../../shared/vectors/` (read in place, never copied) and picking pieces out of them.
#![allow(dead_code)]

use std::path::PathBuf;

/// The vectors directory, or `None` (after printing a note) when it is absent, in which case
/// the calling test returns early and passes.
pub fn vectors_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/vectors/"
    ));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "note: {} is absent; skipping the public-vector test",
            dir.display()
        );
        None
    }
}

/// The contents of a vectors file, or `None` when the vectors are absent.
pub fn vector_file(name: &str) -> Option<String> {
    let path = vectors_dir()?.join(name);
    Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
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
