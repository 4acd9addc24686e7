//! Issue 9, deploy files: every file in `deploy/` parses (YAML, Dockerfile, shell, systemd) and
//! names only binaries, subcommands and flags that exist — asked of the built binaries' own
//! `--help` — and only ports the daemons are configured to listen on. The compose set-up script
//! is run for real (in a temporary directory) and the configs it writes validate.

use accord_tests::{bin, bin_dir};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const BINARIES: &[&str] = &["accord-node", "accord-witness", "accordctl"];

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn read(p: &str) -> String {
    std::fs::read_to_string(deploy().join(p)).unwrap_or_else(|e| panic!("deploy/{p}: {e}"))
}

fn yaml_docs(p: &str) -> Vec<serde_yaml::Value> {
    let text = read(p);
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let mut v = serde_yaml::Value::deserialize(d)
                .unwrap_or_else(|e| panic!("deploy/{p}: not YAML: {e}"));
            v.apply_merge().unwrap();
            v
        })
        .collect()
}

use serde::Deserialize as _;

/// One command line found in a file: where, and its words.
#[derive(Debug, Clone)]
struct Invocation {
    source: String,
    words: Vec<String>,
}

/// Shell words of a script, split into command lines at `;`, `&&`, `||`, `|`, `$(` and `)`,
/// with line continuations joined and quotes removed. Only lines starting with one of our
/// binaries are kept.
fn shell_invocations(source: &str, script: &str) -> Vec<Invocation> {
    let joined = script.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let mut cur: Vec<String> = Vec::new();
        let flush = |cur: &mut Vec<String>, out: &mut Vec<Invocation>| {
            if let Some(first) = cur.first()
                && BINARIES.contains(&first.trim_start_matches("/usr/local/bin/"))
            {
                out.push(Invocation {
                    source: source.to_string(),
                    words: cur.clone(),
                });
            }
            cur.clear();
        };
        for raw in line.split_whitespace() {
            let mut w = raw.to_string();
            // `X=$(accord-witness` starts a command substitution.
            if let Some(i) = w.find("$(") {
                flush(&mut cur, &mut out);
                w = w[i + 2..].to_string();
            }
            if matches!(w.as_str(), ";" | "&&" | "||" | "|" | ">" | ">>" | "2>&1") {
                flush(&mut cur, &mut out);
                continue;
            }
            let ends = w.ends_with(')') && !w.contains('(');
            let w = w.trim_end_matches(')').trim_matches('"').trim_matches('\'');
            if !w.is_empty() {
                cur.push(w.to_string());
            }
            if ends {
                flush(&mut cur, &mut out);
            }
        }
        flush(&mut cur, &mut out);
    }
    out
}

fn strings(v: &serde_yaml::Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A container's command + args (k8s) or command/entrypoint (compose); a `sh -c` script is
/// read as shell.
fn container_invocations(source: &str, command: Vec<String>, args: Vec<String>) -> Vec<Invocation> {
    let all: Vec<String> = command.into_iter().chain(args).collect();
    if all.len() >= 3 && all[0].ends_with("sh") && all[1] == "-c" {
        return shell_invocations(source, &all[2..].join("\n"));
    }
    if all
        .first()
        .is_some_and(|b| BINARIES.contains(&b.trim_start_matches("/usr/local/bin/")))
    {
        return vec![Invocation {
            source: source.to_string(),
            words: all,
        }];
    }
    Vec::new()
}

/// Every `--flag` a binary's subcommand accepts, from its own `--help`; None when the
/// subcommand does not exist.
fn help_flags(binary: &str, path: &[String]) -> Option<BTreeSet<String>> {
    let out = Command::new(bin(binary))
        .args(path)
        .arg("--help")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut flags: BTreeSet<String> = BTreeSet::new();
    for w in text.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']') {
        if let Some(f) = w.strip_prefix("--") {
            let f: String = f
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if !f.is_empty() {
                flags.insert(format!("--{f}"));
            }
        }
    }
    Some(flags)
}

