//! `accord.work.v1.WorkService`: submit, declare, read records and derived state. Every read
//! needs a credential ([`crate::auth::Caller`]) and shows only what the caller may see
//! ([`super::visibility`]).

use super::visibility::{Visibility, commitment_not_found, record_not_found};
use crate::auth::Caller;
use crate::error::Error;
use crate::node::Node;
use accord_proto::pb::work::v1 as pb;
use accord_proto::pb::work::v1::work_service_server::{WorkService, WorkServiceServer};
use accord_proto::signing::{self, RECORD_PAYLOAD_TYPE, RecordId};
use futures::TryStreamExt;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status};

/// The WorkService implementation.
#[derive(Debug, Clone)]
pub struct WorkApi {
    node: Arc<Node>,
    rules: Arc<Visibility>,
    /// Open streams, node-wide and per caller (`limits.list_streams`, `streams_per_party`,
    /// `operator_stream_reserve`); each holds a share.
    streams: Arc<super::quota::Quota>,
    /// Chunk reads of open `ListRecords` streams running at once (see [`super::listing`]).
    readers: Arc<Semaphore>,
    /// Cancelled when the node shuts down: the open watch streams end (graceful shutdown waits
    /// for every open call).
    shutdown: tokio_util::sync::CancellationToken,
    /// Verifies the signatures of concurrent `Submit`/`SubmitBatch` calls together (issue 14).
    verifier: Arc<super::submit::BatchVerifier>,
}

/// The service, whose watch streams end when `shutdown` is cancelled.
pub fn server_until(
    node: Arc<Node>,
    shutdown: tokio_util::sync::CancellationToken,
) -> WorkServiceServer<WorkApi> {
    let rules = Arc::new(Visibility::new(&node.config));
    let (total, per_party, reserve) = node.config.limits.streams();
    let streams = super::quota::Quota::new(super::quota::Limits {
        total,
        per_party,
        reserve,
    });
    // Up to two full batches per verification: large enough to amortise, small enough that a
    // verifier thread answers within a millisecond or so.
    let verifier = super::submit::BatchVerifier::per_core(2 * node.config.limits.max_batch_records)
        .expect("start the signature verifier threads");
    verifier.observe(node.metrics.clone());
    WorkServiceServer::new(WorkApi {
        node,
        rules,
        streams,
        readers: Arc::new(Semaphore::new(super::listing::readers())),
        shutdown,
        verifier: Arc::new(verifier),
    })
    .max_decoding_message_size(4 * 1024 * 1024)
}

/// Parses a 32-byte record id field.
pub fn record_id_field(field: &str, b: &[u8]) -> Result<RecordId, Error> {
    b.try_into()
        .map_err(|_| Error::invalid(field, format!("must be 32 bytes, got {}", b.len())))
}

impl WorkApi {
    /// Authenticates a read (every read needs a credential) and notes who in the span.
    fn caller<T>(&self, req: &Request<T>) -> Result<Caller, Error> {
        let caller = self.node.tokens.caller(req)?;
        let who = match &caller {
            Caller::Operator => "operator".to_string(),
            Caller::Party(p) => format!("party:{p}"),
        };
        tracing::Span::current().record("caller", who);
        Ok(caller)
    }

    /// A share for one more open stream of `caller`'s (`limits.list_streams`,
    /// `streams_per_party`, `operator_stream_reserve`, shared by every stream call).
    fn stream_permit(&self, caller: &Caller, call: &str) -> Result<super::quota::Share, Error> {
        self.streams.take(caller, call)
    }
}

