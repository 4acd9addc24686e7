//! `request`: creates a commitment in `requested` (seed 000, "Operations": "Obligee, or someone
//! on its behalf"; "Minimum fields": a commitment id and a titled terms with unique line items).

use std::collections::BTreeMap;

use crate::access::Access;
use crate::commitment::{Commitment, Item, QueueState, Validity, WHOLE};
use crate::effect::Effect;
use crate::ops::{check_party, check_terms};
use crate::record::{Record, Request};
use crate::rejection::{Rejection, RejectionCode as C, ensure, reject};
use crate::state::State;

/// request: creates the commitment in `requested` ("Minimum fields": a commitment id and a
/// titled terms; line item ids unique).
pub(crate) fn create(
    r: &Record,
    req: &Request,
    access: &Access,
    now: i64,
) -> Result<(Commitment, Vec<Effect>), Rejection> {
    ensure(
        access.acts_for(&r.author),
        C::NotAuthorized,
        format!("{} does not act for {:?}", r.author, r.author.organisation),
    )?;
    let obligee = req.obligee.clone().unwrap_or_else(|| r.author.clone());
    ensure(
        obligee == r.author || obligee.organisation == r.author.organisation,
        C::WrongRole,
        format!(
            "request needs {:?}: the obligee or someone on its behalf",
            crate::rules::REQUEST_ROLES
        ),
    )?;
    ensure(
        !r.commitment.is_empty(),
        C::MissingField,
        "a request names the commitment id",
    )?;
    ensure(
        r.items.is_empty(),
        C::ItemMismatch,
        "a request creates every item; it names none",
    )?;
    check_terms(&req.terms)?;
    for (p, f) in [
        (&req.obligee, "obligee"),
        (&req.candidate, "candidate"),
        (&req.acceptor, "acceptor"),
        (&req.accountable, "accountable"),
        (&req.principal, "principal"),
    ] {
        check_party(p, f)?;
    }
    if let Some(q) = &req.queue {
        ensure(!q.name.is_empty(), C::MissingField, "a queue needs a name")?;
        crate::distribution::check_queue(q, "queue")?;
    }
    if req.implicit_acceptance_window_ms.is_some_and(|w| w <= 0) {
        return reject(
            C::Malformed,
            "the implicit acceptance window must be positive",
        );
    }
    let validity = req.valid_until.map(|until| Validity {
        record: r.id,
        until,
    });
    let item = |description: String| Item {
        description,
        state: State::Requested,
        validity,
        statement: None,
        accepted_implicitly: false,
        work: None,
    };
    let items: BTreeMap<String, Item> = if req.terms.items.is_empty() {
        [(WHOLE.to_string(), item(req.terms.description.clone()))].into()
    } else {
        req.terms
            .items
            .iter()
            .map(|li| (li.id.clone(), item(li.description.clone())))
            .collect()
    };
    let c = Commitment {
        id: r.commitment.clone(),
        home: r.author.organisation.clone(),
        created_at: now,
        updated_at: now,
        origin: r.id,
        obligee,
        acceptor: req.acceptor.clone(),
        accountable: req.accountable.clone(),
        principal: req.principal.clone(),
        obligor: None,
        offered_to: req.candidate.clone(),
        nominees: Vec::new(),
        terms: req.terms.clone(),
        terms_version: r.id,
        version: 1,
        content_changes: 0,
        counter: None,
        acceptance: req.acceptance,
        implicit_window_ms: req.implicit_acceptance_window_ms,
        items,
        queue: req.queue.clone().map(|queue| QueueState {
            queue,
            declared_by: r.id,
        }),
        claim: None,
        claims: Vec::new(),
        forward_count: 0,
        delegate_offer: None,
        assign_offer: None,
        deferral: None,
        revoke: None,
        rejects: Vec::new(),
        disputes: Vec::new(),
        conditions: Vec::new(),
        notices: Vec::new(),
        consumed: 0,
        evidence: Vec::new(),
        admissions: Vec::new(),
        reopens: None,
        reopened_by: Vec::new(),
        history: vec![r.id],
        executors: Vec::new(),
        stop: None,
        handover: None,
        last_recheck: None,
        attention: Vec::new(),
        policy_offers: Vec::new(),
    };
    Ok((c, Vec::new()))
}