/// Checks an invocation against the binary's help; returns the ports of its listen flags.
fn check(
    inv: &Invocation,
    cache: &mut BTreeMap<(String, Vec<String>), Option<BTreeSet<String>>>,
) -> Vec<u16> {
    let binary = inv.words[0]
        .trim_start_matches("/usr/local/bin/")
        .to_string();
    assert!(
        BINARIES.contains(&binary.as_str()),
        "{}: unknown binary {binary}",
        inv.source
    );
    let path: Vec<String> = inv.words[1..]
        .iter()
        .take_while(|w| !w.starts_with('-'))
        .cloned()
        .collect();
    // A positional argument (e.g. `peer health NAME`) ends the subcommand path: the longest
    // prefix that --help accepts is the subcommand.
    let mut flags = None;
    let mut sub = path.clone();
    while flags.is_none() {
        flags = cache
            .entry((binary.clone(), sub.clone()))
            .or_insert_with(|| help_flags(&binary, &sub))
            .clone();
        if flags.is_none() {
            assert!(
                !sub.is_empty(),
                "{}: {binary} has no subcommand {path:?}",
                inv.source
            );
            sub.pop();
        }
    }
    let flags = flags.unwrap();
    let mut ports = Vec::new();
    let mut it = inv.words.iter().peekable();
    while let Some(w) = it.next() {
        if let Some(f) = w.strip_prefix("--") {
            let name = format!("--{}", f.split('=').next().unwrap_or(f));
            assert!(
                flags.contains(&name),
                "{}: `{binary} {}` has no flag {name} (it has {flags:?})",
                inv.source,
                sub.join(" ")
            );
            if matches!(
                name.as_str(),
                "--listen" | "--grpc-listen" | "--http-listen"
            ) {
                let v = it.peek().map(|s| s.as_str()).unwrap_or("");
                ports.push(port_of(v).unwrap_or_else(|| panic!("{}: {name} {v:?}", inv.source)));
            }
        }
    }
    ports
}

fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit(':')
        .next()?
        .trim_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()
}

/// `metrics_listen = "0.0.0.0:PORT"` set by the scripts' sed lines.
fn metrics_ports(text: &str) -> Vec<u16> {
    text.match_indices("metrics_listen = \"")
        .filter_map(|(i, m)| {
            let rest = &text[i + m.len()..];
            port_of(&rest[..rest.find('"')?])
        })
        .collect()
}