type Stream<T> = Pin<Box<dyn futures::Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl WorkService for WorkApi {
    #[tracing::instrument(skip_all, fields(record_id))]
    async fn submit(
        &self,
        req: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        let signed = req
            .into_inner()
            .record
            .ok_or_else(|| Error::invalid("record", "required"))?;
        Ok(Response::new(
            super::submit::submit_one(&self.node, &self.verifier, signed).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(records))]
    async fn submit_batch(
        &self,
        req: Request<pb::SubmitBatchRequest>,
    ) -> Result<Response<pb::SubmitBatchResponse>, Status> {
        let records = req.into_inner().records;
        tracing::Span::current().record("records", records.len());
        Ok(Response::new(
            super::submit::submit_batch(&self.node, &self.verifier, records).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(party, record_id))]
    async fn declare(
        &self,
        req: Request<pb::DeclareRequest>,
    ) -> Result<Response<pb::DeclareResponse>, Status> {
        let party = self.node.tokens.party(&req)?;
        tracing::Span::current().record("party", &party);
        let mut record = req
            .into_inner()
            .record
            .ok_or_else(|| Error::invalid("record", "required"))?;
        let me = accord_proto::pb::record::v1::PartyRef {
            organisation: self.node.name().to_string(),
            name: party,
        };
        match &record.author {
            None => record.author = Some(me),
            Some(a) if *a == me => {}
            Some(a) => {
                return Err(Error::PermissionDenied(format!(
                    "record.author {}/{} is not the authenticated party {}/{}",
                    a.organisation, a.name, me.organisation, me.name
                ))
                .into());
            }
        }
        if record.declared_at_unix_ms == 0 {
            record.declared_at_unix_ms = self.node.clock.now_ms();
        }
        let signed = signing::sign_record(&self.node.signer, &record);
        let id = signing::record_id(&signed.payload_type, &signed.payload);
        tracing::Span::current().record("record_id", hex::encode(id));
        Ok(Response::new(
            super::submit::append(&self.node, signed, record, id)
                .await?
                .into(),
        ))
    }

    #[tracing::instrument(skip_all, fields(caller))]
    async fn get_record(
        &self,
        req: Request<pb::GetRecordRequest>,
    ) -> Result<Response<pb::GetRecordResponse>, Status> {
        let caller = self.caller(&req)?;
        let id = record_id_field("record_id", &req.into_inner().record_id)?;
        let mut entry = match self.node.ledger.get_by_id(&id)? {
            Some(e) if self.rules.entry(&self.node, &caller, &e)? => e,
            _ => return Err(record_not_found(&id).into()),
        };
        settled(&self.node, &mut entry);
        Ok(Response::new(pb::GetRecordResponse { entry: Some(entry) }))
    }

    type ListRecordsStream = Stream<pb::ListRecordsResponse>;

    #[tracing::instrument(skip_all, fields(caller, from = req.get_ref().from_sequence, limit = req.get_ref().limit))]
    async fn list_records(
        &self,
        req: Request<pb::ListRecordsRequest>,
    ) -> Result<Response<Self::ListRecordsStream>, Status> {
        let caller = self.caller(&req)?;
        let permit = self.stream_permit(&caller, "ListRecords")?;
        let pb::ListRecordsRequest {
            from_sequence,
            limit,
        } = req.into_inner();
        let listing = super::listing::Listing {
            node: self.node.clone(),
            rules: self.rules.clone(),
            caller,
            next: from_sequence,
            end: self.node.ledger.len(),
            remaining: if limit == 0 { u64::MAX } else { limit },
            buf: Default::default(),
            handed_out: false,
            readers: self.readers.clone(),
            _permit: permit,
        };
        Ok(Response::new(Box::pin(
            listing.into_stream().map_ok(pb::ListRecordsResponse::from),
        )))
    }

    #[tracing::instrument(skip_all, fields(caller, commitment = %req.get_ref().commitment_id))]
    async fn get_commitment(
        &self,
        req: Request<pb::GetCommitmentRequest>,
    ) -> Result<Response<pb::GetCommitmentResponse>, Status> {
        let caller = self.caller(&req)?;
        let id = req.into_inner().commitment_id;
        if id.is_empty() {
            return Err(Error::invalid("commitment_id", "required").into());
        }
        if !self.rules.commitment(&self.node, &caller, &id)? {
            return Err(commitment_not_found(&id).into());
        }
        let view = self
            .node
            .projection
            .read()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?
            .commitment(&id, self.node.clock.now_ms());
        Ok(Response::new(
            view.ok_or_else(|| commitment_not_found(&id))?,
        ))
    }

    #[tracing::instrument(skip_all, fields(caller))]
    async fn list_commitments(
        &self,
        req: Request<pb::ListCommitmentsRequest>,
    ) -> Result<Response<pb::ListCommitmentsResponse>, Status> {
        let caller = self.caller(&req)?;
        let (node, rules) = (self.node.clone(), self.rules.clone());
        let req = req.into_inner();
        let page = tokio::task::spawn_blocking(move || {
            super::commitments::page(&node, &rules, &caller, &req)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
        Ok(Response::new(page))
    }

    type WatchCommitmentsStream = Stream<pb::WatchCommitmentsResponse>;

    #[tracing::instrument(skip_all, fields(caller))]
    async fn watch_commitments(
        &self,
        req: Request<pb::WatchCommitmentsRequest>,
    ) -> Result<Response<Self::WatchCommitmentsStream>, Status> {
        let caller = self.caller(&req)?;
        let asked = pb::ListCommitmentsRequest::from(req.into_inner());
        let filter = super::commitments::Filter::parse(&self.node, &caller, &asked)?;
        let permit = self.stream_permit(&caller, "WatchCommitments")?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let (node, rules) = (self.node.clone(), self.rules.clone());
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = super::commitments::watch(node, rules, filter, tx) => {}
                _ = shutdown.cancelled() => {}
            }
            drop(permit);
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx).map_ok(Into::into),
        )))
    }

    #[tracing::instrument(skip_all, fields(caller))]
    async fn list_attention(
        &self,
        req: Request<pb::ListAttentionRequest>,
    ) -> Result<Response<pb::ListAttentionResponse>, Status> {
        let caller = self.caller(&req)?;
        Ok(Response::new(super::attention::page(
            &self.node,
            &caller,
            req.get_ref(),
        )?))
    }

    type WatchAttentionStream = Stream<pb::WatchAttentionResponse>;

    #[tracing::instrument(skip_all, fields(caller))]
    async fn watch_attention(
        &self,
        req: Request<pb::WatchAttentionRequest>,
    ) -> Result<Response<Self::WatchAttentionStream>, Status> {
        let caller = self.caller(&req)?;
        let req = req.into_inner();
        let who = super::attention::whose(&self.node, &caller, &req.party)?;
        let permit = self.stream_permit(&caller, "WatchAttention")?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let node = self.node.clone();
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = super::attention::watch(node, who, req.from_sequence, tx) => {}
                _ = shutdown.cancelled() => {}
            }
            drop(permit);
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx).map_ok(Into::into),
        )))
    }

    #[tracing::instrument(skip_all, fields(caller))]
    async fn get_durability(
        &self,
        req: Request<pb::GetDurabilityRequest>,
    ) -> Result<Response<pb::GetDurabilityResponse>, Status> {
        let caller = self.caller(&req)?;
        let id = record_id_field("record_id", &req.into_inner().record_id)?;
        // Looked up before the ledger: a record whose write completes in between is found there.
        let received = self.node.received.get(&id);
        let store = self.node.ledger.store();
        let (seq, entry) = match store.seq_of(&id)? {
            Some(seq) => match store.get(seq)? {
                Some(e) if self.rules.entry(&self.node, &caller, &e)? => (seq, e),
                _ => return Err(record_not_found(&id).into()),
            },
            None => {
                // Past the door, not yet synced: `received`, and nothing more to say.
                let Some(payload) = received else {
                    return Err(record_not_found(&id).into());
                };
                let e = pb::LedgerEntry {
                    record: Some(accord_proto::pb::record::v1::SignedRecord {
                        payload_type: RECORD_PAYLOAD_TYPE.into(),
                        payload,
                        signatures: Vec::new(),
                    }),
                    ..Default::default()
                };
                if !self.rules.entry(&self.node, &caller, &e)? {
                    return Err(record_not_found(&id).into());
                }
                return Ok(Response::new(pb::GetDurabilityResponse {
                    durability: pb::Durability::Received as i32,
                    local: pb::Durability::Received as i32,
                    ..Default::default()
                }));
            }
        };
        // Durability is derived, never stored per record: the checkpoints say how far it got.
        let witnessed = self.node.log.witnessed().filter(|c| seq < c.size);
        let latest = self.node.log.latest().filter(|c| seq < c.size);
        let (local, cp) = match (witnessed, latest) {
            (Some(w), _) => (pb::Durability::Witnessed, Some(w)),
            (None, Some(l)) => (pb::Durability::Included, Some(l)),
            (None, None) => (pb::Durability::Recorded, None),
        };
        let mut resp = pb::GetDurabilityResponse {
            local: local as i32,
            sequence: seq,
            ..Default::default()
        };
        if let Some(cp) = cp {
            let size = cp.size;
            let node = self.node.clone();
            let proof = tokio::task::spawn_blocking(move || {
                crate::log::inclusion_proof(node.ledger.store(), seq, size)
            })
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
            resp.checkpoint = cp.note;
            resp.inclusion_proof = proof.into_iter().map(|h| h.to_vec().into()).collect();
        }
        // Federation: each peer's own state and decision (from the peers' receipts), and the
        // peers the record goes to that have not answered yet; acted upon (from the projection).
        resp.peers = self.node.federation.receipts.peer_durability(&id)?;
        resp.awaiting = crate::federation::route::destinations(&self.node.fed, &entry)
            .into_iter()
            .filter(|org| !resp.peers.iter().any(|p| &p.peer == org))
            .collect();
        resp.acted_upon_by = self
            .node
            .projection
            .read()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?
            .acted_upon(&id)
            .iter()
            .map(|a| a.to_vec().into())
            .collect();
        resp.durability = summary(
            local,
            &resp.peers,
            resp.awaiting.len(),
            !resp.acted_upon_by.is_empty(),
        ) as i32;
        Ok(Response::new(resp))
    }
}

