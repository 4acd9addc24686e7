//! Offline verification and key generation: `accordctl tlog verify-inclusion`,
//! `tlog verify-consistency`, `note verify` and `key generate`.
//!
//! Nothing here talks to a node: an operator (or an auditor who trusts no Accord binary but
//! this one) checks proofs, signed notes, checkpoints and cosignatures from their text forms,
//! with the rules of `accord-proto` (RFC 9162 §2.1.3.2/§2.1.4.2, c2sp.org/signed-note,
//! c2sp.org/tlog-checkpoint, c2sp.org/tlog-cosignature).
//!
//! Exit codes: 0 valid; 1 invalid, with a one-line reason on stderr; 2 usage error (clap's own,
//! and unreadable input files).

use std::fmt;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use accord_proto::checkpoint::{Checkpoint, Cosigner};
use accord_proto::merkle::{self, Hash};
use accord_proto::note::{self, KeyKind, Signer, Verifier};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use clap::{Args, Subcommand};

/// Offline verification and key commands (accordctl flattens them into its top level).
#[derive(Debug, Subcommand)]
pub enum OfflineCommand {
    /// Verify Merkle log proofs (RFC 6962 / RFC 9162) from hex hashes.
    #[command(subcommand)]
    Tlog(TlogCommand),
    /// Verify C2SP signed notes, checkpoints and their cosignatures.
    #[command(subcommand)]
    Note(NoteCommand),
    /// Manage C2SP signed-note keys.
    #[command(subcommand)]
    Key(KeyCommand),
}

/// `accordctl tlog ...`
#[derive(Debug, Subcommand)]
#[allow(clippy::enum_variant_names)] // the CLI spells them verify-inclusion, verify-consistency, verify-subtree
pub enum TlogCommand {
    /// Check that a leaf hash is at an index of a tree with the given size and root.
    VerifyInclusion(VerifyInclusionArgs),
    /// Check that a tree of size2 extends the tree of size1.
    VerifyConsistency(VerifyConsistencyArgs),
    /// Check a subtree [start, end) offline (draft-ietf-plants-merkle-tree-certs "Subtrees"):
    /// its subtree consistency proof against a tree size and root (--size, --root, --proof),
    /// and/or ML-DSA-44 subtree/v1 witness cosignatures on it (--origin, --vkey, --cosignature),
    /// as c2sp.org/tlog-witness sign-subtree returns them.
    VerifySubtree(VerifySubtreeArgs),
}

/// `accordctl note ...`
#[derive(Debug, Subcommand)]
pub enum NoteCommand {
    /// Verify a signed note or checkpoint; print who signed it and each cosignature's time.
    ///
    /// Valid when at least one given key signed it and no given key's signature fails;
    /// signatures by other keys are listed as unknown. To require a log's signature on a
    /// checkpoint, pass the log's vkey and check the output for "signed by".
    Verify(NoteVerifyArgs),
}

/// `accordctl key ...`
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Generate a key (Ed25519 note key, or a witness cosigner key: Ed25519 or ML-DSA-44);
    /// print the vkey (and the skey unless --out is given).
    Generate(KeyGenerateArgs),
}

/// Arguments of `tlog verify-inclusion`.
#[derive(Debug, Args)]
pub struct VerifyInclusionArgs {
    /// The leaf hash, SHA-256(0x00 || leaf), in hex.
    #[arg(long, value_parser = parse_hash)]
    pub leaf_hash: Hash,
    /// The leaf's 0-based index.
    #[arg(long)]
    pub index: u64,
    /// The tree size.
    #[arg(long)]
    pub size: u64,
    /// The tree's root hash, in hex.
    #[arg(long, value_parser = parse_hash)]
    pub root: Hash,
    /// The proof hashes in hex, leaf sibling first, comma-separated.
    #[arg(long, value_parser = parse_hash, value_delimiter = ',')]
    pub proof: Vec<Hash>,
}

