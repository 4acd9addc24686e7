//! How read commands print: a readable table (the default) or JSON (`--output json`), and
//! progress bars for long work that stay hidden when stdout is not a terminal (scripts, pipes,
//! tests see only the results).

use clap::ValueEnum;
use std::io::IsTerminal;
use std::time::Duration;

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Output {
    /// Aligned columns or `key: value` lines for people.
    #[default]
    Table,
    /// One JSON document on stdout, for scripts.
    Json,
}

impl Output {
    /// `--output`, or JSON when the older `--json` flag is given.
    pub fn or_json(self, json: bool) -> Output {
        if json { Output::Json } else { self }
    }
}

/// Prints one JSON document.
pub fn json(v: &serde_json::Value) {
    println!("{v}");
}

/// Prints `rows` under `headers` in aligned columns (an empty table prints `(none)`).
pub fn table(headers: &[&str], rows: &[Vec<String>]) {
    if rows.is_empty() {
        println!("(none)");
        return;
    }
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = width.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = width[i]));
            }
        }
        println!("{}", s.trim_end());
    };
    line(headers.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

/// Prints `key: value` lines with the values aligned.
pub fn fields(pairs: &[(&str, String)]) {
    let w = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    for (k, v) in pairs {
        println!("{:<w$} {v}", format!("{k}:"));
    }
}

/// A progress bar of `len` steps on stderr; hidden unless stdout is a terminal.
pub fn bar(len: u64, msg: &str) -> indicatif::ProgressBar {
    if !std::io::stdout().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg:24} [{bar:30}] {pos}/{len} ({elapsed}, eta {eta})",
    ) {
        b.set_style(style.progress_chars("=> "));
    }
    b.set_message(msg.to_string());
    b
}

/// A spinner with a message on stderr; hidden unless stdout is a terminal.
pub fn spinner(msg: &str) -> indicatif::ProgressBar {
    if !std::io::stdout().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let s = indicatif::ProgressBar::new_spinner();
    s.set_message(msg.to_string());
    s.enable_steady_tick(Duration::from_millis(100));
    s
}
