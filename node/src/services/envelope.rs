//! `accord.envelope.v1.EnvelopeService` (seed 003; issue 13 item 8): start an envelope as the
//! authenticated party, read one (phase, votes, event history, this node's accounts it
//! touches), list them by age, and take an external scheduler's tick (operator only).
//!
//! Visibility: the operator, and the parties of an organisation that coordinates or takes part
//! in the envelope; any other caller gets NOT_FOUND, as for an unknown envelope.

use crate::auth::Caller;
use crate::convert::envelope as conv;
use crate::envelopes::Envelopes;
use crate::error::Error;
use crate::node::Node;
use accord_kernel::envelope as ke;
use accord_proto::pb::envelope::v1 as pb;
use accord_proto::pb::envelope::v1::envelope_service_server::{
    EnvelopeService, EnvelopeServiceServer,
};
use accord_proto::pb::record::v1 as rpb;
use accord_proto::signing;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The EnvelopeService implementation.
#[derive(Debug, Clone)]
pub struct EnvelopeApi {
    node: Arc<Node>,
}

/// The service, ready to add to a tonic server.
pub fn server(node: Arc<Node>) -> EnvelopeServiceServer<EnvelopeApi> {
    EnvelopeServiceServer::new(EnvelopeApi { node }).max_decoding_message_size(1024 * 1024)
}

fn not_found(id: &str) -> Error {
    Error::NotFound(format!("envelope {}", crate::ident::quote(id)))
}

fn poisoned() -> Error {
    Error::Internal("projection lock poisoned".into())
}

/// Whether `caller` may read `env` here.
fn visible(envs: &Envelopes, caller: &Caller, env: &ke::Envelope) -> bool {
    match caller {
        Caller::Operator => true,
        Caller::Party(_) => {
            envs.coordinates(env) || env.participants.iter().any(|p| p.participant == envs.org())
        }
    }
}

fn role(envs: &Envelopes, env: &ke::Envelope) -> String {
    if envs.coordinates(env) {
        "coordinator".into()
    } else {
        "participant".into()
    }
}

/// The wire view of one envelope.
pub fn view(envs: &Envelopes, env: &ke::Envelope) -> pb::Envelope {
    let book = envs.book();
    let accounts = env
        .changes_of(envs.org())
        .iter()
        .filter(|c| c.is_budget())
        .filter_map(|c| {
            book.accounts.get(c.account()).map(|a| pb::Account {
                account: c.account().to_string(),
                balance: a.counter("budget"),
                reserved: a.counter(ke::DEFAULT_RESERVE),
                pending: a.list("pending").to_vec(),
                counters: a.counters.clone().into_iter().collect(),
                lists: a
                    .lists
                    .iter()
                    .map(|(field, items)| pb::AccountList {
                        field: field.clone(),
                        items: items.clone(),
                    })
                    .collect(),
            })
        })
        .collect();
    pb::Envelope {
        envelope: env.id.clone(),
        envelope_type: env.envelope_type.clone(),
        coordinator: env.coordinator.to_string(),
        participants: conv::participants_to_pb(&env.participants),
        phase: env.phase.wire_name().to_string(),
        role: role(envs, env),
        started_at_unix_ms: env.start.at,
        updated_at_unix_ms: env.updated_at,
        votes: env
            .votes
            .iter()
            .map(|(o, (v, _))| {
                let v = match v {
                    ke::Vote::Ack => "ACK",
                    ke::Vote::Nack => "NACK",
                };
                (o.clone(), v.to_string())
            })
            .collect(),
        abort_cause: match env.abort_cause {
            Some(ke::AbortCause::Nack) => "NACK".into(),
            Some(ke::AbortCause::Timeout) => "TIMEOUT".into(),
            None => String::new(),
        },
        history: envs
            .history(&env.id)
            .iter()
            .map(|e| pb::EnvelopeEvent {
                record_id: e.record.to_vec().into(),
                step: e.step.to_string(),
                event: e.event.clone(),
                author: e.author.to_string(),
                at_unix_ms: e.at,
                phase: e.phase.wire_name().to_string(),
            })
            .collect(),
        accounts,
    }
}