/// `GetDurabilityResponse.durability` (work.proto states the rule): what the record's author
/// needs to know first. A rejection anywhere, then a quarantine anywhere; otherwise the progress
/// every peer the record goes to shares (nothing from a peer that has not answered, `federated`
/// while a peer has not decided, `admitted` once all admitted); acted upon only on top of that.
pub(crate) fn summary(
    local: pb::Durability,
    peers: &[pb::PeerDurability],
    awaiting: usize,
    acted_upon: bool,
) -> pb::Durability {
    use pb::Durability as D;
    let any = |d: D| peers.iter().any(|p| p.durability == d as i32);
    let done = |settled: D| if acted_upon { D::ActedUpon } else { settled };
    if any(D::Rejected) {
        D::Rejected
    } else if any(D::Quarantined) {
        D::Quarantined
    } else if peers.is_empty() && awaiting == 0 {
        done(local)
    } else if awaiting > 0 {
        local
    } else if peers.iter().all(|p| p.durability == D::Admitted as i32) {
        done(D::Admitted)
    } else {
        D::Federated
    }
}

#[cfg(test)]
mod summary_tests {
    use super::summary;
    use accord_proto::pb::work::v1::{Durability as D, PeerDurability};

    fn at(peer: &str, d: D) -> PeerDurability {
        PeerDurability {
            peer: peer.into(),
            durability: d as i32,
            ..Default::default()
        }
    }

