//! `accord.run.v1.RunService` (seed 002; issue 12): run records the node signs for the
//! authenticated party, as `Declare` does, and the run views: the run and its transition log,
//! its receipt with inclusion proofs ([`super::run_receipt`]), and its prior work.
//!
//! After a run record of this node is applied, the node writes what the kernel asks for
//! ([`kr::RunEffect`]): `acted_upon` for an action that acts on a record of the executed
//! commitment, authored by the same party, resting on the run record in `basis`. The run's
//! execution claims and heartbeats (`observation`s of its executor) are not written here: the
//! projection keeps them as owed (`Stored::claims_due`) whichever service recorded the run
//! record, and the node's clock writes them ([`crate::service_party`]), so they survive a
//! restart. The kernel asks for both only while the run's executor is the commitment's obligor.
//!
//! Who may write is the kernel's ([`kr::who`]), checked here before anything is signed, on the
//! published state: a write the caller may not make is NOT_FOUND exactly as one on an unknown
//! run (`run "<id>"`) or, for `CreateRun`, an unknown commitment (`commitment "<id>"`), and
//! nothing is written. The kernel checks the same rules again in ledger order (records that
//! arrive through `Submit`, `Declare` or federation, and races), answering `unknown_run` /
//! `unknown_commitment` alike for what does not exist and what the author may not act on.
//! Who may read a run: the operator, its executor, and whoever may read the commitment it
//! executes — never someone because they wrote a record of it.

use super::visibility::{Visibility, commitment_not_found};
use crate::auth::Caller;
use crate::convert::run::state_to_wire;
use crate::error::Error;
use crate::node::Node;
use accord_kernel as k;
use accord_kernel::run as kr;
use accord_proto::pb::record::v1 as rpb;
use accord_proto::pb::record::v1::record::Operation as Op;
use accord_proto::pb::run::v1 as pb;
use accord_proto::pb::run::v1::run_service_server::{RunService, RunServiceServer};
use accord_proto::pb::work::v1::SubmitResponse;
use accord_proto::signing;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The RunService implementation.
#[derive(Debug, Clone)]
pub struct RunApi {
    node: Arc<Node>,
    rules: Arc<Visibility>,
    /// The kernel's Access, for who may write ([`kr::who`]).
    access: Arc<k::Access>,
}

/// The service, ready to add to a tonic server.
pub fn server(node: Arc<Node>) -> RunServiceServer<RunApi> {
    let rules = Arc::new(Visibility::new(&node.config));
    let access = crate::projection::access_from_config(&node.config).unwrap_or_else(|e| {
        // Validation ran before the services are built; without grants, fewer parties write.
        tracing::error!(error = %e, "access from config; run writes use no grants");
        k::Access::new(k::Party::new(
            &node.config.name,
            crate::projection::WORK_SERVICE,
        ))
    });
    RunServiceServer::new(RunApi {
        node,
        rules,
        access: Arc::new(access),
    })
    .max_decoding_message_size(1024 * 1024)
}

/// Unknown and invisible runs answer alike.
pub fn run_not_found(id: &str) -> Error {
    Error::NotFound(format!("run {}", crate::ident::quote(id)))
}

fn poisoned() -> Error {
    Error::Internal("projection lock poisoned".into())
}

/// The record ids of a run's entries.
fn rec<T>(l: &[kr::Entry<T>]) -> Vec<prost::bytes::Bytes> {
    l.iter().map(|e| e.record.to_vec().into()).collect()
}

fn ids(list: &[k::RecordId]) -> Vec<prost::bytes::Bytes> {
    list.iter().map(|i| i.to_vec().into()).collect()
}

