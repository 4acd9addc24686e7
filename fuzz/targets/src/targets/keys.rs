//! Key text: vkeys, note signer skeys, cosigner skeys and single signature lines.

use accord_proto::checkpoint::Cosigner;
use accord_proto::note::{NoteSignature, Signer, Verifier};

/// One execution: panics when a property fails.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(v) = Verifier::from_vkey(text) {
        let again = Verifier::from_vkey(&v.to_vkey()).expect("a vkey we wrote parses");
        assert_eq!((again.name(), again.key_id()), (v.name(), v.key_id()));
        assert_eq!(again.kind(), v.kind());
    }
    if let Ok(s) = Signer::from_skey(text) {
        let again = Signer::from_skey(&s.to_skey()).expect("an skey we wrote parses");
        assert_eq!(again.verifier().to_vkey(), s.verifier().to_vkey());
        // The parsed key signs and its verifier accepts it.
        let sig = s.sign(b"fuzz");
        assert!(s.verifier().verify(b"fuzz", &sig));
    }
    if let Ok(c) = Cosigner::from_skey(text) {
        let again = Cosigner::from_skey(&c.to_skey()).expect("a cosigner skey we wrote parses");
        assert_eq!(again.verifier().to_vkey(), c.verifier().to_vkey());
    }
    if let Ok(line) = NoteSignature::parse_line(text) {
        let again = NoteSignature::parse_line(line.to_line().trim_end_matches('\n'))
            .expect("a line we wrote parses");
        assert_eq!(again, line);
    }
}