/// Arguments of `tlog verify-consistency`.
#[derive(Debug, Args)]
pub struct VerifyConsistencyArgs {
    /// The older tree size.
    #[arg(long)]
    pub size1: u64,
    /// The newer tree size.
    #[arg(long)]
    pub size2: u64,
    /// The older root, in hex.
    #[arg(long, value_parser = parse_hash)]
    pub root1: Hash,
    /// The newer root, in hex.
    #[arg(long, value_parser = parse_hash)]
    pub root2: Hash,
    /// The proof hashes in hex, comma-separated.
    #[arg(long, value_parser = parse_hash, value_delimiter = ',')]
    pub proof: Vec<Hash>,
}

/// Arguments of `tlog verify-subtree`.
#[derive(Debug, Args)]
pub struct VerifySubtreeArgs {
    /// The subtree's first leaf index.
    #[arg(long)]
    pub start: u64,
    /// One past the subtree's last leaf index.
    #[arg(long)]
    pub end: u64,
    /// The subtree hash MTH(D[start:end]), in hex.
    #[arg(long, value_parser = parse_hash)]
    pub hash: Hash,
    /// The size of the tree the subtree is consistent with (checks the proof).
    #[arg(long, requires = "root")]
    pub size: Option<u64>,
    /// That tree's root, in hex.
    #[arg(long, value_parser = parse_hash, requires = "size")]
    pub root: Option<Hash>,
    /// The subtree consistency proof hashes in hex, comma-separated.
    #[arg(long, value_parser = parse_hash, value_delimiter = ',', requires = "size")]
    pub proof: Vec<Hash>,
    /// The log origin the cosignatures are for.
    #[arg(long, requires = "cosignatures")]
    pub origin: Option<String>,
    /// An ML-DSA-44 witness vkey (type 0x06) that must have co-signed the subtree; repeatable.
    #[arg(long = "vkey", value_parser = parse_vkey, requires = "cosignatures")]
    pub vkeys: Vec<Verifier>,
    /// A cosignature line (`— <name> <base64>`) from sign-subtree; repeatable.
    #[arg(long = "cosignature", requires = "origin")]
    pub cosignatures: Vec<String>,
}

/// Arguments of `note verify`.
#[derive(Debug, Args)]
pub struct NoteVerifyArgs {
    /// A trusted verifier key, `<name>+<hex id>+<base64>`; repeat for several. Type 0x04 keys
    /// verify Ed25519 cosignature/v1 lines, type 0x06 keys ML-DSA-44 subtree/v1 lines.
    #[arg(long = "vkey", required = true, value_parser = parse_vkey)]
    pub vkeys: Vec<Verifier>,
    /// The signed note; `-` or absent reads standard input.
    pub file: Option<PathBuf>,
}

/// Arguments of `key generate`.
#[derive(Debug, Args)]
pub struct KeyGenerateArgs {
    /// The key name (C2SP: non-empty, no spaces, no '+'); for a log key, the log's origin.
    #[arg(long, value_parser = parse_key_name)]
    pub name: String,
    /// Generate a witness cosigning key instead of a note key.
    #[arg(long)]
    pub cosigner: bool,
    /// The cosigner key type: ed25519 (cosignature/v1, type 0x04) or ml-dsa-44 (subtree/v1,
    /// type 0x06, post-quantum; c2sp.org/tlog-cosignature recommends it for new witnesses).
    /// ml-dsa-44 needs --cosigner.
    #[arg(long, value_enum, default_value_t = KeyAlg::Ed25519)]
    pub alg: KeyAlg,
    /// Write the private key to this new file (mode 0600) instead of printing it.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// A key type for `key generate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyAlg {
    /// Ed25519.
    Ed25519,
    /// ML-DSA-44 (FIPS 204).
    #[value(name = "ml-dsa-44")]
    MlDsa44,
}

fn parse_hash(s: &str) -> Result<Hash, String> {
    let mut h = [0u8; 32];
    hex::decode_to_slice(s.trim(), &mut h).map_err(|e| format!("not a 32-byte hex hash ({e})"))?;
    Ok(h)
}

