use super::*;
use crate::init::{InitOptions, init};

fn fresh() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let done = init(&InitOptions {
        dir: dir.path().join("w"),
        name: "witness.test/w1".into(),
        sans: vec![],
        grpc_listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
    })
    .unwrap();
    (dir, done.config_path)
}

fn field_of(r: Result<Config, Error>) -> String {
    match r {
        Err(Error::Config { field, .. }) => field,
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn init_writes_a_config_that_loads() {
    let (_dir, path) = fresh();
    let c = Config::load(&path).unwrap();
    assert_eq!(c.name, "witness.test/w1");
    assert_eq!(c.cosigner.name(), "witness.test/w1");
    assert!(c.http_tls.is_none());
    assert_eq!(c.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
    assert!(c.logs.is_empty());
    // init refuses to overwrite.
    let again = init(&InitOptions {
        dir: path.parent().unwrap().to_owned(),
        name: "x".into(),
        sans: vec![],
        grpc_listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
    });
    assert!(matches!(again, Err(Error::Config { .. })));
}

#[test]
fn errors_name_the_field() {
    let (_dir, path) = fresh();
    let base = path.parent().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let with = |from: &str, to: &str| {
        assert!(text.contains(from), "{from}");
        Config::from_toml(&text.replacen(from, to, 1), base)
    };
    assert_eq!(
        field_of(with("name = \"witness.test/w1\"", "name = \"a b\"")),
        "name"
    );
    assert_eq!(
        field_of(with("name = \"witness.test/w1\"", "name = \"other\"")),
        "key_file"
    );
    assert_eq!(
        field_of(with("key_file = \"witness.skey\"", "key_file = \"nope\"")),
        "key_file"
    );
    assert_eq!(
        field_of(with("admin_token_sha256 = \"", "admin_token_sha256 = \"zz")),
        "admin_token_sha256"
    );
    assert_eq!(
        field_of(with("listen = \"127.0.0.1:0\"", "listen = \"localhost\"")),
        "grpc.listen"
    );
    assert_eq!(
        field_of(with(
            "tls_key = \"tls/key.pem\"",
            "tls_key = \"tls/ca.pem\""
        )),
        "grpc.tls_key"
    );
    assert_eq!(
        field_of(with(
            "# tls_cert = \"tls/cert.pem\"",
            "tls_cert = \"tls/cert.pem\""
        )),
        "http.tls_key"
    );
    assert_eq!(
        field_of(with("max_body_bytes = 65536", "max_body_bytes = 1")),
        "http.max_body_bytes"
    );
    assert_eq!(
        field_of(with("max_in_flight = 256", "max_in_flight = 0")),
        "limits.max_in_flight"
    );
    assert_eq!(
        field_of(with(
            "# [[logs]]\n# origin = \"example.com/log\"\n# vkeys = [\"example.com/log+abcd1234+AR...\"]",
            "[[logs]]\norigin = \"o\"\nvkeys = [\"bad\"]"
        )),
        "logs[0].vkeys[0]"
    );
    assert!(
        field_of(with(
            "data_dir = \"data\"",
            "data_dir = \"data\"\nsurprise = 1"
        ))
        .starts_with("(line")
    );
}

#[test]
fn http_tls_loads_when_both_files_are_set() {
    let (_dir, path) = fresh();
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(
            "# tls_cert = \"tls/cert.pem\"",
            "tls_cert = \"tls/cert.pem\"",
        )
        .replace("# tls_key = \"tls/key.pem\"", "tls_key = \"tls/key.pem\"");
    let c = Config::from_toml(&text, path.parent().unwrap()).unwrap();
    assert!(c.http_tls.is_some());
}

#[test]
fn duplicate_log_origins_are_refused() {
    let (_dir, path) = fresh();
    let mut rng = rand::rngs::OsRng;
    let vk = accord_proto::Signer::generate("o", &mut rng)
        .unwrap()
        .verifier()
        .to_vkey();
    let text = format!(
        "{}\n[[logs]]\norigin = \"o\"\nvkeys = [\"{vk}\"]\n[[logs]]\norigin = \"o\"\nvkeys = [\"{vk}\"]\n",
        std::fs::read_to_string(&path).unwrap()
    );
    assert_eq!(
        field_of(Config::from_toml(&text, path.parent().unwrap())),
        "logs[1].origin"
    );
}

#[test]
fn both_key_types_and_the_prefixes_load_and_bad_ones_name_the_field() {
    use crate::init::{KeyAlg, init_with};
    use accord_proto::note::KeyKind;
    let dir = tempfile::tempdir().unwrap();
    let done = init_with(
        &InitOptions {
            dir: dir.path().join("w"),
            name: "witness.test/w1".into(),
            sans: vec![],
            grpc_listen: "127.0.0.1:0".into(),
            http_listen: "127.0.0.1:0".into(),
        },
        &[KeyAlg::Ed25519, KeyAlg::MlDsa44],
    )
    .unwrap();
    assert_eq!(done.vkeys.len(), 2);
    let c = Config::load(&done.config_path).unwrap();
    let kinds: Vec<KeyKind> = c.cosigners.iter().map(|k| k.kind()).collect();
    assert_eq!(kinds, vec![KeyKind::CosignatureV1, KeyKind::MlDsa44]);
    assert_eq!(c.cosigners[1].verifier().to_vkey(), done.vkeys[1]);
    assert_eq!(c.prefixes, Prefixes::default());

    let base = done.config_path.parent().unwrap();
    let text = std::fs::read_to_string(&done.config_path).unwrap();
    let keys = "key_files = [\"witness.skey\", \"witness-mldsa44.skey\"]";
    assert!(text.contains(keys), "{text}");
    let with = |from: &str, to: &str| {
        assert!(text.contains(from), "{from}");
        Config::from_toml(&text.replacen(from, to, 1), base)
    };
    let prefixed = with(
        "# submission_prefix = \"\"",
        "submission_prefix = \"/w\"\nmonitoring_prefix = \"/mon/v1\"",
    )
    .unwrap();
    assert_eq!(
        prefixed.prefixes,
        Prefixes {
            submission: "/w".into(),
            monitoring: "/mon/v1".into()
        }
    );
    for bad in ["\"w\"", "\"/w/\"", "\"/a b\"", "\"/a//b\"", "\"/a?b\""] {
        assert_eq!(
            field_of(with(
                "# submission_prefix = \"\"",
                &format!("submission_prefix = {bad}")
            )),
            "http.submission_prefix",
            "{bad}"
        );
    }
    assert_eq!(
        field_of(with(
            keys,
            "key_files = [\"witness.skey\", \"witness.skey\"]"
        )),
        "key_files[1]"
    );
    assert_eq!(field_of(with(keys, "key_files = []")), "key_files");
    assert_eq!(
        field_of(with(keys, &format!("{keys}\nkey_file = \"witness.skey\""))),
        "key_files"
    );
    assert_eq!(field_of(with(keys, "")), "key_file");
    assert_eq!(
        field_of(with(
            keys,
            "key_files = [\"witness.skey\", \"missing.skey\"]"
        )),
        "key_files[1]"
    );
    // ML-DSA-44 alone.
    let pq = with(keys, "key_file = \"witness-mldsa44.skey\"").unwrap();
    assert_eq!(pq.cosigner.kind(), KeyKind::MlDsa44);
}