impl EnvelopeApi {
    async fn start(&self, req: Request<pb::StartRequest>) -> Result<pb::StartResponse, Error> {
        let party = self.node.tokens.party(&req)?;
        tracing::Span::current().record("party", &party);
        let r = req.into_inner();
        let id = if r.envelope.is_empty() {
            format!("env-{}", hex::encode(rand::random::<[u8; 8]>()))
        } else {
            crate::ident::id(&r.envelope).map_err(|e| Error::invalid("envelope", e))?;
            r.envelope
        };
        tracing::Span::current().record("envelope", &id);
        crate::ident::id(&r.envelope_type).map_err(|e| Error::invalid("envelope_type", e))?;
        {
            let p = self.node.projection.read().map_err(|_| poisoned())?;
            if !p.envelopes.types().contains_key(&r.envelope_type) {
                return Err(Error::invalid(
                    "envelope_type",
                    format!(
                        "unknown_envelope_type: {} is not declared",
                        crate::ident::quote(&r.envelope_type)
                    ),
                ));
            }
            if p.envelopes.get(&id).is_some() {
                return Err(Error::invalid(
                    "envelope",
                    format!("envelope_exists: {}", crate::ident::quote(&id)),
                ));
            }
        }
        if r.participants.is_empty() {
            return Err(Error::invalid("participants", "must not be empty"));
        }
        let participants = conv::participants("participants", &r.participants)?;
        let record = rpb::Record {
            author: Some(rpb::PartyRef {
                organisation: self.node.name().to_string(),
                name: party,
            }),
            declared_at_unix_ms: self.node.clock.now_ms(),
            commitment_id: id.clone(),
            basis: Vec::new(),
            items: Vec::new(),
            nonce: Default::default(),
            operation: Some(conv::envelope_op(&ke::EnvelopeOperation {
                envelope: id.clone(),
                event: String::new(),
                step: ke::EnvelopeStep::Start(ke::EnvelopeStart {
                    envelope_type: r.envelope_type,
                    participants,
                }),
            })),
        };
        let signed = signing::sign_record(&self.node.signer, &record);
        let rid = signing::record_id(&signed.payload_type, &signed.payload);
        let resp = super::submit::append(&self.node, signed, record, rid).await?;
        let outcome = resp.outcome.unwrap_or_default();
        if !outcome.applied {
            return Err(Error::FailedPrecondition(format!(
                "{}: {}",
                outcome.rejection_code,
                outcome
                    .rejection_detail
                    .chars()
                    .take(256)
                    .collect::<String>()
            )));
        }
        // The phase the start put the envelope in (the API's "PENDING once the start
        // applied"), not the phase now: the envelope driver may already have moved it on, and
        // an answer that depended on that race said PREPARING to some callers.
        Ok(pb::StartResponse {
            envelope: id,
            record_id: rid.to_vec().into(),
            phase: ke::Phase::Pending.wire_name().to_string(),
        })
    }

    fn get(&self, req: &Request<pb::GetRequest>) -> Result<pb::GetResponse, Error> {
        let caller = self.node.tokens.caller(req)?;
        let id = &req.get_ref().envelope;
        crate::ident::id(id).map_err(|e| Error::invalid("envelope", e))?;
        let p = self.node.projection.read().map_err(|_| poisoned())?;
        let envs = &p.envelopes;
        match envs.get(id) {
            Some(env) if visible(envs, &caller, env) => Ok(pb::GetResponse {
                envelope: Some(view(envs, env)),
            }),
            _ => Err(not_found(id)),
        }
    }