fn parse_vkey(s: &str) -> Result<Verifier, String> {
    Verifier::from_vkey(s.trim()).map_err(|e| e.to_string())
}

fn parse_key_name(s: &str) -> Result<String, String> {
    note::check_key_name(s).map_err(|e| e.to_string())?;
    Ok(s.to_owned())
}

/// Why a command did not succeed: exit code and a one-line reason.
#[derive(Debug)]
struct Failure {
    code: u8,
    reason: String,
}

impl Failure {
    fn invalid(reason: impl fmt::Display) -> Failure {
        Failure {
            code: 1,
            reason: format!("invalid: {reason}"),
        }
    }

    fn usage(reason: impl fmt::Display) -> Failure {
        Failure {
            code: 2,
            reason: reason.to_string(),
        }
    }
}

/// Runs an offline command with the process's stdin and stdout; prints the reason for a
/// failure on stderr and returns the exit code.
pub fn run(cmd: OfflineCommand, output: crate::output::Output) -> ExitCode {
    let stdout = std::io::stdout();
    let json = output == crate::output::Output::Json;
    match execute_as(cmd, &mut std::io::stdin().lock(), &mut stdout.lock(), json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            // One line, whatever the error text held.
            eprintln!("accordctl: {}", f.reason.replace('\n', " "));
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
fn execute(cmd: OfflineCommand, stdin: &mut dyn Read, out: &mut dyn Write) -> Result<(), Failure> {
    execute_as(cmd, stdin, out, false)
}

/// Runs a command; `json` prints one JSON document instead of lines (`--output json`).
fn execute_as(
    cmd: OfflineCommand,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    json: bool,
) -> Result<(), Failure> {
    if json {
        return execute_json(cmd, stdin, out);
    }
    match cmd {
        OfflineCommand::Tlog(TlogCommand::VerifyInclusion(a)) => {
            merkle::verify_inclusion(&a.leaf_hash, a.index, a.size, &a.proof, &a.root)
                .map_err(Failure::invalid)?;
            say(
                out,
                format_args!(
                    "valid: leaf {} is in the tree of size {} with root {}",
                    a.index,
                    a.size,
                    hex::encode(a.root)
                ),
            )
        }
        OfflineCommand::Tlog(TlogCommand::VerifyConsistency(a)) => {
            merkle::verify_consistency(a.size1, a.size2, &a.proof, &a.root1, &a.root2)
                .map_err(Failure::invalid)?;
            say(
                out,
                format_args!(
                    "valid: the tree of size {} extends the tree of size {}",
                    a.size2, a.size1
                ),
            )
        }
        OfflineCommand::Tlog(TlogCommand::VerifySubtree(a)) => {
            for line in verify_subtree(&a)? {
                say(out, format_args!("{line}"))?;
            }
            Ok(())
        }
        OfflineCommand::Note(NoteCommand::Verify(a)) => note_verify(&a, stdin, out),
        OfflineCommand::Key(KeyCommand::Generate(a)) => key_generate(&a, out),
    }
}

/// `tlog verify-subtree`: the proof and/or the cosignatures; the lines to print.
fn verify_subtree(a: &VerifySubtreeArgs) -> Result<Vec<String>, Failure> {
    let mut lines = Vec::new();
    if !merkle::is_valid_subtree(a.start, a.end) {
        return Err(Failure::invalid(format!(
            "[{}, {}) is not a valid subtree",
            a.start, a.end
        )));
    }
    if a.size.is_none() && a.cosignatures.is_empty() {
        return Err(Failure::usage(
            "give --size/--root/--proof, or --origin/--vkey/--cosignature, or both",
        ));
    }
    if let (Some(size), Some(root)) = (a.size, a.root) {
        merkle::verify_subtree_consistency(a.start, a.end, size, &a.proof, &a.hash, &root)
            .map_err(Failure::invalid)?;
        lines.push(format!(
            "valid: subtree [{}, {}) is consistent with the tree of size {size} with root {}",
            a.start,
            a.end,
            hex::encode(root)
        ));
    }
    if !a.cosignatures.is_empty() {
        let origin = a.origin.as_deref().unwrap_or_default();
        if a.vkeys.is_empty() {
            return Err(Failure::usage("--cosignature needs at least one --vkey"));
        }
        let sigs = a
            .cosignatures
            .iter()
            .map(|l| note::NoteSignature::parse_line(l).map_err(Failure::usage))
            .collect::<Result<Vec<_>, _>>()?;
        for v in &a.vkeys {
            let sig = sigs
                .iter()
                .find(|s| s.name == v.name() && s.key_id == v.key_id())
                .ok_or_else(|| {
                    Failure::invalid(format!("no cosignature line by {}", v.key_ref()))
                })?;
            let t = accord_proto::checkpoint::verify_subtree_cosignature(
                v, origin, a.start, a.end, &a.hash, sig,
            )
            .map_err(Failure::invalid)?;
            lines.push(format!(
                "subtree [{}, {}) of {origin} cosigned by {} (timestamp {t})",
                a.start,
                a.end,
                v.key_ref()
            ));
        }
    }
    Ok(lines)
}

/// `--output json`: the same checks; the result as one JSON document.
fn execute_json(
    cmd: OfflineCommand,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let v = match cmd {
        OfflineCommand::Tlog(TlogCommand::VerifyInclusion(a)) => {
            merkle::verify_inclusion(&a.leaf_hash, a.index, a.size, &a.proof, &a.root)
                .map_err(Failure::invalid)?;
            serde_json::json!({"valid": true, "leaf_hash": hex::encode(a.leaf_hash),
                "index": a.index, "size": a.size, "root": hex::encode(a.root)})
        }
        OfflineCommand::Tlog(TlogCommand::VerifyConsistency(a)) => {
            merkle::verify_consistency(a.size1, a.size2, &a.proof, &a.root1, &a.root2)
                .map_err(Failure::invalid)?;
            serde_json::json!({"valid": true, "size1": a.size1, "size2": a.size2,
                "root1": hex::encode(a.root1), "root2": hex::encode(a.root2)})
        }
        OfflineCommand::Tlog(TlogCommand::VerifySubtree(a)) => {
            let lines = verify_subtree(&a)?;
            serde_json::json!({"valid": true, "start": a.start, "end": a.end,
                "hash": hex::encode(a.hash), "checks": lines})
        }
        OfflineCommand::Note(NoteCommand::Verify(a)) => {
            let msg = read_input(a.file.as_ref(), stdin)?;
            let opened = note::open(&msg, &a.vkeys).map_err(Failure::invalid)?;
            let checkpoint = Checkpoint::parse(&opened.text).ok().map(|cp| {
                serde_json::json!({"origin": cp.origin, "size": cp.size, "root": B64.encode(cp.root)})
            });
            let mut signed_by = Vec::new();
            let mut cosigned_by = Vec::new();
            for v in &opened.verified {
                let key = v.verifier.key_ref().to_string();
                match (v.verifier.kind(), v.timestamp) {
                    (kind, Some(t)) if kind.is_cosignature() => cosigned_by.push(
                        serde_json::json!({"key": key, "timestamp": t, "time": utc_rfc3339(t),
                            "alg": alg_name(kind)}),
                    ),
                    _ => signed_by.push(key),
                }
            }
            let unknown: Vec<String> = opened
                .unverified
                .iter()
                .map(|s| s.key_ref().to_string())
                .collect();
            serde_json::json!({"valid": true, "checkpoint": checkpoint, "signed_by": signed_by,
                "cosigned_by": cosigned_by, "unknown": unknown})
        }
        OfflineCommand::Key(KeyCommand::Generate(a)) => {
            let mut lines = Vec::new();
            key_generate(&a, &mut lines)?;
            let text = String::from_utf8_lossy(&lines).to_string();
            let mut it = text.lines();
            let vkey = it.next().unwrap_or_default();
            match it.next() {
                Some(skey) => serde_json::json!({"vkey": vkey, "skey": skey}),
                None => {
                    serde_json::json!({"vkey": vkey, "skey_file": a.out.as_ref().map(|p| p.display().to_string())})
                }
            }
        }
    };
    say(out, format_args!("{v}"))
}

fn say(out: &mut dyn Write, line: fmt::Arguments<'_>) -> Result<(), Failure> {
    writeln!(out, "{line}").map_err(|e| Failure {
        code: 1,
        reason: format!("cannot write output: {e}"),
    })
}

fn read_input(file: Option<&PathBuf>, stdin: &mut dyn Read) -> Result<Vec<u8>, Failure> {
    let mut buf = Vec::new();
    match file {
        Some(p) if p.as_os_str() != "-" => {
            buf = std::fs::read(p)
                .map_err(|e| Failure::usage(format!("cannot read {}: {e}", p.display())))?;
        }
        _ => {
            stdin
                .read_to_end(&mut buf)
                .map_err(|e| Failure::usage(format!("cannot read standard input: {e}")))?;
        }
    }
    Ok(buf)
}

fn note_verify(
    a: &NoteVerifyArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let msg = read_input(a.file.as_ref(), stdin)?;
    let opened = note::open(&msg, &a.vkeys).map_err(Failure::invalid)?;
    if let Ok(cp) = Checkpoint::parse(&opened.text) {
        say(
            out,
            format_args!(
                "checkpoint: origin {} size {} root {}",
                cp.origin,
                cp.size,
                B64.encode(cp.root)
            ),
        )?;
    }
    for v in &opened.verified {
        let key = v.verifier.key_ref();
        match (v.verifier.kind(), v.timestamp) {
            (kind, Some(t)) if kind.is_cosignature() => say(
                out,
                format_args!(
                    "cosigned by {key} at {t} ({}) [{}]",
                    utc_rfc3339(t),
                    alg_name(kind)
                ),
            )?,
            _ => say(out, format_args!("signed by {key}"))?,
        }
    }
    for s in &opened.unverified {
        say(out, format_args!("unknown signature by {}", s.key_ref()))?;
    }
    Ok(())
}

/// The cosignature type's name in `note verify` output.
fn alg_name(kind: KeyKind) -> &'static str {
    match kind {
        KeyKind::MlDsa44 => "ml-dsa-44",
        _ => "ed25519",
    }
}

fn key_generate(a: &KeyGenerateArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let mut rng = rand::rngs::OsRng;
    if a.alg == KeyAlg::MlDsa44 && !a.cosigner {
        return Err(Failure::usage(
            "--alg ml-dsa-44 is for witness cosigner keys: add --cosigner",
        ));
    }
    let (vkey, skey) = if a.cosigner {
        let c = match a.alg {
            KeyAlg::Ed25519 => Cosigner::generate(&a.name, &mut rng),
            KeyAlg::MlDsa44 => Cosigner::generate_ml_dsa_44(&a.name, &mut rng),
        }
        .map_err(Failure::usage)?;
        (c.verifier().to_vkey(), c.to_skey())
    } else {
        let s = Signer::generate(&a.name, &mut rng).map_err(Failure::usage)?;
        (s.verifier().to_vkey(), s.to_skey())
    };
    match &a.out {
        Some(path) => {
            write_secret(path, &format!("{skey}\n")).map_err(|e| Failure {
                code: 1,
                reason: format!("cannot write {}: {e}", path.display()),
            })?;
            say(out, format_args!("{vkey}"))
        }
        None => {
            say(out, format_args!("{vkey}"))?;
            say(out, format_args!("{skey}"))
        }
    }
}

/// Creates `path` (never overwriting) readable by the owner only, then writes the secret.
fn write_secret(path: &PathBuf, contents: &str) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()
}

