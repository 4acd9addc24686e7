//! The witness's config file: TOML → validated `Config`, paths resolved against a witness
//! directory made by `accord-witness init`.

use crate::scratch_dir;
use accord_witness::Config;
use std::path::PathBuf;
use std::sync::OnceLock;

fn base() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch_dir("witness-config").join("w");
        if !dir.join("witness.toml").exists() {
            accord_witness::init::init(&accord_witness::init::InitOptions {
                dir: dir.clone(),
                name: "w1.example".into(),
                sans: vec![],
                grpc_listen: "127.0.0.1:0".into(),
                http_listen: "127.0.0.1:0".into(),
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
    if let Err(e) = Config::from_toml(text, base()) {
        let msg = e.to_string();
        assert!(msg.len() < 8192, "error of {} bytes", msg.len());
    }
}
