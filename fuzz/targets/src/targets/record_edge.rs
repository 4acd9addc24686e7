//! The node's edge for a submitted record (`services/work.rs` `verify_local`, federation
//! `inbox::check`): payload type, protobuf decoding, identifier bounds and the conversion into
//! the kernel's form (`convert::record_from_pb`), whose errors name the offending field.

use accord_node::fuzzing as convert;
use accord_proto::declaration;
use accord_proto::pb::record::v1::{Record, SignedRecord};
use accord_proto::signing::{RECORD_PAYLOAD_TYPE, record_id};
use prost::Message;

/// One execution: panics when a property fails.
pub fn run(data: &[u8]) {
    // Either a whole SignedRecord or a bare Record payload: the fuzzer reaches both.
    let (payload, payload_type) = match SignedRecord::decode(data) {
        Ok(s) if declaration::check_payload_type(&s.payload_type).is_ok() => {
            (s.payload.to_vec(), s.payload_type)
        }
        _ => (data.to_vec(), RECORD_PAYLOAD_TYPE.to_owned()),
    };
    let Ok(record) = Record::decode(payload.as_slice()) else {
        return;
    };
    // A typed payload type names the record's own operation, or the edge refuses it.
    if declaration::check_matches(&payload_type, &record).is_err() {
        assert_ne!(
            payload_type, RECORD_PAYLOAD_TYPE,
            "the generic type goes with any operation"
        );
        return;
    }
    let id = record_id(&payload_type, &payload);
    match convert::record_from_pb(id, &record) {
        Ok(k) => {
            // What the edge accepts, replay accepts too, to the same kernel record.
            let again = convert::record_from_pb_recorded(id, &record).expect("replay converts");
            assert_eq!(format!("{k:?}"), format!("{again:?}"));
            assert_eq!(
                k.author.organisation,
                record.author.as_ref().unwrap().organisation
            );
        }
        Err(e) => {
            // A refusal is InvalidArgument naming a field, and never echoes a large input.
            let msg = e.to_string();
            assert!(msg.len() < 4096, "error message of {} bytes", msg.len());
            let status = tonic::Status::from(e);
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{msg}");
        }
    }
}