#[test]
fn deploy_files_name_only_binaries_flags_and_ports_that_exist() {
    let mut cache = BTreeMap::new();
    let mut invocations = Vec::new();
    let mut exposed: Vec<(String, u16)> = Vec::new();

    // Dockerfile: multi-stage, non-root, builds and copies exactly our binaries.
    let dockerfile = read("Dockerfile");
    let lines: Vec<String> = dockerfile
        .replace("\\\n", " ")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let known_instr = [
        "FROM",
        "RUN",
        "WORKDIR",
        "COPY",
        "USER",
        "EXPOSE",
        "CMD",
        "ENTRYPOINT",
        "ENV",
        "ARG",
        "LABEL",
        "VOLUME",
    ];
    for l in &lines {
        let instr = l.split_whitespace().next().unwrap();
        assert!(
            known_instr.contains(&instr),
            "Dockerfile: unknown instruction {instr}"
        );
    }
    assert!(
        lines.iter().filter(|l| l.starts_with("FROM ")).count() >= 2,
        "multi-stage"
    );
    let user = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("USER "))
        .expect("a USER line");
    let who = user[5..].split(':').next().unwrap().trim();
    assert!(
        who != "root" && who != "0",
        "the runtime runs as non-root: {user}"
    );
    let mut built = BTreeSet::new();
    for l in &lines {
        let words: Vec<&str> = l.split_whitespace().collect();
        for w in words.windows(2) {
            if w[0] == "--bin" {
                built.insert(w[1].to_string());
            }
        }
        if l.starts_with("COPY --from=") {
            let src = words[2];
            let name = src.rsplit('/').next().unwrap();
            assert!(
                built.contains(name),
                "Dockerfile copies {name}, which is not built"
            );
        }
        if let Some(p) = l.strip_prefix("EXPOSE ") {
            for port in p.split_whitespace() {
                exposed.push(("Dockerfile EXPOSE".into(), port.parse().unwrap()));
            }
        }
        if let Some(j) = l
            .strip_prefix("CMD ")
            .or_else(|| l.strip_prefix("ENTRYPOINT "))
        {
            let words: Vec<String> = serde_json::from_str(j).expect("exec-form JSON array");
            invocations.extend(container_invocations("Dockerfile CMD", words, vec![]));
        }
    }
    assert_eq!(
        built,
        BINARIES.iter().map(|s| s.to_string()).collect(),
        "the image builds the three binaries"
    );
    for b in &built {
        assert!(bin_dir().join(b).exists(), "{b} is a workspace binary");
    }

    // compose.yaml and the set-up script it mounts.
    let compose = yaml_docs("compose/compose.yaml").remove(0);
    let services = compose["services"].as_mapping().expect("services");
    assert!(services.len() >= 5, "setup, two witnesses, two nodes");
    for (name, s) in services {
        let name = name.as_str().unwrap();
        let src = format!("compose.yaml {name}");
        invocations.extend(container_invocations(
            &src,
            strings(&s["entrypoint"]),
            strings(&s["command"]),
        ));
        let test = strings(&s["healthcheck"]["test"]);
        if !test.is_empty() {
            assert_eq!(test[0], "CMD");
            invocations.extend(container_invocations(&src, test[1..].to_vec(), vec![]));
        }
        for p in strings(&s["ports"]) {
            let container = p.rsplit(':').next().unwrap().parse().unwrap();
            exposed.push((src.clone(), container));
        }
        for v in strings(&s["volumes"]) {
            if let Some(local) = v.strip_prefix("./") {
                let file = local.split(':').next().unwrap();
                assert!(
                    deploy().join("compose").join(file).is_file(),
                    "{src}: mounts missing {file}"
                );
            }
        }
    }
    // compose-ha/: acme's node as two instances on PostgreSQL (issue 31).
    let compose_ha = yaml_docs("compose-ha/compose.yaml").remove(0);
    for (name, s) in compose_ha["services"].as_mapping().expect("services") {
        let name = name.as_str().unwrap();
        if s["image"].as_str() != Some("accord") {
            continue;
        }
        let src = format!("compose-ha/compose.yaml {name}");
        invocations.extend(container_invocations(
            &src,
            strings(&s["entrypoint"]),
            strings(&s["command"]),
        ));
        for p in strings(&s["ports"]) {
            let container = p.rsplit(':').next().unwrap().parse().unwrap();
            exposed.push((src.clone(), container));
        }
    }
    let setup_ha = read("compose-ha/setup.sh");
    invocations.extend(shell_invocations("compose-ha/setup.sh", &setup_ha));
    let setup = read("compose/setup.sh");
    invocations.extend(shell_invocations("compose/setup.sh", &setup));
    let mut listen_ports: BTreeSet<u16> = metrics_ports(&setup).into_iter().collect();
    for (i, _) in setup.match_indices("https://") {
        let rest = &setup[i..];
        let end = rest.find(['"', ' ', '\n']).unwrap();
        exposed.push((
            "compose/setup.sh endpoint".into(),
            port_of(&rest[..end]).unwrap(),
        ));
    }

    // Kubernetes: every document parses and has a kind; containers' commands, ports, probes.
    let mut kinds = BTreeSet::new();
    // kubernetes/: two organisations and a witness; kubernetes-ha/: one organisation's node as
    // two instances on PostgreSQL (issue 31), whose database containers are not ours to check.
    let k8s_files = ["kubernetes", "kubernetes-ha"].into_iter().flat_map(|d| {
        std::fs::read_dir(deploy().join(d))
            .unwrap()
            .map(move |e| (d, e.unwrap().path()))
    });
    for (dir, path) in k8s_files {
        let file = format!("{dir}/{}", path.file_name().unwrap().to_string_lossy());
        assert!(file.ends_with(".yaml"), "{file}");
        listen_ports.extend(metrics_ports(&read(&file)));
        for doc in yaml_docs(&file) {
            let kind = doc["kind"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}: no kind"))
                .to_string();
            assert!(
                doc["apiVersion"].as_str().is_some(),
                "{file}: no apiVersion"
            );
            kinds.insert(kind.clone());
            let ours = |c: &serde_yaml::Value| c["image"].as_str() == Some("accord");
            let spec = &doc["spec"]["template"]["spec"];
            let containers = spec["containers"]
                .as_sequence()
                .cloned()
                .unwrap_or_default();
            if (kind == "StatefulSet" && !containers.iter().any(ours))
                || (kind == "Service"
                    && doc["spec"]["selector"]["app.kubernetes.io/name"].as_str()
                        == Some("postgres"))
            {
                // The database's own workload and Service (kubernetes-ha/).
                continue;
            }
            for key in ["initContainers", "containers"] {
                for c in spec[key].as_sequence().cloned().unwrap_or_default() {
                    if !ours(&c) {
                        continue;
                    }
                    let src = format!("{file} {}", c["name"].as_str().unwrap_or("?"));
                    invocations.extend(container_invocations(
                        &src,
                        strings(&c["command"]),
                        strings(&c["args"]),
                    ));
                    for probe in ["readinessProbe", "livenessProbe"] {
                        let cmd = strings(&c[probe]["exec"]["command"]);
                        if key == "containers" {
                            assert!(!cmd.is_empty(), "{src}: {probe} (gRPC health over TLS)");
                        }
                        for w in &cmd {
                            if let Some(p) = w.strip_prefix("https://").and_then(port_of) {
                                exposed.push((format!("{src} {probe}"), p));
                            }
                        }
                        invocations.extend(container_invocations(&src, cmd, vec![]));
                    }
                    for p in c["ports"].as_sequence().cloned().unwrap_or_default() {
                        exposed.push((src.clone(), p["containerPort"].as_u64().unwrap() as u16));
                    }
                    if key == "containers" {
                        let ports = c["ports"].as_sequence().cloned().unwrap_or_default();
                        assert!(
                            ports.iter().any(|p| p["name"].as_str() == Some("metrics")),
                            "{src}: a metrics port"
                        );
                    }
                }
            }
            if kind == "StatefulSet" {
                assert!(
                    doc["spec"]["volumeClaimTemplates"]
                        .as_sequence()
                        .is_some_and(|v| !v.is_empty()),
                    "{file}: a volume claim"
                );
                let port = doc["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"]
                    .as_str()
                    .unwrap();
                exposed.push((format!("{file} prometheus.io/port"), port.parse().unwrap()));
            }
            if kind == "Service" {
                for p in doc["spec"]["ports"].as_sequence().unwrap() {
                    exposed.push((
                        format!("{file} Service"),
                        p["port"].as_u64().unwrap() as u16,
                    ));
                }
            }
        }
    }
    assert!(
        kinds.contains("StatefulSet") && kinds.contains("Service") && kinds.contains("Namespace")
    );

    // systemd units.
    for unit in [
        "systemd/accord-node.service",
        "systemd/accord-witness.service",
    ] {
        let text = read(unit);
        let exec = text
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .unwrap_or_else(|| panic!("{unit}: ExecStart"));
        invocations.extend(shell_invocations(unit, exec));
    }

    // Every invocation against the binaries' help; the listen flags give the ports in use.
    assert!(invocations.len() >= 15, "{invocations:#?}");
    for inv in &invocations {
        listen_ports.extend(check(inv, &mut cache));
    }
    for b in ["accord-node", "accord-witness"] {
        assert!(
            invocations
                .iter()
                .any(|i| i.words[0].ends_with(b) && i.words[1] == "serve"),
            "{b} serve is deployed"
        );
    }
    for (src, port) in &exposed {
        assert!(
            listen_ports.contains(port),
            "{src}: port {port} is not one the daemons listen on ({listen_ports:?})"
        );
    }
}