/// POSIX seconds as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC), using the days-to-civil
/// conversion of H. Hinnant's date algorithms; no time-zone database needed.
fn utc_rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: OfflineCommand,
    }

    /// Parses and runs a command line; returns (exit code, stdout, stderr reason).
    fn cli(args: &[&str], stdin: &str) -> (u8, String, String) {
        let parsed =
            match Cli::try_parse_from(std::iter::once("accordctl").chain(args.iter().copied())) {
                Ok(c) => c,
                Err(e) => return (e.exit_code() as u8, String::new(), e.to_string()),
            };
        let mut out = Vec::new();
        match execute(parsed.cmd, &mut stdin.as_bytes(), &mut out) {
            Ok(()) => (0, String::from_utf8(out).unwrap(), String::new()),
            Err(f) => (f.code, String::from_utf8(out).unwrap(), f.reason),
        }
    }

    fn leaves(n: u64) -> Vec<Hash> {
        (0..n)
            .map(|i| merkle::leaf_hash(&i.to_be_bytes()))
            .collect()
    }

    fn hexes(p: &[Hash]) -> String {
        p.iter().map(hex::encode).collect::<Vec<_>>().join(",")
    }

    #[test]
    fn inclusion_valid_invalid_and_usage() {
        let d = leaves(7);
        let tree = merkle::MemoryTree::from_leaf_hashes(&d).unwrap();
        let proof = merkle::inclusion_proof(&tree, 5, 7).unwrap();
        let (root, leaf) = (hex::encode(tree.root()), hex::encode(d[5]));
        let p = hexes(&proof);
        let args = [
            "tlog",
            "verify-inclusion",
            "--leaf-hash",
            &leaf,
            "--index",
            "5",
            "--size",
            "7",
            "--root",
            &root,
            "--proof",
            &p,
        ];
        let (code, out, _) = cli(&args, "");
        assert_eq!(code, 0);
        assert!(out.starts_with("valid:"));
        let mut bad = args;
        bad[5] = "4";
        let (code, _, reason) = cli(&bad, "");
        assert_eq!(code, 1);
        assert!(reason.starts_with("invalid: proof invalid"), "{reason}");
        let mut usage = args;
        usage[3] = "abcd";
        assert_eq!(cli(&usage, "").0, 2);
        // A single-leaf tree needs no --proof.
        let one = hex::encode(d[0]);
        assert_eq!(
            cli(
                &[
                    "tlog",
                    "verify-inclusion",
                    "--leaf-hash",
                    &one,
                    "--index",
                    "0",
                    "--size",
                    "1",
                    "--root",
                    &one
                ],
                ""
            )
            .0,
            0
        );
    }

    #[test]
    fn consistency_valid_and_invalid() {
        let d = leaves(9);
        let tree = merkle::MemoryTree::from_leaf_hashes(&d).unwrap();
        let proof = hexes(&merkle::consistency_proof(&tree, 3, 9).unwrap());
        let r1 = hex::encode(merkle::root(&tree, 3).unwrap());
        let r2 = hex::encode(tree.root());
        let args = [
            "tlog",
            "verify-consistency",
            "--size1",
            "3",
            "--size2",
            "9",
            "--root1",
            &r1,
            "--root2",
            &r2,
            "--proof",
            &proof,
        ];
        assert_eq!(cli(&args, "").0, 0);
        let swapped = [
            "tlog",
            "verify-consistency",
            "--size1",
            "3",
            "--size2",
            "9",
            "--root1",
            &r2,
            "--root2",
            &r1,
            "--proof",
            &proof,
        ];
        assert_eq!(cli(&swapped, "").0, 1);
        assert_eq!(
            cli(&["tlog", "verify-consistency", "--size1", "3"], "").0,
            2
        );
    }

    #[test]
    fn note_verify_reports_signers_and_cosignatures() {
        let mut rng = rand::rngs::OsRng;
        let log = Signer::generate("example.com/log", &mut rng).unwrap();
        let w = Cosigner::generate("witness.example/w", &mut rng).unwrap();
        let cp = Checkpoint::new("example.com/log", 3, merkle::EMPTY_ROOT);
        let body = cp.to_body().unwrap();
        let signed = format!(
            "{}{}",
            cp.sign(&log).unwrap(),
            w.cosign(&body, 1679315147).unwrap().to_line()
        );
        let (lv, wv) = (log.verifier().to_vkey(), w.verifier().to_vkey());

        let (code, out, _) = cli(&["note", "verify", "--vkey", &lv, "--vkey", &wv], &signed);
        assert_eq!(code, 0);
        assert!(
            out.contains("checkpoint: origin example.com/log size 3"),
            "{out}"
        );
        assert!(out.contains(&format!("signed by {}", log.verifier().key_ref())));
        assert!(
            out.contains("at 1679315147 (2023-03-20T12:25:47Z)"),
            "{out}"
        );

        // Only the log key: the cosignature is reported as unknown.
        let (code, out, _) = cli(&["note", "verify", "--vkey", &lv, "-"], &signed);
        assert_eq!(code, 0);
        assert!(
            out.contains("unknown signature by witness.example/w+"),
            "{out}"
        );

        // Tampered note, or no known key: exit 1 with a reason.
        let (code, _, reason) = cli(
            &["note", "verify", "--vkey", &lv],
            &signed.replace("\n3\n", "\n4\n"),
        );
        assert_eq!(
            (code, reason.contains("invalid signature")),
            (1, true),
            "{reason}"
        );
        let other = Signer::generate("other", &mut rng)
            .unwrap()
            .verifier()
            .to_vkey();
        let (code, _, reason) = cli(&["note", "verify", "--vkey", &other], &signed);
        assert_eq!(code, 1);
        assert!(reason.contains("no verifiable signatures"), "{reason}");
        // Usage errors: bad vkey, missing vkey, unreadable file.
        assert_eq!(cli(&["note", "verify", "--vkey", "nonsense"], &signed).0, 2);
        assert_eq!(cli(&["note", "verify"], &signed).0, 2);
        assert_eq!(
            cli(&["note", "verify", "--vkey", &lv, "/nonexistent/x"], "").0,
            2
        );
    }

    #[test]
    fn key_generate_prints_or_writes_keys() {
        let (code, out, _) = cli(&["key", "generate", "--name", "example.com/log"], "");
        assert_eq!(code, 0);
        let lines: Vec<&str> = out.lines().collect();
        let v = Verifier::from_vkey(lines[0]).unwrap();
        let s = Signer::from_skey(lines[1]).unwrap();
        assert_eq!(s.verifier(), v);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.skey");
        let p = path.to_str().unwrap();
        let (code, out, _) = cli(
            &[
                "key",
                "generate",
                "--name",
                "w.example",
                "--cosigner",
                "--out",
                p,
            ],
            "",
        );
        assert_eq!(code, 0);
        assert_eq!(out.lines().count(), 1);
        let v = Verifier::from_vkey(out.trim()).unwrap();
        assert_eq!(v.kind(), KeyKind::CosignatureV1);
        let c = Cosigner::from_skey(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(c.verifier(), v);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Never overwrites; a bad name is a usage error.
        assert_eq!(
            cli(&["key", "generate", "--name", "x", "--out", p], "").0,
            1
        );
        assert_eq!(cli(&["key", "generate", "--name", "bad name"], "").0, 2);
    }

    #[test]
    fn rfc3339() {
        assert_eq!(utc_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_rfc3339(1770193051), "2026-02-04T08:17:31Z");
        assert_eq!(utc_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert!(utc_rfc3339(i64::MAX as u64).len() > 20);
    }

    #[test]
    fn verify_subtree_checks_the_proof_and_ml_dsa_cosignatures() {
        let leaves: Vec<Hash> = leaves(14);
        let tree = accord_proto::merkle::MemoryTree::from_leaf_hashes(&leaves).unwrap();
        let root = tree.root();
        let hash = merkle::subtree_hash(&tree, 8, 13).unwrap();
        let proof = merkle::subtree_consistency_proof(&tree, 8, 13, 14).unwrap();
        let (h, r, p) = (hex::encode(hash), hex::encode(root), hexes(&proof));
        let base = [
            "tlog",
            "verify-subtree",
            "--start",
            "8",
            "--end",
            "13",
            "--hash",
        ];
        let with = |extra: &[&str]| {
            let mut v: Vec<&str> = base.to_vec();
            v.push(&h);
            v.extend_from_slice(extra);
            cli(&v, "")
        };
        let (code, out, _) = with(&["--size", "14", "--root", &r, "--proof", &p]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("subtree [8, 13) is consistent with the tree of size 14"));
        let mut bad = proof.clone();
        bad[0][0] ^= 1;
        assert_eq!(
            with(&["--size", "14", "--root", &r, "--proof", &hexes(&bad)]).0,
            1
        );
        assert_eq!(with(&["--size", "15", "--root", &r, "--proof", &p]).0, 1);

        // The witness's subtree cosignature (what sign-subtree returns) verifies; another
        // range, another origin or another key does not.
        let mut rng = rand::rngs::OsRng;
        let w = Cosigner::generate_ml_dsa_44("witness.example/pq", &mut rng).unwrap();
        let line = w
            .cosign_subtree("example.com/log", 8, 13, &hash)
            .unwrap()
            .to_line();
        let line = line.trim_end();
        let v = w.verifier().to_vkey();
        let args = [
            "--origin",
            "example.com/log",
            "--vkey",
            &v,
            "--cosignature",
            line,
        ];
        let (code, out, reason) = with(&args);
        assert_eq!(code, 0, "{out}{reason}");
        assert!(out.contains("cosigned by witness.example/pq+"), "{out}");
        let (code, out, _) =
            with(&[&args[..], &["--size", "14", "--root", &r, "--proof", &p]].concat());
        assert_eq!((code, out.lines().count()), (0, 2), "{out}");
        assert_eq!(
            with(&[
                "--origin",
                "example.com/other",
                "--vkey",
                &v,
                "--cosignature",
                line
            ])
            .0,
            1
        );
        let other = Cosigner::generate_ml_dsa_44("witness.example/pq", &mut rng).unwrap();
        let ov = other.verifier().to_vkey();
        assert_eq!(
            with(&[
                "--origin",
                "example.com/log",
                "--vkey",
                &ov,
                "--cosignature",
                line
            ])
            .0,
            1
        );
        let wrong_range = [
            "tlog",
            "verify-subtree",
            "--start",
            "8",
            "--end",
            "12",
            "--hash",
            &h,
            "--origin",
            "example.com/log",
            "--vkey",
            &v,
            "--cosignature",
            line,
        ];
        assert_eq!(cli(&wrong_range, "").0, 1);
        // Not a valid subtree; nothing to check.
        let invalid = [
            "tlog",
            "verify-subtree",
            "--start",
            "5",
            "--end",
            "13",
            "--hash",
            &h,
            "--size",
            "14",
            "--root",
            &r,
        ];
        assert_eq!(cli(&invalid, "").0, 1);
        assert_eq!(with(&[]).0, 2);
    }

    #[test]
    fn key_generate_makes_ml_dsa_44_cosigner_keys() {
        let (code, out, _) = cli(
            &[
                "key",
                "generate",
                "--name",
                "w.example/pq",
                "--cosigner",
                "--alg",
                "ml-dsa-44",
            ],
            "",
        );
        assert_eq!(code, 0);
        let lines: Vec<&str> = out.lines().collect();
        let v = Verifier::from_vkey(lines[0]).unwrap();
        assert_eq!(v.kind(), KeyKind::MlDsa44);
        let c = Cosigner::from_skey(lines[1]).unwrap();
        assert_eq!(c.verifier(), v);
        // ML-DSA-44 is for cosigner keys only.
        assert_eq!(
            cli(
                &["key", "generate", "--name", "x", "--alg", "ml-dsa-44"],
                ""
            )
            .0,
            2
        );
    }
}
