//! The logs a witness witnesses: an origin and the Ed25519 (type 0x01) verifier keys trusted to
//! sign its checkpoints (c2sp.org/tlog-witness: "Each witness is configured with a list of
//! supported log public keys"; c2sp.org/signed-note for the vkey form).

use accord_proto::note::{KeyKind, Verifier};

use crate::error::Error;

/// The most verifier keys one log may have.
pub const MAX_KEYS_PER_LOG: usize = 16;

/// The longest origin accepted, in bytes.
pub const MAX_ORIGIN_LEN: usize = 1024;

/// A witnessed log: its origin line and its trusted keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    origin: String,
    verifiers: Vec<Verifier>,
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Error {
    Error::InvalidLog {
        field: field.into(),
        reason: reason.into(),
    }
}

impl LogConfig {
    /// A log from its origin and vkey texts. Errors are [`Error::InvalidLog`] whose `field` is
    /// `origin` or `vkeys[i]`.
    ///
    /// The origin must be a valid checkpoint origin line (c2sp.org/tlog-checkpoint: non-empty,
    /// no newline; we also refuse other control characters and more than 1 KiB). Each vkey must
    /// parse as a type 0x01 Ed25519 key; the key name need not equal the origin (C2SP only says
    /// it SHOULD).
    pub fn new(origin: &str, vkeys: &[impl AsRef<str>]) -> Result<LogConfig, Error> {
        let verifiers = vkeys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                Verifier::from_vkey(k.as_ref().trim())
                    .map_err(|e| invalid(format!("vkeys[{i}]"), e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        LogConfig::from_verifiers(origin, verifiers)
    }

    /// A log from its origin and parsed verifiers (see [`LogConfig::new`] for the rules).
    pub fn from_verifiers(origin: &str, verifiers: Vec<Verifier>) -> Result<LogConfig, Error> {
        check_origin(origin)?;
        if verifiers.is_empty() {
            return Err(invalid("vkeys", "at least one verifier key is required"));
        }
        if verifiers.len() > MAX_KEYS_PER_LOG {
            return Err(invalid(
                "vkeys",
                format!("more than {MAX_KEYS_PER_LOG} keys"),
            ));
        }
        for (i, v) in verifiers.iter().enumerate() {
            if v.kind() != KeyKind::Ed25519 {
                return Err(invalid(
                    format!("vkeys[{i}]"),
                    "a log key must be an Ed25519 note key (type 0x01)",
                ));
            }
            // Two keys with one name and key ID would make signatures unattributable.
            if verifiers[..i]
                .iter()
                .any(|w| w.name() == v.name() && w.key_id() == v.key_id())
            {
                return Err(invalid(
                    format!("vkeys[{i}]"),
                    "duplicate key name and key id",
                ));
            }
        }
        Ok(LogConfig {
            origin: origin.to_owned(),
            verifiers,
        })
    }

    /// The origin.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The trusted keys.
    pub fn verifiers(&self) -> &[Verifier] {
        &self.verifiers
    }

    /// The trusted keys in vkey text form.
    pub fn vkeys(&self) -> Vec<String> {
        self.verifiers.iter().map(Verifier::to_vkey).collect()
    }
}

fn check_origin(origin: &str) -> Result<(), Error> {
    if origin.is_empty() {
        return Err(invalid("origin", "empty"));
    }
    if origin.len() > MAX_ORIGIN_LEN {
        return Err(invalid(
            "origin",
            format!("longer than {MAX_ORIGIN_LEN} bytes"),
        ));
    }
    if origin.chars().any(char::is_control) {
        return Err(invalid("origin", "contains a control character"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use accord_proto::Signer;
    use accord_proto::checkpoint::Cosigner;

    #[test]
    fn validates_origin_and_keys() {
        let mut rng = rand::rngs::OsRng;
        let s = Signer::generate("example.com/log", &mut rng).unwrap();
        let vk = s.verifier().to_vkey();
        let log = LogConfig::new("example.com/log", &[&vk]).unwrap();
        assert_eq!(log.vkeys(), vec![vk.clone()]);
        let field = |r: Result<LogConfig, Error>| match r {
            Err(Error::InvalidLog { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(LogConfig::new("", &[&vk])), "origin");
        assert_eq!(field(LogConfig::new("a\nb", &[&vk])), "origin");
        assert_eq!(field(LogConfig::new("o", &[] as &[&str])), "vkeys");
        assert_eq!(field(LogConfig::new("o", &[&vk, "junk"])), "vkeys[1]");
        assert_eq!(field(LogConfig::new("o", &[&vk, &vk])), "vkeys[1]");
        let cosigner = Cosigner::generate("w", &mut rng).unwrap();
        assert_eq!(
            field(LogConfig::new("o", &[cosigner.verifier().to_vkey()])),
            "vkeys[0]"
        );
    }
}