    /// Seed 000, "Durability states", summed up for the author: never the numeric maximum.
    #[test]
    fn the_summary_rule() {
        let w = D::Witnessed;
        // No peer: this node's progress, or acted upon.
        assert_eq!(summary(w, &[], 0, false), D::Witnessed);
        assert_eq!(summary(D::Recorded, &[], 0, true), D::ActedUpon);
        // A peer not answered yet: the progress all share is this node's.
        assert_eq!(summary(w, &[at("a", D::Admitted)], 1, false), D::Witnessed);
        assert_eq!(summary(w, &[], 1, true), D::Witnessed);
        // One undecided peer holds the others' admission back.
        let mixed = [at("a", D::Admitted), at("b", D::Federated)];
        assert_eq!(summary(w, &mixed, 0, true), D::Federated);
        // Every peer admitted.
        let all = [at("a", D::Admitted), at("b", D::Admitted)];
        assert_eq!(summary(w, &all, 0, false), D::Admitted);
        assert_eq!(summary(w, &all, 0, true), D::ActedUpon);
        // A rejection anywhere is the summary, whatever else happened (the maximum said acted
        // upon); a quarantine anywhere, when none rejected.
        let rejected = [at("a", D::Admitted), at("b", D::Rejected)];
        assert_eq!(summary(w, &rejected, 1, true), D::Rejected);
        let quarantined = [at("a", D::Quarantined), at("b", D::Admitted)];
        assert_eq!(summary(w, &quarantined, 0, true), D::Quarantined);
        let both = [at("a", D::Quarantined), at("b", D::Rejected)];
        assert_eq!(summary(w, &both, 0, false), D::Rejected);
    }
}

#[cfg(test)]
mod received_tests {
    use super::*;
    use crate::clock::Clock;
    use accord_proto::pb::record::v1 as rec;

