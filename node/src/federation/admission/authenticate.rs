//! Phase 1: who sent the envelope (see the module doc of [`super`]). Every refusal is recorded
//! in the refusal ring and answered with its code.

use crate::federation::FedContext;
use crate::federation::codes;
use crate::federation::error::FedError;
use crate::federation::peers::Peer;
use crate::federation::refusals::refuse;
use accord_proto::pb::federation::v1::{Envelope, Signed};
use accord_proto::signing::ENVELOPE_PAYLOAD_TYPE;
use prost::Message;
use rustls::pki_types::CertificateDer;
use std::sync::Arc;

/// Authenticates `env` (sent over a TLS connection with client `chain`) at `now`.
pub(super) fn envelope(
    cx: &FedContext,
    env: &Signed,
    chain: Option<&[CertificateDer<'_>]>,
    now: i64,
) -> Result<(Arc<Peer>, Envelope), FedError> {
    if env.payload_type != ENVELOPE_PAYLOAD_TYPE {
        return Err(refuse(
            cx,
            "",
            codes::MALFORMED,
            format!(
                "envelope payload type {:?} is not {ENVELOPE_PAYLOAD_TYPE:?}",
                env.payload_type.chars().take(64).collect::<String>()
            ),
        ));
    }
    let e = Envelope::decode(env.payload.as_ref()).map_err(|err| {
        refuse(
            cx,
            "",
            codes::MALFORMED,
            format!("envelope does not decode: {err}"),
        )
    })?;
    let Some(peer) = cx.federation.peers.get(&e.sender) else {
        return Err(refuse(
            cx,
            &e.sender,
            codes::UNKNOWN_PEER,
            format!("{:?} is not a peer of {}", e.sender, cx.name()),
        ));
    };
    if !peer.enabled() {
        return Err(refuse(
            cx,
            &e.sender,
            codes::PEER_DISABLED,
            format!("peer {:?} is disabled", e.sender),
        ));
    }
    if !chain.is_some_and(|c| peer.tls_identity_matches(c)) {
        return Err(refuse(
            cx,
            &e.sender,
            codes::WRONG_TLS_IDENTITY,
            format!(
                "the TLS client certificate is not the identity configured for {:?}",
                e.sender
            ),
        ));
    }
    if e.receiver != cx.name() {
        return Err(refuse(
            cx,
            &e.sender,
            codes::WRONG_RECEIVER,
            format!("envelope is for {:?}, this is {:?}", e.receiver, cx.name()),
        ));
    }
    // Only the peer's node key signs envelopes (issue 8): a party key speaks for its party's
    // records, never for the node.
    if let Some((i, s)) = env
        .signatures
        .iter()
        .enumerate()
        .find(|(_, s)| peer.is_party_key_name(&s.key_name))
    {
        return Err(refuse(
            cx,
            &e.sender,
            codes::NOT_NODE_KEY,
            format!(
                "envelope signatures[{i}]: party key {:?}; only the node key signs envelopes",
                s.key_name.chars().take(128).collect::<String>()
            ),
        ));
    }
    if let Err(r) = peer.verify(ENVELOPE_PAYLOAD_TYPE, &env.payload, &env.signatures, now) {
        return Err(refuse(
            cx,
            &e.sender,
            r.code,
            format!("envelope: {}", r.detail),
        ));
    }
    Ok((peer, e))
}
