//! The node's one error type, and its mapping to gRPC status codes.
//!
//! Every status carries a machine-readable reason in the `accord-reason` metadata entry (and, for
//! bad input, the offending field in `accord-field`). `Internal` and `Storage` never leak detail
//! to the client: the detail is logged, the client sees "internal error".

/// Longest `accord-field` value, in bytes.
pub const MAX_FIELD: usize = 128;
/// Longest error detail (and gRPC status message), in bytes: errors never echo large inputs.
pub const MAX_DETAIL: usize = 512;

/// Errors of the Accord node.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A field of a request is malformed or missing. Nothing was written.
    #[error("invalid argument: {field}: {reason}")]
    InvalidArgument {
        /// The offending field, dotted (e.g. `record.payload`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A signature does not verify, or is made by a key the author does not hold.
    #[error("bad signature: {0}")]
    BadSignature(String),
    /// The thing asked for does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The caller is not authenticated.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The caller may not do this.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The system is not in a state that allows this.
    #[error("failed precondition: {0}")]
    FailedPrecondition(String),
    /// Too much at once; retry later.
    #[error("resource exhausted: {0}")]
    ResourceExhausted(String),
    /// A watch stream's client fell further behind than `limits.watch_pending` (issue 27): the
    /// stream is closed (RESOURCE_EXHAUSTED, `accord-reason: watch_lagged`); the client lists
    /// again and watches anew.
    #[error("watch lagged: {0}")]
    WatchLagged(String),
    /// The ledger writer has stopped (after a failed write, or at shutdown).
    #[error("the ledger has stopped")]
    LedgerStopped,
    /// A peer or witness could not be reached.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// This instance no longer holds the writer's lease (issue 31, PostgreSQL): another
    /// instance took it, so this one's writes are refused by the fence. The message names the
    /// writer. Status UNAVAILABLE, `accord-reason: not_writer`.
    #[error("not the writer: {0}")]
    NotWriter(String),
    /// The store failed or holds something it should not.
    #[error("storage: {0}")]
    Storage(String),
    /// A configuration error naming the field.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// TLS material could not be loaded.
    #[error("tls: {0}")]
    Tls(String),
    /// A bug.
    #[error("internal: {0}")]
    Internal(String),
    /// A peer's envelope or call was refused (seed 000, "Federation admission"); `code` is from
    /// the closed list in federation.proto and is the `accord-reason`. Nothing was admitted.
    #[error("refused: {code}: {detail}")]
    Refused {
        /// The reason code, e.g. `unknown_peer`, `wrong_tls_identity`, `bad_signature`.
        code: &'static str,
        /// What was wrong.
        detail: String,
    },
}

impl Error {
    /// Shorthand for [`Error::InvalidArgument`]. Field and reason are cut to
    /// [`MAX_FIELD`] / [`MAX_DETAIL`] bytes, so an error never echoes a large input back
    /// (issue 8; quote values with [`crate::ident::quote`]).
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            field: crate::ident::truncate(&field.into(), MAX_FIELD),
            reason: crate::ident::truncate(&reason.into(), MAX_DETAIL),
        }
    }

    /// The machine-readable reason (`accord-reason`).
    pub fn reason(&self) -> &'static str {
        match self {
            Error::InvalidArgument { .. } => "invalid_argument",
            Error::BadSignature(_) => "bad_signature",
            Error::NotFound(_) => "not_found",
            Error::Unauthenticated(_) => "unauthenticated",
            Error::PermissionDenied(_) => "permission_denied",
            Error::FailedPrecondition(_) => "failed_precondition",
            Error::ResourceExhausted(_) => "resource_exhausted",
            Error::WatchLagged(_) => "watch_lagged",
            Error::LedgerStopped => "ledger_stopped",
            Error::Unavailable(_) => "unavailable",
            Error::NotWriter(_) => "not_writer",
            Error::Storage(_) | Error::Internal(_) => "internal",
            Error::Config(_) => "config",
            Error::Tls(_) => "tls",
            Error::Refused { code, .. } => code,
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        use tonic::Code;
        let code = match &e {
            Error::InvalidArgument { .. } | Error::BadSignature(_) => Code::InvalidArgument,
            Error::NotFound(_) => Code::NotFound,
            Error::Unauthenticated(_) => Code::Unauthenticated,
            Error::PermissionDenied(_) | Error::Refused { .. } => Code::PermissionDenied,
            Error::FailedPrecondition(_) => Code::FailedPrecondition,
            Error::ResourceExhausted(_) | Error::WatchLagged(_) => Code::ResourceExhausted,
            Error::LedgerStopped | Error::Unavailable(_) | Error::NotWriter(_) => Code::Unavailable,
            Error::Storage(_) | Error::Internal(_) | Error::Config(_) | Error::Tls(_) => {
                Code::Internal
            }
        };
        let message = if code == Code::Internal {
            tracing::error!(error = %e, "internal error");
            "internal error".to_string()
        } else {
            crate::ident::truncate(&e.to_string(), MAX_DETAIL)
        };
        let mut status = tonic::Status::new(code, message);
        if let Ok(v) = e.reason().parse() {
            status.metadata_mut().insert("accord-reason", v);
        }
        if let Error::InvalidArgument { field, .. } = &e
            && let Ok(v) = field.parse()
        {
            status.metadata_mut().insert("accord-field", v);
        }
        status
    }
}