impl RunApi {
    /// Signs `op` for the authenticated party and records it; then writes the run effects.
    /// `commitment` is `Some` for a `run_start` (the commitment it is to execute).
    /// The answer is the call's own message (`CreateRunResponse`, …: `SubmitResponse`'s fields;
    /// issue 28).
    async fn write<T, A: From<SubmitResponse>>(
        &self,
        req: &Request<T>,
        run: &str,
        commitment: Option<String>,
        op: Op,
    ) -> Result<A, Error> {
        let party = self.node.tokens.party(req)?;
        tracing::Span::current().record("party", &party);
        crate::ident::id(run).map_err(|r| Error::invalid("run", r))?;
        let who = k::Party::new(self.node.name(), party.as_str());
        // Records after run_start carry the commitment the run executes (the kernel checks it).
        let commitment = self.may_write(&who, run, commitment, &op)?;
        let author = rpb::PartyRef {
            organisation: self.node.name().to_string(),
            name: party,
        };
        let resp = self
            .sign_append(author.clone(), commitment, vec![], op)
            .await?;
        if resp.outcome.as_ref().is_some_and(|o| o.applied) {
            let id: k::RecordId = resp.record_id.as_ref().try_into().unwrap_or([0; 32]);
            let effects = self
                .node
                .projection
                .write()
                .map_err(|_| poisoned())?
                .run_effects
                .take(&id);
            for e in effects {
                let (commitment, basis, op) = match e {
                    // Owed by the projection and written by the node's clock (issue 29), so
                    // they do not depend on this service having written the run record.
                    kr::RunEffect::ExecutionClaim { .. } => continue,
                    kr::RunEffect::ActedUpon {
                        commitment,
                        action,
                        record,
                        act,
                        ..
                    } => (
                        commitment,
                        action,
                        Op::ActedUpon(rpb::ActedUpon {
                            record_id: record.to_vec().into(),
                            act,
                        }),
                    ),
                };
                match self
                    .sign_append(author.clone(), commitment, vec![basis.to_vec().into()], op)
                    .await
                {
                    Ok(r) => tracing::debug!(
                        record = hex::encode(&r.record_id),
                        applied = r.outcome.as_ref().is_some_and(|o| o.applied),
                        "run effect recorded"
                    ),
                    Err(e) => tracing::warn!(error = %e, "run effect not recorded"),
                }
            }
        }
        Ok(resp.into())
    }

    async fn sign_append(
        &self,
        author: rpb::PartyRef,
        commitment: String,
        basis: Vec<prost::bytes::Bytes>,
        op: Op,
    ) -> Result<SubmitResponse, Error> {
        let record = rpb::Record {
            author: Some(author),
            declared_at_unix_ms: self.node.clock.now_ms(),
            commitment_id: commitment,
            basis,
            items: vec![],
            nonce: Default::default(),
            operation: Some(op),
        };
        let signed = signing::sign_record(&self.node.signer, &record);
        let id = signing::record_id(&signed.payload_type, &signed.payload);
        tracing::Span::current().record("record_id", hex::encode(id));
        super::submit::append(&self.node, signed, record, id).await
    }

    /// The door (issue 27): whether `who` may write `op` on run `run` by the kernel's rules
    /// ([`kr::who`]) on the published state. Returns the commitment the record carries (the
    /// one the run executes); NOT_FOUND, exactly as for an unknown run or commitment, otherwise.
    fn may_write(
        &self,
        who: &k::Party,
        run: &str,
        start_for: Option<String>,
        op: &Op,
    ) -> Result<String, Error> {
        let p = self.node.projection.read().map_err(|_| poisoned())?;
        if let Some(c) = start_for {
            let allowed = c.is_empty()
                || p.get(&c)
                    .is_some_and(|cm| kr::may_execute(&cm, &self.access, who));
            return if allowed {
                Ok(c)
            } else {
                Err(commitment_not_found(&c))
            };
        }
        let writer = match op {
            Op::RunDecision(_) => kr::Writer::Approver,
            _ => kr::Writer::Executor,
        };
        let Some(r) = p.run(run) else {
            return Err(run_not_found(run));
        };
        let executed = r.commitment.as_deref().and_then(|c| p.get(c));
        if kr::may_write_as(&r, executed.as_deref(), &self.access, who, writer) {
            Ok(r.commitment.clone().unwrap_or_default())
        } else {
            Err(run_not_found(run))
        }
    }