/// compose-ha/setup.sh (issue 31) writes one config for both instances, on PostgreSQL, that
/// validates (its password file exists), with a certificate naming both instances.
#[test]
fn compose_ha_setup_writes_a_postgres_config_that_validates() {
    let tmp = tempfile::tempdir().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg(deploy().join("compose-ha/setup.sh"))
        .env("ACCORD_DIR", tmp.path())
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "setup.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = accord_node::config::Config::load(&tmp.path().join("acme/accord.toml")).unwrap();
    assert_eq!(c.storage.backend, accord_node::config::Backend::Postgres);
    assert_eq!(
        c.storage.url.as_deref(),
        Some("postgres://accord@postgres:5432/accord")
    );
    assert_eq!(c.listen.port(), 7443);
    // The certificate's subjectAltName, read in-process (no openssl binary needed).
    let pem = std::fs::read(tmp.path().join("acme/tls/node.pem")).unwrap();
    let der = rustls_pemfile::certs(&mut pem.as_slice())
        .next()
        .expect("a certificate")
        .unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
    let text = format!(
        "{:?}",
        cert.subject_alternative_name()
            .unwrap()
            .expect("subjectAltName")
            .value
            .general_names
    );
    for name in ["acme-a.accord", "acme-b.accord", "acme.accord"] {
        assert!(text.contains(name), "the certificate names {name}: {text}");
    }
}

#[test]
fn compose_setup_writes_configs_that_validate() {
    // The sed lines of the scripts rely on what `init` writes.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("accord");
    std::fs::create_dir(&dir).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg(deploy().join("compose/setup.sh"))
        .env("ACCORD_DIR", &dir)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "setup.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for org in ["acme", "globex"] {
        let cfg = dir.join(org).join("accord.toml");
        let c = accord_node::config::Config::load(&cfg).unwrap_or_else(|e| panic!("{org}: {e}"));
        assert_eq!(c.metrics_listen.map(|a| a.port()), Some(9464));
        assert_eq!(c.witnesses.k, 2);
        assert_eq!(c.witnesses.list.len(), 2);
        assert_eq!(c.peers.len(), 1);
        let other = if org == "acme" { "globex" } else { "acme" };
        assert_eq!(c.peers[0].name, other);
        assert_eq!(c.peers[0].endpoint, format!("https://{other}.accord:7443"));
        assert_eq!(c.peers[0].vkeys.len(), 2, "node and party keys");
        assert_eq!(c.listen.port(), 7443);
    }
    for w in ["w1", "w2"] {
        let c = accord_witness::Config::load(&dir.join(w).join("witness.toml"))
            .unwrap_or_else(|e| panic!("{w}: {e}"));
        assert_eq!(c.logs.len(), 2);
        assert_eq!(c.metrics_listen.map(|a| a.port()), Some(9465));
        assert_eq!(c.grpc_listen.port(), 7444);
    }
    // Run twice: the second run changes nothing.
    let again = Command::new("sh")
        .arg(deploy().join("compose/setup.sh"))
        .env("ACCORD_DIR", &dir)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("already initialised"));
}