    fn list(&self, req: &Request<pb::ListRequest>) -> Result<pb::ListResponse, Error> {
        let caller = self.node.tokens.caller(req)?;
        let r = req.get_ref();
        let limit = match r.limit {
            0 => 100,
            n => n.min(1000) as usize,
        };
        let now = self.node.clock.now_ms();
        let p = self.node.projection.read().map_err(|_| poisoned())?;
        let envs = &p.envelopes;
        let mut list: Vec<&ke::Envelope> = envs
            .all()
            .filter(|e| r.include_closed || !e.phase.is_terminal())
            .filter(|e| visible(envs, &caller, e))
            .collect();
        // Open first, then oldest first (the ones most likely stuck).
        list.sort_by_key(|e| (e.phase.is_terminal(), e.start.at, e.id.clone()));
        Ok(pb::ListResponse {
            envelopes: list
                .into_iter()
                .take(limit)
                .map(|e| pb::EnvelopeSummary {
                    envelope: e.id.clone(),
                    envelope_type: e.envelope_type.clone(),
                    phase: e.phase.wire_name().to_string(),
                    role: role(envs, e),
                    coordinator: e.coordinator.to_string(),
                    started_at_unix_ms: e.start.at,
                    age_ms: e.age(now),
                })
                .collect(),
        })
    }
}

#[tonic::async_trait]
impl EnvelopeService for EnvelopeApi {
    #[tracing::instrument(skip_all, fields(party, envelope))]
    async fn start(
        &self,
        req: Request<pb::StartRequest>,
    ) -> Result<Response<pb::StartResponse>, Status> {
        Ok(Response::new(EnvelopeApi::start(self, req).await?))
    }

    #[tracing::instrument(skip_all, fields(envelope = %req.get_ref().envelope.chars().take(64).collect::<String>()))]
    async fn get(&self, req: Request<pb::GetRequest>) -> Result<Response<pb::GetResponse>, Status> {
        Ok(Response::new(EnvelopeApi::get(self, &req)?))
    }

    #[tracing::instrument(skip_all)]
    async fn list(
        &self,
        req: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        Ok(Response::new(EnvelopeApi::list(self, &req)?))
    }

    #[tracing::instrument(skip_all)]
    async fn submit_tick(
        &self,
        req: Request<pb::SubmitTickRequest>,
    ) -> Result<Response<pb::SubmitTickResponse>, Status> {
        self.node.tokens.admin(&req)?;
        let r = req.into_inner();
        let done =
            crate::envelope_driver::tick(&self.node.envelope_driver(), &r.tick_id, r.instant_time)
                .await?;
        Ok(Response::new(match done {
            Some((id, checked)) => pb::SubmitTickResponse {
                record_id: id.to_vec().into(),
                checked,
            },
            None => pb::SubmitTickResponse::default(),
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn list_holds(
        &self,
        req: Request<pb::ListHoldsRequest>,
    ) -> Result<Response<pb::ListHoldsResponse>, Status> {
        self.node.tokens.admin(&req)?;
        let p = self.node.projection.read().map_err(|_| poisoned())?;
        let envs = &p.envelopes;
        let holds = envs
            .holds()
            .map(|(commitment, id)| {
                let env = envs.get(id);
                pb::Hold {
                    commitment: commitment.to_string(),
                    envelope: id.to_string(),
                    phase: env
                        .map(|e| e.phase.wire_name().to_string())
                        .unwrap_or_default(),
                    role: env.map(|e| role(envs, e)).unwrap_or_default(),
                    lapses_at_unix_ms: env
                        .filter(|e| !e.phase.is_terminal())
                        .and_then(|e| e.preparing_since)
                        .zip(env.map(|e| e.abort_after_ms))
                        .map_or(0, |(s, t)| s.saturating_add(t)),
                }
            })
            .collect();
        Ok(Response::new(pb::ListHoldsResponse { holds }))
    }

    #[tracing::instrument(skip_all, fields(envelope = %req.get_ref().envelope.chars().take(64).collect::<String>()))]
    async fn release_hold(
        &self,
        req: Request<pb::ReleaseHoldRequest>,
    ) -> Result<Response<pb::ReleaseHoldResponse>, Status> {
        self.node.tokens.admin(&req)?;
        let id = req.into_inner().envelope;
        crate::ident::id(&id).map_err(|e| Error::invalid("envelope", e))?;
        match crate::envelope_driver::release(&self.node.envelope_driver(), &id).await? {
            Some((rid, _)) => Ok(Response::new(pb::ReleaseHoldResponse {
                record_id: rid.to_vec().into(),
            })),
            None => Err(Error::NotFound(format!(
                "no hold of envelope {} here",
                crate::ident::quote(&id)
            ))
            .into()),
        }
    }
}