    /// The caller, if it may read run `id`, with the run's derived state; NOT_FOUND otherwise.
    /// A party reads a run it executes, and one executing a commitment it may read; writing a
    /// record of a run grants nothing.
    fn readable<T>(&self, req: &Request<T>, id: &str) -> Result<(Arc<kr::Run>, usize), Error> {
        let caller = self.node.tokens.caller(req)?;
        let (run, children) = {
            let p = self.node.projection.read().map_err(|_| poisoned())?;
            let Some(run) = p.run(id) else {
                return Err(run_not_found(id));
            };
            let on_it = match &caller {
                Caller::Operator => true,
                Caller::Party(name) => *run.executor() == k::Party::new(self.node.name(), name),
            };
            (on_it.then(|| run.clone()), p.child_count(id))
        };
        let visible = match run {
            Some(r) => Some(r),
            None => {
                // A party with a role on the executed commitment reads the run too.
                let p = self.node.projection.read().map_err(|_| poisoned())?;
                let run = p.run(id);
                drop(p);
                match run {
                    Some(r)
                        if r.commitment.as_deref().is_some_and(|c| {
                            self.rules
                                .commitment(&self.node, &caller, c)
                                .unwrap_or(false)
                        }) =>
                    {
                        Some(r)
                    }
                    _ => None,
                }
            }
        };
        visible
            .map(|r| (r, children))
            .ok_or_else(|| run_not_found(id))
    }
}

fn required<T>(field: &str, v: Option<T>) -> Result<T, Error> {
    v.ok_or_else(|| Error::invalid(field, "required"))
}

