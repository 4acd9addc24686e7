//! `[storage]`: which engine holds the ledger (issue 31), and RocksDB's memory (issue 15).

use super::{ConfigError, err};
use serde::Deserialize;
use std::path::PathBuf;

/// The store's engine and its tuning.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// `rocksdb` (the default: embedded, in `data_dir`) or `postgres` (`url`, several
    /// instances of one node sharing it behind the writer's lease).
    #[serde(default)]
    pub backend: Backend,
    /// The block cache shared by every column family, MiB: data blocks, and the index and
    /// filter blocks of every table (they are charged to it, not held beside it). RocksDB only.
    #[serde(default = "default_block_cache_mib")]
    pub block_cache_mib: u64,
    /// PostgreSQL: `postgres://user@host:port/database`, without a password.
    #[serde(default)]
    pub url: Option<String>,
    /// PostgreSQL: a file holding the password (never the password itself in the config).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// PostgreSQL: how long the writer's lease lasts without renewal, ms (renewed every third
    /// of it): the bound on how long a dead writer keeps the others waiting.
    #[serde(default = "default_lease_ms")]
    pub lease_ms: u64,
    /// PostgreSQL: how often a standby reads how far the writer committed, ms (its reads lag
    /// the writer by about this much).
    #[serde(default = "default_follow_ms")]
    pub follow_ms: u64,
}

/// The store's engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Embedded RocksDB in `data_dir`.
    #[default]
    Rocksdb,
    /// PostgreSQL at `[storage] url`.
    Postgres,
}

/// Largest accepted `storage.block_cache_mib` (64 GiB): more is a typo, not a cache.
pub const MAX_BLOCK_CACHE_MIB: u64 = 65_536;

/// Accepted `storage.lease_ms`: shorter renews too often to survive a slow database; longer
/// leaves a dead writer's organisation unwritable for minutes.
pub const LEASE_MS: std::ops::RangeInclusive<u64> = 300..=60_000;

fn default_block_cache_mib() -> u64 {
    64
}

fn default_lease_ms() -> u64 {
    3_000
}

/// Accepted `storage.follow_ms`.
pub const FOLLOW_MS: std::ops::RangeInclusive<u64> = 5..=10_000;

fn default_follow_ms() -> u64 {
    50
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            backend: Backend::default(),
            block_cache_mib: default_block_cache_mib(),
            url: None,
            password_file: None,
            lease_ms: default_lease_ms(),
            follow_ms: default_follow_ms(),
        }
    }
}

impl StorageConfig {
    /// Checks `[storage]` without connecting: a postgres backend needs a URL that parses and
    /// carries no password, a readable password file if one is named, and a lease in range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_BLOCK_CACHE_MIB).contains(&self.block_cache_mib) {
            return Err(err(
                "storage.block_cache_mib",
                format!("must be between 1 and {MAX_BLOCK_CACHE_MIB} (MiB)"),
            ));
        }
        match self.backend {
            Backend::Rocksdb => {
                if self.url.is_some() || self.password_file.is_some() {
                    return Err(err(
                        "storage.url",
                        "set, but storage.backend is not \"postgres\"",
                    ));
                }
                Ok(())
            }
            Backend::Postgres => {
                let Some(url) = &self.url else {
                    return Err(err("storage.url", "required with backend = \"postgres\""));
                };
                let cfg: tokio_postgres::Config = url
                    .parse()
                    .map_err(|e| err("storage.url", format!("not a PostgreSQL URL: {e}")))?;
                if cfg.get_password().is_some() {
                    return Err(err(
                        "storage.url",
                        "holds a password: put it in storage.password_file",
                    ));
                }
                if cfg.get_user().is_none() {
                    return Err(err("storage.url", "names no user"));
                }
                if let Some(p) = &self.password_file {
                    self.password().map_err(|e| {
                        err("storage.password_file", format!("{}: {e}", p.display()))
                    })?;
                }
                if !LEASE_MS.contains(&self.lease_ms) {
                    return Err(err(
                        "storage.lease_ms",
                        format!(
                            "must be between {} and {} (ms)",
                            LEASE_MS.start(),
                            LEASE_MS.end()
                        ),
                    ));
                }
                if !FOLLOW_MS.contains(&self.follow_ms) {
                    return Err(err(
                        "storage.follow_ms",
                        format!(
                            "must be between {} and {} (ms)",
                            FOLLOW_MS.start(),
                            FOLLOW_MS.end()
                        ),
                    ));
                }
                Ok(())
            }
        }
    }

    /// The password file's first line, if one is named.
    pub fn password(&self) -> std::io::Result<Option<String>> {
        let Some(p) = &self.password_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(p)?;
        let pw = text.lines().next().unwrap_or_default().to_string();
        if pw.is_empty() {
            return Err(std::io::Error::other("empty"));
        }
        Ok(Some(pw))
    }
}
