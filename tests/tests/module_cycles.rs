//! No cycle between the top-level modules of a crate (issue 10, "Done when": "No cycle between
//! modules of `accord-node` other than through traits"). Each `.rs` file belongs to the
//! top-level module it lives in (`node/src/federation/sender.rs` → `federation`); every
//! `crate::<module>` path in it (outside comments and `#[cfg(test)]` modules, which may build a
//! whole node) is an edge. A dependency inverted through a trait (the lower module declares the
//! trait, the upper one implements it) is no edge, so it passes. `scripts/module-cycles.sh` runs
//! this test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source a module depends through: comments and test-only modules removed.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        // `#[cfg(test)]` before a module: the rest of an inline test module, or a `mod tests;`
        // declaration whose file is skipped below.
        if t.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod "))
        {
            let next = lines.next().unwrap_or_default();
            if next.trim_end().ends_with('{') {
                break; // an inline test module runs to the end of the file by convention
            }
            continue;
        }
        let without = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(without);
        out.push('\n');
    }
    out
}

/// Module → the modules it names, with one file naming each for the message.
fn graph(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut g: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for f in files {
        let rel = f
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        if name == "tests" || name.ends_with("_tests") {
            continue; // test-only files
        }
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = code(&std::fs::read_to_string(&f).unwrap());
        let deps = g.entry(top.clone()).or_default();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let before_ok = i == 0
                || !rest.as_bytes()[i - 1].is_ascii_alphanumeric()
                    && rest.as_bytes()[i - 1] != b'_';
            let m: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if before_ok
                && !m.is_empty()
                && m != top
                && m.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            {
                deps.entry(m).or_insert_with(|| rel.clone());
            }
            rest = after;
        }
    }
    // Only edges to modules of this crate (`crate::Error` and the like are re-exports).
    let mods: BTreeSet<String> = g.keys().cloned().collect();
    for deps in g.values_mut() {
        deps.retain(|m, _| mods.contains(m));
    }
    g
}

/// Every cycle, as a path `a -> b -> ... -> a` with the file that makes each edge.
fn cycles(g: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen_sets: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for start in g.keys() {
        // Depth-first search for a path back to `start` through modules after it (each cycle
        // once, from its smallest module).
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, path)) = stack.pop() {
            for next in g
                .get(&at)
                .map(|d| d.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default()
            {
                if next == *start {
                    let set: BTreeSet<String> = path.iter().cloned().collect();
                    if seen_sets.insert(set) {
                        let mut s = String::new();
                        for w in path.windows(2) {
                            s.push_str(&format!("{} -> ({}) ", w[0], g[&w[0]][&w[1]]));
                        }
                        let last = path.last().unwrap();
                        s.push_str(&format!("{last} -> ({}) {start}", g[last][start]));
                        found.push(s);
                    }
                } else if next > *start && !path.contains(&next) && path.len() < 8 {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next, p));
                }
            }
        }
    }
    found
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn assert_acyclic(krate: &str) {
    let src = root().join(krate).join("src");
    assert!(src.is_dir(), "{} is missing", src.display());
    let g = graph(&src);
    assert!(g.len() > 3, "{krate}: found only {} modules", g.len());
    let c = cycles(&g);
    assert!(c.is_empty(), "{krate}: module cycles:\n{}", c.join("\n"));
}

#[test]
fn accord_node_modules_form_no_cycle() {
    assert_acyclic("node");
}

/// The checker finds a cycle when there is one (a test that cannot fail is a defect).
#[test]
fn a_cycle_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(
        src.join("a.rs"),
        "use crate::b::Thing;\n// crate::c in a comment\n",
    )
    .unwrap();
    std::fs::write(src.join("b/mod.rs"), "pub mod inner;\n").unwrap();
    std::fs::write(src.join("b/inner.rs"), "fn f() { crate::a::g() }\n").unwrap();
    std::fs::write(
        src.join("c.rs"),
        "pub fn h() {}\n#[cfg(test)]\nmod tests {\n use crate::a::x;\n}\n",
    )
    .unwrap();
    std::fs::write(src.join("d.rs"), "use crate::c::h;\n").unwrap();
    let g = graph(src);
    let c = cycles(&g);
    assert_eq!(c.len(), 1, "{c:?}");
    assert!(
        c[0].starts_with("a -> (a.rs) b -> (b/inner.rs) a"),
        "{}",
        c[0]
    );
    assert!(!g["c"].contains_key("a"), "test modules are no edge");
}
