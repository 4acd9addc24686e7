//! Issue 28, item 1: TLS material every gRPC stack accepts. The CA `accord-node init` writes
//! carries no name constraints (gRPC's C core refuses IP-address ones: "unsupported name
//! constraint type"); a node initialised before keeps working with its old material, and
//! `accord-node tls reissue` replaces that material — the node's keys, names and ledger stay,
//! the old files are backed up, and the node serves under the new CA only.
//! (The clients outside Rust are `scripts/clients.sh`.)

use accord_tests::{TestNode, run_bin, tls_channel, wait_serving};
use rcgen::{
    BasicConstraints, CertificateParams, CidrSubnet, DnType, ExtendedKeyUsagePurpose,
    GeneralSubtree, IsCa, Issuer, KeyPair, KeyUsagePurpose, NameConstraints,
};
use sha2::Digest as _;
use std::path::Path;

fn der(pem: &[u8]) -> Vec<u8> {
    rustls_pemfile::certs(&mut &pem[..])
        .next()
        .expect("a certificate")
        .expect("PEM")
        .as_ref()
        .to_vec()
}

/// Whether the CA certificate in `pem` has a nameConstraints extension, and whether any of its
/// subtrees is an IP address.
fn name_constraints(pem: &[u8]) -> (bool, bool) {
    let d = der(pem);
    let (_, ca) = x509_parser::parse_x509_certificate(&d).expect("CA parses");
    match ca.name_constraints().expect("one nameConstraints at most") {
        None => (false, false),
        Some(nc) => {
            let ip = nc
                .value
                .permitted_subtrees
                .iter()
                .flatten()
                .chain(nc.value.excluded_subtrees.iter().flatten())
                .any(|s| matches!(s.base, x509_parser::extensions::GeneralName::IPAddress(_)));
            (true, ip)
        }
    }
}

/// The material `accord-node init` wrote before issue 28: a CA name-constrained to the node's
/// DNS names and IP addresses (the leaf for the same names, server and client auth).
fn write_old_style_material(dir: &Path, name: &str) {
    let sans: Vec<String> = [
        "localhost",
        "127.0.0.1",
        "::1",
        format!("{name}.accord").as_str(),
    ]
    .map(String::from)
    .to_vec();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, format!("{name} Accord CA"));
    ca.name_constraints = Some(NameConstraints {
        permitted_subtrees: sans
            .iter()
            .map(|s| match s.parse::<std::net::IpAddr>() {
                Ok(ip) => GeneralSubtree::IpAddress(CidrSubnet::from_addr_prefix(
                    ip,
                    if ip.is_ipv4() { 32 } else { 128 },
                )),
                Err(_) => GeneralSubtree::DnsName(s.clone()),
            })
            .collect(),
        excluded_subtrees: Vec::new(),
    });
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(sans).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let cert = p.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("tls/ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("tls/node.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("tls/node.key"), key.serialize_pem()).unwrap();
}

#[tokio::test]
async fn init_writes_a_ca_without_name_constraints_that_serves() {
    let node = TestNode::builder("acme").start().await.unwrap();
    let ca = node.ca_pem();
    assert_eq!(name_constraints(&ca), (false, false));
    let d = der(&ca);
    let (_, c) = x509_parser::parse_x509_certificate(&d).unwrap();
    let ku = c.key_usage().unwrap().expect("keyUsage").value;
    assert!(ku.key_cert_sign() && ku.crl_sign());
    // The CA key is not in the directory: nothing but the leaf's key is a private key.
    for sub in ["", "tls", "keys"] {
        for e in std::fs::read_dir(node.dir.join(sub)).unwrap().flatten() {
            let p = e.path();
            if p.is_file() && p.file_name().unwrap() != "node.key" {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                assert!(!text.contains("PRIVATE KEY"), "{}", p.display());
            }
        }
    }
}

