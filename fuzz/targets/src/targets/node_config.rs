//! The node's config file: TOML → typed, validated `Config` (paths resolved against a node
//! directory made by `accord-node init`, so the seeds reach validation past "file not found").

use crate::scratch_dir;
use accord_node::config::Config;
use std::path::PathBuf;
use std::sync::OnceLock;

fn base() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch_dir("node-config").join("acme");
        if !dir.join("accord.toml").exists() {
            accord_node::init::init(&accord_node::init::InitOptions {
                dir: dir.clone(),
                name: "acme".into(),
                parties: vec!["alice".into()],
                listen: "127.0.0.1:0".into(),
                sans: vec![],
            })
            .expect("init");
        }
        dir
    })
}

/// One execution: panics when a property fails.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::parse(text, base()) {
        Ok(c) => {
            // Valid means valid: validate() agrees on the value parse returned.
            c.validate().expect("a parsed config validates");
        }
        Err(e) => {
            assert!(
                !e.field.is_empty(),
                "config error without a field: {}",
                e.reason
            );
            assert!(e.reason.len() < 4096, "error of {} bytes", e.reason.len());
        }
    }
}