#[tonic::async_trait]
impl RunService for RunApi {
    #[tracing::instrument(skip_all, fields(party, record_id))]
    async fn create_run(
        &self,
        req: Request<pb::CreateRunRequest>,
    ) -> Result<Response<pb::CreateRunResponse>, Status> {
        let r = req.get_ref().clone();
        let start = required("start", r.start)?;
        let run = start.run.clone();
        Ok(Response::new(
            self.write(&req, &run, Some(r.commitment_id), Op::RunStart(start))
                .await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(party, record_id))]
    async fn transition(
        &self,
        req: Request<pb::TransitionRequest>,
    ) -> Result<Response<pb::TransitionResponse>, Status> {
        let t = required("transition", req.get_ref().transition.clone())?;
        let run = t.run.clone();
        Ok(Response::new(
            self.write(&req, &run, None, Op::RunTransition(t)).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(party, record_id))]
    async fn add_action(
        &self,
        req: Request<pb::AddActionRequest>,
    ) -> Result<Response<pb::AddActionResponse>, Status> {
        let a = required("action", req.get_ref().action.clone())?;
        let run = a.run.clone();
        Ok(Response::new(
            self.write(&req, &run, None, Op::RunAction(a)).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(party, record_id))]
    async fn add_proposal(
        &self,
        req: Request<pb::AddProposalRequest>,
    ) -> Result<Response<pb::AddProposalResponse>, Status> {
        let a = required("proposal", req.get_ref().proposal.clone())?;
        let run = a.run.clone();
        Ok(Response::new(
            self.write(&req, &run, None, Op::RunProposal(a)).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(party, record_id))]
    async fn add_decision(
        &self,
        req: Request<pb::AddDecisionRequest>,
    ) -> Result<Response<pb::AddDecisionResponse>, Status> {
        let a = required("decision", req.get_ref().decision.clone())?;
        let run = a.run.clone();
        Ok(Response::new(
            self.write(&req, &run, None, Op::RunDecision(a)).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(party, record_id))]
    async fn add_evidence(
        &self,
        req: Request<pb::AddEvidenceRequest>,
    ) -> Result<Response<pb::AddEvidenceResponse>, Status> {
        let a = required("evidence", req.get_ref().evidence.clone())?;
        let run = a.run.clone();
        Ok(Response::new(
            self.write(&req, &run, None, Op::RunEvidence(a)).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(party, record_id))]
    async fn add_output(
        &self,
        req: Request<pb::AddOutputRequest>,
    ) -> Result<Response<pb::AddOutputResponse>, Status> {
        let a = required("output", req.get_ref().output.clone())?;
        let run = a.run.clone();
        Ok(Response::new(
            self.write(&req, &run, None, Op::RunOutput(a)).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(party, record_id))]
    async fn add_audit_event(
        &self,
        req: Request<pb::AddAuditEventRequest>,
    ) -> Result<Response<pb::AddAuditEventResponse>, Status> {
        let a = required("event", req.get_ref().event.clone())?;
        let run = a.run.clone();
        Ok(Response::new(
            self.write(&req, &run, None, Op::RunAuditEvent(a)).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(run = %req.get_ref().run))]
    async fn get_run(
        &self,
        req: Request<pb::GetRunRequest>,
    ) -> Result<Response<pb::GetRunResponse>, Status> {
        let id = req.get_ref().run.clone();
        let (r, _) = self.readable(&req, &id)?;
        let transitions = r
            .transitions
            .iter()
            .map(|t| pb::TransitionEntry {
                record_id: t.record.to_vec().into(),
                by: Some(crate::convert::party_to_pb(&t.by)),
                at_unix_ms: t.at,
                prior: state_to_wire(t.body.prior),
                next: state_to_wire(t.body.next),
                context: Some(rpb::RunTransitionContext {
                    reason: t.body.context.reason.clone(),
                    proposal: t
                        .body
                        .context
                        .proposal
                        .map(|p| p.to_vec().into())
                        .unwrap_or_default(),
                    evidence: ids(&t.body.context.evidence),
                    metadata: t.body.context.metadata.clone().into_iter().collect(),
                }),
            })
            .collect();
        Ok(Response::new(pb::GetRunResponse {
            run: r.id.clone(),
            commitment_id: r.commitment.clone().unwrap_or_default(),
            organisation: r.organisation().to_string(),
            state: state_to_wire(r.state),
            terminal: r.state.is_terminal(),
            parent: r.parent().unwrap_or_default().to_string(),
            transitions,
            actions: rec(&r.actions),
            proposals: rec(&r.proposals),
            decisions: rec(&r.decisions),
            evidence: rec(&r.evidence),
            outputs: rec(&r.outputs),
            audit_events: rec(&r.audit_events),
            updated_at_unix_ms: r.updated_at,
        }))
    }

    #[tracing::instrument(skip_all, fields(run = %req.get_ref().run))]
    async fn get_receipt(
        &self,
        req: Request<pb::GetReceiptRequest>,
    ) -> Result<Response<pb::RunReceipt>, Status> {
        let id = req.get_ref().run.clone();
        let (r, children) = self.readable(&req, &id)?;
        let receipt = kr::receipt(&r, children);
        Ok(Response::new(
            super::run_receipt::build(&self.node, &receipt).await?,
        ))
    }

    #[tracing::instrument(skip_all, fields(run = %req.get_ref().run))]
    async fn get_prior_work(
        &self,
        req: Request<pb::GetPriorWorkRequest>,
    ) -> Result<Response<pb::GetPriorWorkResponse>, Status> {
        let id = req.get_ref().run.clone();
        let (r, children) = self.readable(&req, &id)?;
        let w = kr::prior_work(&r, children);
        Ok(Response::new(pb::GetPriorWorkResponse {
            run: w.run,
            state: state_to_wire(w.state),
            actions: ids(&w.actions),
            actions_with_output: ids(&w.actions_with_output),
            side_effects: ids(&w.side_effects),
            not_idempotent: ids(&w.not_idempotent),
            decisions: ids(&w.decisions),
            outputs: ids(&w.outputs),
            child_runs: w.child_runs as u64,
            persistence_mode: w.persistence_mode.unwrap_or_default(),
            needs_confirmation: w.needs_confirmation,
        }))
    }
}