#[tokio::test]
async fn an_old_node_keeps_working_and_tls_reissue_replaces_its_material() {
    let mut node = TestNode::builder("acme").party("alice").init().unwrap();
    write_old_style_material(&node.dir, "acme");
    let old_ca = node.ca_pem();
    assert_eq!(name_constraints(&old_ca), (true, true));
    let old_cert = std::fs::read(node.dir.join("tls/node.pem")).unwrap();
    let old_key = std::fs::read(node.dir.join("tls/node.key")).unwrap();
    let config = std::fs::read(node.dir.join("accord.toml")).unwrap();
    let vkey = node.vkey();

    // Existing material still loads and serves (TestNode::spawn waits for SERVING with tls/ca.pem).
    node.spawn().await.unwrap();
    // Stopped at once (what was recorded is synced): a graceful stop adds nothing here.
    node.kill9();

    let dir = node.dir.to_str().unwrap().to_string();
    let (code, out, err) =
        run_bin("accord-node", &["tls", "reissue", "--dir", &dir], None).unwrap();
    assert_eq!(code, 0, "{out}{err}");

    // The new CA has no name constraints; the leaf keeps the key and names, chains to it.
    let new_ca = node.ca_pem();
    assert_eq!(name_constraints(&new_ca), (false, false));
    assert_ne!(new_ca, old_ca);
    let new_cert = std::fs::read(node.dir.join("tls/node.pem")).unwrap();
    assert_eq!(
        std::fs::read(node.dir.join("tls/node.key")).unwrap(),
        old_key
    );
    let spki_and_names = |pem: &[u8]| {
        let d = der(pem);
        let (_, c) = x509_parser::parse_x509_certificate(&d).unwrap();
        let names = c
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>();
        (c.public_key().raw.to_vec(), names)
    };
    assert_eq!(spki_and_names(&new_cert), spki_and_names(&old_cert));
    // Keys, config and credentials are untouched.
    assert_eq!(node.vkey(), vkey);
    assert_eq!(std::fs::read(node.dir.join("accord.toml")).unwrap(), config);

    // What peers must update is printed: the new CA and the new leaf's pin.
    let pin = hex::encode(sha2::Sha256::digest(der(&new_cert)));
    assert!(out.contains(&format!("pin_sha256: {pin}")), "{out}");
    assert!(out.contains("tls/ca.pem"), "{out}");
    assert!(out.contains("peer"), "{out}");

    // The old files are backed up, byte for byte, the key still owner-only.
    let backups: Vec<_> = std::fs::read_dir(node.dir.join("tls"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    let b = &backups[0];
    assert!(out.contains(&b.display().to_string()), "{out}");
    assert_eq!(std::fs::read(b.join("ca.pem")).unwrap(), old_ca);
    assert_eq!(std::fs::read(b.join("node.pem")).unwrap(), old_cert);
    assert_eq!(std::fs::read(b.join("node.key")).unwrap(), old_key);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&b.join("node.key")), 0o600);
        assert_eq!(mode(&node.dir.join("tls/node.key")), 0o600);
    }

    // The node starts and serves under the new CA; a client holding the old CA is refused.
    node.spawn().await.unwrap();
    // The party's credentials still work: the call is authenticated and answered.
    let mut work = node.work_party("alice").await.unwrap();
    let status = work
        .get_commitment(accord_proto::pb::work::v1::GetCommitmentRequest {
            commitment_id: "absent".into(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            status.code(),
            tonic::Code::NotFound | tonic::Code::InvalidArgument
        ),
        "{status:?}"
    );
    let old = async { wait_serving(tls_channel(node.addr, &old_ca, None).await?).await };
    assert!(old.await.is_err(), "the old CA still verifies the node");

    // A second reissue backs up into a directory of its own.
    drop(work);
    node.kill9();
    let (code, out, err) =
        run_bin("accord-node", &["tls", "reissue", "--dir", &dir], None).unwrap();
    assert_eq!(code, 0, "{out}{err}");
    let n = std::fs::read_dir(node.dir.join("tls"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .count();
    assert_eq!(n, 2);
    node.spawn().await.unwrap();
}
