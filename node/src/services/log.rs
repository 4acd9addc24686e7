//! `accord.log.v1.LogService`: checkpoints and proofs, served from storage in O(log n) reads.
//!
//! Checkpoints and consistency proofs are open to anyone: they reveal tree sizes and hashes, no
//! record content. An inclusion proof is about one record, so it needs a credential and is given
//! only to a caller who may read that record (issue 8; [`super::visibility`]); otherwise it is
//! NOT_FOUND exactly as for an unknown record.

use super::visibility::{Visibility, record_not_found};
use crate::error::Error;
use crate::node::Node;
use accord_proto::pb::log::v1 as pb;
use accord_proto::pb::log::v1::log_service_server::{LogService, LogServiceServer};
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The LogService implementation.
#[derive(Debug, Clone)]
pub struct LogApi {
    node: Arc<Node>,
    rules: Arc<Visibility>,
}

/// The service, ready to add to a tonic server.
pub fn server(node: Arc<Node>) -> LogServiceServer<LogApi> {
    LogServiceServer::new(api(node))
}

/// The implementation itself (the simulation calls it without a server: `crate::embed`).
pub(crate) fn api(node: Arc<Node>) -> LogApi {
    let rules = Arc::new(Visibility::new(&node.config));
    LogApi { node, rules }
}

fn hashes(v: Vec<[u8; 32]>) -> Vec<prost::bytes::Bytes> {
    v.into_iter().map(|h| h.to_vec().into()).collect()
}

impl LogApi {
    fn latest_size(&self) -> Result<u64, Error> {
        self.node
            .log
            .latest()
            .map(|c| c.size)
            .ok_or_else(|| Error::FailedPrecondition("no checkpoint yet".into()))
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Node) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let node = self.node.clone();
        tokio::task::spawn_blocking(move || f(&node))
            .await
            .map_err(|e| Error::Internal(e.to_string()))?
    }
}

#[tonic::async_trait]
impl LogService for LogApi {
    #[tracing::instrument(skip_all)]
    async fn get_checkpoint(
        &self,
        _req: Request<pb::GetCheckpointRequest>,
    ) -> Result<Response<pb::GetCheckpointResponse>, Status> {
        Ok(Response::new(pb::GetCheckpointResponse {
            latest: self.node.log.latest().map(|c| c.to_pb()),
            witnessed: self.node.log.witnessed().map(|c| c.to_pb()),
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn get_inclusion_proof(
        &self,
        req: Request<pb::GetInclusionProofRequest>,
    ) -> Result<Response<pb::GetInclusionProofResponse>, Status> {
        let caller = self.node.tokens.caller(&req)?;
        let r = req.into_inner();
        let store = self.node.ledger.store();
        let visible = |seq: u64| -> Result<bool, Error> {
            Ok(match store.get(seq)? {
                Some(e) => self.rules.entry(&self.node, &caller, &e)?,
                None => false,
            })
        };
        let index = match r.leaf {
            Some(pb::get_inclusion_proof_request::Leaf::LeafIndex(i)) => {
                // A leaf past the log is a bad argument for everyone (the size is public); a
                // leaf the caller may not read is NOT_FOUND.
                if i < self.node.ledger.len() && !visible(i)? {
                    return Err(Error::NotFound(format!("leaf {i}")).into());
                }
                i
            }
            Some(pb::get_inclusion_proof_request::Leaf::RecordId(id)) => {
                let id = super::work::record_id_field("record_id", &id)?;
                match store.seq_of(&id)? {
                    Some(seq) if visible(seq)? => seq,
                    _ => return Err(record_not_found(&id).into()),
                }
            }
            None => {
                return Err(Error::invalid("leaf", "a record_id or leaf_index is required").into());
            }
        };
        let size = if r.tree_size == 0 {
            self.latest_size()?
        } else {
            r.tree_size
        };
        if size > self.node.ledger.len() {
            return Err(Error::invalid(
                "tree_size",
                format!("{size} is larger than the log ({})", self.node.ledger.len()),
            )
            .into());
        }
        if index >= size {
            return Err(Error::invalid(
                "leaf",
                format!("leaf {index} is not in a tree of size {size}"),
            )
            .into());
        }
        let (leaf_hash, proof, root) = self
            .blocking(move |n| {
                let s = n.ledger.store();
                Ok((
                    crate::log::leaf_hash(s, index)?,
                    crate::log::inclusion_proof(s, index, size)?,
                    crate::log::root(s, size)?,
                ))
            })
            .await?;
        Ok(Response::new(pb::GetInclusionProofResponse {
            leaf_index: index,
            tree_size: size,
            leaf_hash: leaf_hash.to_vec().into(),
            hashes: hashes(proof),
            root: root.to_vec().into(),
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn get_consistency_proof(
        &self,
        req: Request<pb::GetConsistencyProofRequest>,
    ) -> Result<Response<pb::GetConsistencyProofResponse>, Status> {
        let r = req.into_inner();
        let size2 = if r.size2 == 0 {
            self.latest_size()?
        } else {
            r.size2
        };
        if size2 > self.node.ledger.len() {
            return Err(Error::invalid(
                "size2",
                format!(
                    "{size2} is larger than the log ({})",
                    self.node.ledger.len()
                ),
            )
            .into());
        }
        if r.size1 > size2 {
            return Err(Error::invalid(
                "size1",
                format!("{} is larger than size2 {size2}", r.size1),
            )
            .into());
        }
        let size1 = r.size1;
        let proof = self
            .blocking(move |n| crate::log::consistency_proof(n.ledger.store(), size1, size2))
            .await?;
        Ok(Response::new(pb::GetConsistencyProofResponse {
            size1,
            size2,
            hashes: hashes(proof),
        }))
    }
}
