//! C2SP signed notes (c2sp.org/signed-note): parse, re-serialise, verify against fixed keys.

use crate::note_verifiers;
use accord_proto::note::{self, Note};

/// One execution: panics when a property fails.
pub fn run(data: &[u8]) {
    let Ok(n) = Note::parse(data) else { return };
    // A parsed note serialises back to exactly the bytes it came from: no two byte strings
    // are the same note (signature lines are canonical base64, the text is kept verbatim).
    assert_eq!(n.to_string().as_bytes(), data, "note does not round-trip");
    let verifiers = note_verifiers();
    match n.verify(&verifiers) {
        Ok(opened) => {
            // Whatever verified is one of the keys we gave, and `open` agrees.
            assert!(verifiers.iter().any(|v| opened.is_signed_by(v)));
            assert!(note::open(data, &verifiers).is_ok());
        }
        Err(_) => assert!(note::open(data, &verifiers).is_err()),
    }
}
