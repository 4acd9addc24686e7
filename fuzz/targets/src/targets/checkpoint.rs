//! tlog-checkpoint bodies and cosignature/v1 lines: parse, re-serialise, open with the log key
//! and a witness key, verify each cosignature.

use crate::{ORIGIN, cosigner_verifier, log_verifier};
use accord_proto::checkpoint::{Checkpoint, open_checkpoint, verify_cosignature};
use accord_proto::note::Note;

/// One execution: panics when a property fails.
pub fn run(data: &[u8]) {
    if let Ok(body) = std::str::from_utf8(data)
        && let Ok(cp) = Checkpoint::parse(body)
    {
        let text = cp.to_body().expect("a parsed checkpoint serialises");
        assert_eq!(Checkpoint::parse(&text).expect("re-parses"), cp);
    }
    let log = [log_verifier()];
    let wit = cosigner_verifier();
    let opened = open_checkpoint(data, ORIGIN, &log, std::slice::from_ref(&wit));
    let Ok(note) = Note::parse(data) else {
        assert!(opened.is_err(), "a note that does not parse cannot open");
        return;
    };
    let mut cosigned = false;
    for sig in note.signatures() {
        if let Ok(ts) = verify_cosignature(&wit, note.text(), sig) {
            assert!(
                ts <= i64::MAX as u64,
                "cosignature timestamp beyond 2^63-1 accepted"
            );
            cosigned = true;
        }
    }
    if let Ok(o) = opened {
        assert_eq!(o.checkpoint.origin, ORIGIN);
        // A cosignature open_checkpoint counted verifies on its own too.
        if o.cosignatures().next().is_some() {
            assert!(
                cosigned,
                "open_checkpoint accepted a cosignature verify_cosignature refuses"
            );
        }
    }
}
