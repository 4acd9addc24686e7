//! Signed notes (c2sp.org/signed-note) with Go `sumdb/note` semantics: the published notes
//! open, and each malformed case of Go's TestOpen is rejected the same way.

mod common;

use accord_proto::Error;
use accord_proto::note::{self, Note, NoteSignature, Signer, Verifier};
use proptest::prelude::*;
use rand::rngs::OsRng;

struct Go {
    text: String,
    peter_line: String,
    enoch_line: String,
    peter: Verifier,
    enoch: Verifier,
}

fn go() -> Go {
    let f = common::vector_file("signed-note.txt");
    let signed = common::block(&f, 0);
    let (text, sigs) = signed.split_once("\n\n").unwrap();
    Go {
        text: format!("{text}\n"),
        peter_line: sigs.to_owned(),
        enoch_line: format!(
            "{}\n",
            common::line_following(&f, "its signature on the same text:")
        ),
        peter: Verifier::from_vkey(common::line_starting(&f, "PeterNeumann+")).unwrap(),
        enoch: Verifier::from_vkey(common::line_after(&f, "second key (verify-only): ")).unwrap(),
    }
}

#[test]
fn published_notes_open() {
    let g = go();
    let msg = format!("{}\n{}", g.text, g.peter_line);
    let opened = note::open(msg.as_bytes(), std::slice::from_ref(&g.peter)).unwrap();
    assert_eq!(opened.text, g.text);
    assert_eq!(opened.verified.len(), 1);
    assert_eq!(opened.verified[0].verifier, g.peter);
    assert_eq!(opened.verified[0].timestamp, None);
    assert!(opened.unverified.is_empty());
    // Parse and format are inverse.
    assert_eq!(Note::parse(msg.as_bytes()).unwrap().to_string(), msg);

    // The C2SP spec's example.
    let f = common::vector_file("signed-note.txt");
    let example = Verifier::from_vkey(common::line_after(&f, "vkey: ")).unwrap();
    let opened = note::open(common::block(&f, 1).as_bytes(), &[example]).unwrap();
    assert_eq!(opened.text, "This is an example message.\n");
}

#[test]
fn known_and_unknown_signatures() {
    let g = go();
    let both = format!("{}\n{}{}", g.text, g.peter_line, g.enoch_line);
    let all = [g.peter.clone(), g.enoch.clone()];
    let opened = note::open(both.as_bytes(), &all).unwrap();
    let names: Vec<&str> = opened.verified.iter().map(|v| v.verifier.name()).collect();
    assert_eq!(names, ["PeterNeumann", "EnochRoot"]);

    // Unknown keys are kept, not errors.
    let opened = note::open(both.as_bytes(), std::slice::from_ref(&g.peter)).unwrap();
    assert_eq!(opened.verified.len(), 1);
    assert_eq!(opened.unverified.len(), 1);
    assert_eq!(opened.unverified[0].name, "EnochRoot");
    assert!(opened.is_signed_by(&g.peter) && !opened.is_signed_by(&g.enoch));

    // No known key at all.
    let stranger = Signer::generate("Stranger", &mut OsRng).unwrap().verifier();
    assert_eq!(
        note::open(both.as_bytes(), &[stranger]),
        Err(Error::UnverifiedNote)
    );
    assert_eq!(note::open(both.as_bytes(), &[]), Err(Error::UnverifiedNote));

    // Two verifiers with one identity are ambiguous (Go: "ambiguous key EnochRoot+af0cfe78").
    let err = note::open(
        both.as_bytes(),
        &[g.peter.clone(), g.enoch.clone(), g.enoch.clone()],
    )
    .unwrap_err();
    assert!(matches!(err, Error::AmbiguousKey { .. }));
    assert_eq!(err.to_string(), "ambiguous key EnochRoot+af0cfe78");

    // A key with the same name but another id is simply unknown.
    let same_name = Signer::generate("PeterNeumann", &mut OsRng)
        .unwrap()
        .verifier();
    assert_eq!(
        note::open(both.as_bytes(), &[same_name]),
        Err(Error::UnverifiedNote)
    );
}