    fn with_token<T>(t: T, token: &str) -> Request<T> {
        let mut r = Request::new(t);
        r.metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
        r
    }

    /// Seed 000, "Durability states": `received` — "The request was validated; no durability
    /// promise; not kept, only in the response". A record past the door whose synced write is
    /// still under way reads `received`, to its author and the operator only as the record
    /// itself would be; once in the ledger it reads `recorded` (or further), and nothing of
    /// `received` remains.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn received_while_the_write_is_under_way() {
        let tmp = tempfile::tempdir().unwrap();
        let made = crate::init::init(&crate::init::InitOptions {
            dir: tmp.path().join("acme"),
            name: "acme".into(),
            parties: vec!["alice".into(), "bob".into(), "carol".into()],
            listen: "127.0.0.1:0".into(),
            sans: vec![],
        })
        .unwrap();
        let config = crate::config::Config::load(&made.config).unwrap();
        let (clock, _manual) = Clock::manual(1_000);
        let node = crate::node::open(config, clock).await.unwrap().node;
        let api = WorkApi {
            node: node.clone(),
            rules: Arc::new(Visibility::new(&node.config)),
            streams: super::super::quota::Quota::new(super::super::quota::Limits {
                total: 1,
                per_party: 1,
                reserve: 0,
            }),
            readers: Arc::new(Semaphore::new(1)),
            shutdown: Default::default(),
            verifier: Arc::new(super::super::submit::BatchVerifier::per_core(16).unwrap()),
        };
        let token = |p: &str| {
            made.parties
                .iter()
                .find(|(n, _, _)| n == p)
                .map(|(_, _, t)| t.clone())
                .unwrap()
        };
        let r = crate::projection::tests::request("c-received");
        let a = crate::projection::tests::append_of(&node.signer, &r);
        let author = prost::Message::decode(a.signed.payload.as_ref())
            .map(|r: rec::Record| r.author.unwrap().name)
            .unwrap();
        assert_eq!(author, "alice");
        let rid = a.id;
        let ask = |token: String| {
            let api = api.clone();
            let id = rid;
            async move {
                api.get_durability(with_token(
                    pb::GetDurabilityRequest {
                        record_id: id.to_vec().into(),
                    },
                    &token,
                ))
                .await
            }
        };
        // Not received yet: unknown.
        let e = ask(made.admin_token.clone()).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound);

        let held = node.received.hold([(a.id, a.signed.payload.clone())]);
        let d = ask(made.admin_token.clone()).await.unwrap().into_inner();
        assert_eq!(
            (d.durability(), d.local(), d.sequence, d.peers.len()),
            (pb::Durability::Received, pb::Durability::Received, 0, 0)
        );
        let d = ask(token(&author)).await.unwrap().into_inner();
        assert_eq!(d.durability(), pb::Durability::Received);
        let e = ask(token("carol")).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "as hidden as the record");

        // Synced: recorded, whether or not the hold is still there.
        let id = a.id;
        node.ledger.append(a).await.unwrap();
        let d = ask(made.admin_token.clone()).await.unwrap().into_inner();
        assert_eq!(d.local(), pb::Durability::Recorded);
        drop(held);
        assert_eq!(node.received.get(&id), None);
        let d = ask(made.admin_token.clone()).await.unwrap().into_inner();
        assert_eq!(d.local(), pb::Durability::Recorded);
    }
}

/// A record recorded `awaiting_sequence` (issue 26: its commitment's home orders it) shows the
/// outcome the home's decision gave it here, once that arrived: its entry in its commitment's
/// history, which the decision rewrote. The ledger entry itself is never rewritten.
fn settled(node: &Node, entry: &mut pb::LedgerEntry) {
    use accord_proto::pb::record::v1::Record;
    use prost::Message;
    if entry.outcome.as_ref().map(|o| o.rejection_code.as_str())
        != Some(crate::projection::AWAITING_SEQUENCE)
    {
        return;
    }
    let Some(r) = entry
        .record
        .as_ref()
        .and_then(|s| Record::decode(s.payload.as_ref()).ok())
    else {
        return;
    };
    let Ok(p) = node.projection.read() else {
        return;
    };
    if let Some(h) = p
        .history(&r.commitment_id)
        .into_iter()
        .rev()
        .find(|h| h.record_id == entry.record_id)
    {
        entry.outcome = h.outcome;
    }
}
