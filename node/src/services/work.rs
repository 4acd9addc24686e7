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
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tonic::{Request, Response, Status};

/// The WorkService implementation.
#[derive(Debug, Clone)]
pub struct WorkApi {
    node: Arc<Node>,
    rules: Arc<Visibility>,
    /// Open `ListRecords` streams, node-wide (`limits.list_streams`); each holds a permit.
    streams: Arc<Semaphore>,
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
    let streams = Arc::new(Semaphore::new(node.config.limits.list_streams));
    // Up to two full batches per verification: large enough to amortise, small enough that a
    // verifier thread answers within a millisecond or so.
    let verifier = super::submit::BatchVerifier::per_core(2 * node.config.limits.max_batch_records)
        .expect("start the signature verifier threads");
    verifier.observe(node.metrics.clone());
    WorkServiceServer::new(WorkApi {
        node,
        rules,
        streams,
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

    /// A permit for one more open stream (`limits.list_streams`, shared by every stream call).
    fn stream_permit(&self, call: &str) -> Result<tokio::sync::OwnedSemaphorePermit, Error> {
        self.streams.clone().try_acquire_owned().map_err(|_| {
            Error::ResourceExhausted(format!(
                "{} streams are open (limits.list_streams); {call} refused, retry later",
                self.node.config.limits.list_streams
            ))
        })
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
    ) -> Result<Response<pb::SubmitResponse>, Status> {
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
        let id = signing::record_id(RECORD_PAYLOAD_TYPE, &signed.payload);
        tracing::Span::current().record("record_id", hex::encode(id));
        Ok(Response::new(
            super::submit::append(&self.node, signed, record, id).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(caller))]
    async fn get_record(
        &self,
        req: Request<pb::GetRecordRequest>,
    ) -> Result<Response<pb::GetRecordResponse>, Status> {
        let caller = self.caller(&req)?;
        let id = record_id_field("record_id", &req.into_inner().record_id)?;
        let entry = match self.node.ledger.get_by_id(&id)? {
            Some(e) if self.rules.entry(&self.node, &caller, &e)? => e,
            _ => return Err(record_not_found(&id).into()),
        };
        Ok(Response::new(pb::GetRecordResponse { entry: Some(entry) }))
    }

    type ListRecordsStream = Stream<pb::LedgerEntry>;

    #[tracing::instrument(skip_all, fields(caller, from = req.get_ref().from_sequence, limit = req.get_ref().limit))]
    async fn list_records(
        &self,
        req: Request<pb::ListRecordsRequest>,
    ) -> Result<Response<Self::ListRecordsStream>, Status> {
        let caller = self.caller(&req)?;
        let permit = self.stream_permit("ListRecords")?;
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
            _permit: permit,
        };
        Ok(Response::new(Box::pin(listing.into_stream())))
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

    type WatchCommitmentsStream = Stream<pb::CommitmentSummary>;

    #[tracing::instrument(skip_all, fields(caller))]
    async fn watch_commitments(
        &self,
        req: Request<pb::ListCommitmentsRequest>,
    ) -> Result<Response<Self::WatchCommitmentsStream>, Status> {
        let caller = self.caller(&req)?;
        let filter = super::commitments::Filter::parse(&self.node, &caller, req.get_ref())?;
        let permit = self.stream_permit("WatchCommitments")?;
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
            tokio_stream::wrappers::ReceiverStream::new(rx),
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

    type WatchAttentionStream = Stream<pb::AttentionItem>;

    #[tracing::instrument(skip_all, fields(caller))]
    async fn watch_attention(
        &self,
        req: Request<pb::WatchAttentionRequest>,
    ) -> Result<Response<Self::WatchAttentionStream>, Status> {
        let caller = self.caller(&req)?;
        let req = req.into_inner();
        let who = super::attention::whose(&self.node, &caller, &req.party)?;
        let permit = self.stream_permit("WatchAttention")?;
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
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    #[tracing::instrument(skip_all, fields(caller))]
    async fn get_durability(
        &self,
        req: Request<pb::GetDurabilityRequest>,
    ) -> Result<Response<pb::GetDurabilityResponse>, Status> {
        let caller = self.caller(&req)?;
        let id = record_id_field("record_id", &req.into_inner().record_id)?;
        let store = self.node.ledger.store();
        let seq = match store.seq_of(&id)? {
            Some(seq) => match store.get(seq)? {
                Some(e) if self.rules.entry(&self.node, &caller, &e)? => seq,
                _ => return Err(record_not_found(&id).into()),
            },
            None => return Err(record_not_found(&id).into()),
        };
        // Durability is derived, never stored per record: the checkpoints say how far it got.
        let witnessed = self.node.log.witnessed().filter(|c| seq < c.size);
        let latest = self.node.log.latest().filter(|c| seq < c.size);
        let (durability, cp) = match (witnessed, latest) {
            (Some(w), _) => (pb::Durability::Witnessed, Some(w)),
            (None, Some(l)) => (pb::Durability::Included, Some(l)),
            (None, None) => (pb::Durability::Recorded, None),
        };
        let mut resp = pb::GetDurabilityResponse {
            durability: durability as i32,
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
        // Federation (per peer, from the peers' receipts) and acted upon (from the projection);
        // the overall durability is the highest reached.
        resp.peers = self.node.federation.receipts.peer_durability(&id)?;
        resp.acted_upon_by = self
            .node
            .projection
            .read()
            .map_err(|_| Error::Internal("projection lock poisoned".into()))?
            .acted_upon(&id)
            .iter()
            .map(|a| a.to_vec().into())
            .collect();
        if !resp.acted_upon_by.is_empty() {
            resp.durability = pb::Durability::ActedUpon as i32;
        }
        resp.durability = resp
            .peers
            .iter()
            .map(|p| p.durability)
            .fold(resp.durability, i32::max);
        Ok(Response::new(resp))
    }
}