#[test]
fn go_open_negative_cases() {
    let g = go();
    let known = [g.peter.clone(), g.enoch.clone()];
    let malformed = |msg: &[u8]| {
        let r = note::open(msg, &known);
        assert!(
            matches!(r, Err(Error::MalformedNote { .. })),
            "{:?}: {r:?}",
            String::from_utf8_lossy(msg)
        );
    };
    let t = &g.text;
    let p = &g.peter_line;
    // No blank line between text and signatures.
    malformed(format!("{t}{p}").as_bytes());
    // Missing final newline.
    malformed(format!("{t}\n{}", p.trim_end()).as_bytes());
    // Control characters and invalid UTF-8.
    malformed(format!("\x01{t}\n{p}").as_bytes());
    malformed(&[b"\xff".as_slice(), format!("{t}\n{p}").as_bytes()].concat());
    malformed(format!("{t}\r\n{p}").as_bytes());
    // A space in the name.
    malformed(format!("{t}\n{}", p.replacen("PeterNeumann", "Bad Name", 1)).as_bytes());
    // A trailing non-signature line.
    malformed(format!("{t}\n{p}Unexpected line.\n").as_bytes());
    // Base64 too short for key id and signature.
    malformed(format!("{t}\n\u{2014} PeterNeumann AAAA\n").as_bytes());
    // Hyphen instead of em dash.
    malformed(format!("{t}\n{}", p.replacen('\u{2014}', "-", 1)).as_bytes());
    // No signatures at all.
    malformed(format!("{t}\n").as_bytes());

    // At most 100 signatures (duplicates count; they verify once).
    let hundred = format!("{t}\n{}", p.repeat(100));
    let opened = note::open(hundred.as_bytes(), &known).unwrap();
    assert_eq!(opened.verified.len(), 1);
    malformed(format!("{t}\n{}", p.repeat(101)).as_bytes());

    // "ABCD" inserted in the base64: still well-formed, but the signature fails.
    let tampered = format!("{}ABCD{}", &p[..60], &p[60..]);
    let err = note::open(format!("{t}\n{tampered}").as_bytes(), &known).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid signature for key PeterNeumann+c74f20a3"
    );
    // A known key's bad signature rejects the note even when another known key verified.
    let err = note::open(
        format!("{t}\n{}{tampered}", g.enoch_line).as_bytes(),
        &known,
    )
    .unwrap_err();
    assert!(matches!(err, Error::BadSignature { .. }));
    // Tampered text.
    let err = note::open(
        format!("{}\n{p}", t.replace("answer", "Answer")).as_bytes(),
        &known,
    )
    .unwrap_err();
    assert!(matches!(err, Error::BadSignature { .. }));
}

#[test]
fn sign_note_checks_its_input() {
    let s = Signer::generate("example.com/k", &mut OsRng).unwrap();
    let s2 = Signer::generate("example.com/k2", &mut OsRng).unwrap();
    assert!(matches!(
        note::sign_note("no newline", &[&s]),
        Err(Error::MalformedNote { .. })
    ));
    assert!(matches!(
        note::sign_note("tab\there\n", &[&s]),
        Err(Error::MalformedNote { .. })
    ));
    assert!(matches!(
        note::sign_note("hello\n", &[]),
        Err(Error::MalformedNote { .. })
    ));
    // Text with blank lines of its own is fine: the last blank line separates.
    let text = "para one\n\npara two\n\n";
    let signed = note::sign_note(text, &[&s, &s2]).unwrap();
    let opened = note::open(signed.as_bytes(), &[s.verifier(), s2.verifier()]).unwrap();
    assert_eq!(opened.text, text);
    assert_eq!(opened.verified.len(), 2);
}

#[test]
fn add_signature_replaces_the_same_key() {
    let s = Signer::generate("example.com/k", &mut OsRng).unwrap();
    let mut n = Note::new("hello\n").unwrap();
    n.sign(&s).unwrap();
    n.sign(&s).unwrap();
    assert_eq!(n.signatures().len(), 1);
    let bad = NoteSignature {
        name: "has space".into(),
        key_id: [0; 4],
        signature: vec![1],
    };
    assert!(n.add_signature(bad).is_err());
    let line = n.signatures()[0].to_line();
    assert_eq!(NoteSignature::parse_line(&line).unwrap(), n.signatures()[0]);
}

proptest! {
    #[test]
    fn parse_format_roundtrip(
        lines in proptest::collection::vec("[^\\p{Cc}]{0,30}", 1..5),
        sigs in proptest::collection::vec(("[a-z./]{1,12}", any::<[u8; 4]>(), proptest::collection::vec(any::<u8>(), 1..80)), 1..5),
    ) {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let mut n = Note::new(&text).unwrap();
        for (name, key_id, signature) in sigs {
            n.add_signature(NoteSignature { name, key_id, signature }).unwrap();
        }
        let msg = n.to_string();
        prop_assert_eq!(Note::parse(msg.as_bytes()).unwrap(), n);
    }

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), s in "\\PC{0,200}") {
        // Random bytes and single lines are no signed notes: each is refused as malformed.
        let malformed = |r: Result<Note, accord_proto::Error>| {
            matches!(r, Err(accord_proto::Error::MalformedNote { .. }))
        };
        prop_assert!(malformed(Note::parse(&bytes)));
        prop_assert!(malformed(Note::parse(s.as_bytes())));
        prop_assert!(matches!(
            note::open(s.as_bytes(), &[]),
            Err(accord_proto::Error::MalformedNote { .. })
        ), "not refused as a malformed note");
        // Only a line starting with the em dash can be a signature line.
        prop_assert!(matches!(
            NoteSignature::parse_line(&s),
            Err(accord_proto::Error::MalformedNote { .. })
        ) || s.starts_with('\u{2014}'), "a line without the em dash parsed");
    }
}
