//! Issue 5: peers are configured by name, endpoint, keys and TLS identity; config `[[peers]]` are
//! seeded into the store at start-up, and the operator's changes (through `accordctl admin`)
//! persist across restarts.

use crate::federation_common;

use accord_tests::TestNode;
use federation_common::*;

#[tokio::test(flavor = "multi_thread")]
async fn config_peers_are_seeded_and_admin_changes_persist() {
    let other = TestNode::builder("initech")
        .party("eve")
        .start()
        .await
        .unwrap();
    let (ca, vkey) = (other.dir.join("tls/ca.pem"), other.vkey());
    let entry = format!(
        "\n[[peers]]\nname = \"initech\"\nendpoint = \"https://127.0.0.1:{}\"\nvkeys = [\"{vkey}\"]\nca = \"{}\"\n",
        other.addr.port(),
        ca.display()
    );
    let mut a = TestNode::builder("acme")
        .party("alice")
        .config(move |t, _| t.push_str(&entry))
        .start()
        .await
        .unwrap();
    let list = |a: &TestNode| {
        let (code, out, err) = accordctl(
            &[
                admin_args(a),
                vec!["--json".into(), "peer".into(), "list".into()],
            ]
            .concat(),
        );
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()
    };
    let j = list(&a);
    assert_eq!(j[0]["name"], "initech");
    assert_eq!(j[0]["enabled"], true);
    assert_eq!(j[0]["keys"][0]["vkey"], other.vkey());

    // Add a second peer and disable the seeded one, by hand; both survive a restart (the config
    // peer is not re-seeded over the operator's change).
    let globex = TestNode::builder("globex").start().await.unwrap();
    let pem = globex.dir.join("tls/ca.pem").display().to_string();
    let add = [
        admin_args(&a),
        vec![
            "peer".into(),
            "add".into(),
            "--name".into(),
            "globex".into(),
            "--endpoint".into(),
            format!("https://{}", globex.addr),
            "--vkey".into(),
            globex.vkey(),
            "--tls-pem".into(),
            pem,
        ],
    ]
    .concat();
    let (code, _, err) = accordctl(&add);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = accordctl(&add);
    assert_ne!(code, 0, "adding it twice fails");
    assert!(err.contains("exists"), "{err}");
    let (code, _, err) = accordctl(
        &[
            admin_args(&a),
            vec!["peer".into(), "disable".into(), "initech".into()],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(a.terminate().unwrap());
    a.spawn().await.unwrap();
    let j = list(&a);
    let names: Vec<&str> = j
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["globex", "initech"]);
    assert_eq!(j[1]["enabled"], false);

    // A bad peer is refused with the field named, and nothing is added.
    let bad = [
        admin_args(&a),
        vec![
            "peer".into(),
            "add".into(),
            "--name".into(),
            "umbrella".into(),
            "--endpoint".into(),
            "http://nope".into(),
            "--vkey".into(),
            globex.vkey(),
            "--tls-pem".into(),
            globex.dir.join("tls/ca.pem").display().to_string(),
        ],
    ]
    .concat();
    let (code, _, err) = accordctl(&bad);
    assert_ne!(code, 0);
    assert!(err.contains("peer.endpoint"), "{err}");
    assert_eq!(list(&a).as_array().unwrap().len(), 2);
}
