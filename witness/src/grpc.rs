//! The gRPC services: `accord.witness.v1.WitnessService` (add-checkpoint with the semantics of
//! c2sp.org/tlog-witness; status codes as fixed in the header of `witness.proto`) and
//! `accord.witness.v1.WitnessAdminService` (behind a bearer token).

use std::sync::Arc;

use accord_proto::pb::witness::v1 as pb;
use pb::witness_admin_service_server::WitnessAdminService;
use pb::witness_service_server::WitnessService;
use sha2::{Digest as _, Sha256};
use tonic::{Request, Response, Status};
use tracing::instrument;

use crate::error::Error;
use crate::logs::LogConfig;
use crate::request::AddCheckpoint;
use crate::witness::Witness;

/// `WitnessService` over a [`Witness`].
#[derive(Debug, Clone)]
pub struct WitnessGrpc {
    witness: Arc<Witness>,
}

impl WitnessGrpc {
    /// The service.
    pub fn new(witness: Arc<Witness>) -> WitnessGrpc {
        WitnessGrpc { witness }
    }
}

#[tonic::async_trait]
impl WitnessService for WitnessGrpc {
    #[instrument(name = "grpc.add_checkpoint", skip_all)]
    async fn add_checkpoint(
        &self,
        request: Request<pb::AddCheckpointRequest>,
    ) -> Result<Response<pb::AddCheckpointResponse>, Status> {
        let r = request.into_inner();
        let req = AddCheckpoint::from_grpc(r.old_size, &r.consistency_proof, r.checkpoint)?;
        let cosigned = self.witness.add_checkpoint(req).await?;
        Ok(Response::new(pb::AddCheckpointResponse {
            cosignatures: cosigned.cosignatures,
        }))
    }

    #[instrument(name = "grpc.get_latest", skip_all, fields(origin = %request.get_ref().origin))]
    async fn get_latest(
        &self,
        request: Request<pb::GetLatestRequest>,
    ) -> Result<Response<pb::GetLatestResponse>, Status> {
        let origin = &request.get_ref().origin;
        let latest = self.witness.latest(origin).await?;
        Ok(Response::new(match latest {
            Some(l) => pb::GetLatestResponse {
                cosigned_checkpoint: crate::witness::cosigned_note(
                    origin,
                    self.witness.log(origin)?.as_deref(),
                    &l,
                )?,
                checkpoint: l.body,
                size: l.size,
            },
            None => pb::GetLatestResponse::default(),
        }))
    }

    #[instrument(name = "grpc.sign_subtree", skip_all)]
    async fn sign_subtree(
        &self,
        request: Request<pb::SignSubtreeRequest>,
    ) -> Result<Response<pb::SignSubtreeResponse>, Status> {
        let r = request.into_inner();
        let req = crate::subtree::SignSubtree::from_grpc(
            r.start,
            r.end,
            &r.subtree_hash,
            &r.consistency_proof,
            r.checkpoint,
        )?;
        let cosignatures = self.witness.sign_subtree(req).await?;
        Ok(Response::new(pb::SignSubtreeResponse { cosignatures }))
    }
}

/// `WitnessAdminService` over a [`Witness`]; wrap it with [`AdminAuth`].
#[derive(Debug, Clone)]
pub struct AdminGrpc {
    witness: Arc<Witness>,
}

impl AdminGrpc {
    /// The service.
    pub fn new(witness: Arc<Witness>) -> AdminGrpc {
        AdminGrpc { witness }
    }
}

fn log_from_pb(log: Option<pb::Log>) -> Result<LogConfig, Error> {
    let log = log.ok_or_else(|| Error::InvalidLog {
        field: "log".into(),
        reason: "missing".into(),
    })?;
    LogConfig::new(&log.origin, &log.vkeys).map_err(|e| match e {
        Error::InvalidLog { field, reason } => Error::InvalidLog {
            field: format!("log.{field}"),
            reason,
        },
        other => other,
    })
}

#[tonic::async_trait]
impl WitnessAdminService for AdminGrpc {
    #[instrument(name = "grpc.add_log", skip_all)]
    async fn add_log(
        &self,
        request: Request<pb::AddLogRequest>,
    ) -> Result<Response<pb::AddLogResponse>, Status> {
        let log = log_from_pb(request.into_inner().log)?;
        self.witness.add_log(log).await?;
        Ok(Response::new(pb::AddLogResponse {}))
    }

    #[instrument(name = "grpc.list_logs", skip_all)]
    async fn list_logs(
        &self,
        _request: Request<pb::ListLogsRequest>,
    ) -> Result<Response<pb::ListLogsResponse>, Status> {
        let logs = self
            .witness
            .list_logs()?
            .into_iter()
            .map(|s| pb::LogStatus {
                log: Some(pb::Log {
                    origin: s.log.origin().to_owned(),
                    vkeys: s.log.vkeys(),
                }),
                size: s.size,
            })
            .collect();
        Ok(Response::new(pb::ListLogsResponse { logs }))
    }

    #[instrument(name = "grpc.remove_log", skip_all, fields(origin = %request.get_ref().origin))]
    async fn remove_log(
        &self,
        request: Request<pb::RemoveLogRequest>,
    ) -> Result<Response<pb::RemoveLogResponse>, Status> {
        self.witness.remove_log(&request.get_ref().origin).await?;
        Ok(Response::new(pb::RemoveLogResponse {}))
    }
}

/// Checks `authorization: Bearer <token>` against the configured SHA-256 of the admin token;
/// anything else is `UNAUTHENTICATED`.
#[derive(Clone)]
pub struct AdminAuth {
    token_sha256: [u8; 32],
}

impl std::fmt::Debug for AdminAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminAuth").finish_non_exhaustive()
    }
}

impl AdminAuth {
    /// An interceptor accepting the token whose SHA-256 is `token_sha256`.
    pub fn new(token_sha256: [u8; 32]) -> AdminAuth {
        AdminAuth { token_sha256 }
    }

    fn check(&self, header: Option<&str>) -> bool {
        let Some(token) = header.and_then(|h| h.strip_prefix("Bearer ")) else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
        // Compare without an early exit.
        digest
            .iter()
            .zip(self.token_sha256.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl tonic::service::Interceptor for AdminAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let header = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        if self.check(header) {
            Ok(request)
        } else {
            tracing::warn!("admin call without a valid bearer token");
            Err(Error::Unauthenticated.into())
        }
    }
}
