//! The crate's one error type, and its two mappings: to gRPC statuses (as fixed in the header of
//! `proto/accord/witness/v1/witness.proto`) and to HTTP responses (as fixed by c2sp.org/tlog-witness,
//! "add-checkpoint").
//!
//! | variant | HTTP | gRPC |
//! | --- | --- | --- |
//! | [`Error::Malformed`], [`Error::OldSizeTooLarge`], [`Error::InvalidLog`] | 400 | `INVALID_ARGUMENT` |
//! | [`Error::UnknownOrigin`] | 404 | `NOT_FOUND` |
//! | [`Error::Untrusted`] | 403 | `PERMISSION_DENIED` |
//! | [`Error::SizeMismatch`] | 409, body `<held size>\n`, `text/x.tlog.size` | `ABORTED`, trailer `tlog-size` |
//! | [`Error::Inconsistent`] | 422 | `FAILED_PRECONDITION` |
//! | [`Error::Overloaded`] | 429 (one origin) / 503 (whole witness) | `RESOURCE_EXHAUSTED` |
//! | [`Error::Unauthenticated`] | 401 | `UNAUTHENTICATED` |
//! | [`Error::Unsupported`] (sign-subtree without an ML-DSA-44 key) | 501 | `UNIMPLEMENTED` |
//! | everything else | 500, no detail | `INTERNAL`, no detail |

use std::path::PathBuf;

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

/// The media type of a 409 response body (c2sp.org/tlog-witness, "add-checkpoint").
pub const TLOG_SIZE_CONTENT_TYPE: &str = "text/x.tlog.size";

/// The gRPC trailing-metadata key that carries the held size on `ABORTED`.
pub const TLOG_SIZE_METADATA: &str = "tlog-size";

/// Which admission limit turned a request away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitScope {
    /// The per-origin limit: this log already has as many requests in flight as allowed.
    Origin,
    /// The witness-wide limit.
    Global,
}

/// Everything that can go wrong in the witness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request cannot be parsed: the add-checkpoint body, the signed note, the checkpoint
    /// text or a proof hash violates its format.
    #[error("malformed request: {reason}")]
    Malformed {
        /// What is wrong.
        reason: String,
    },

    /// The checkpoint's origin is not a log this witness is configured for
    /// (c2sp.org/tlog-witness: "404 Not Found").
    #[error("unknown log origin {origin:?}")]
    UnknownOrigin {
        /// The origin line of the checkpoint.
        origin: String,
    },

    /// No signature on the checkpoint verifies against a key trusted for its origin, or a trusted
    /// key's signature is invalid (c2sp.org/tlog-witness: "403 Forbidden").
    #[error("checkpoint for {origin:?} is not signed by a trusted key: {source}")]
    Untrusted {
        /// The origin.
        origin: String,
        /// The signed-note verification failure.
        #[source]
        source: accord_proto::Error,
    },

    /// The old size is larger than the checkpoint's size (c2sp.org/tlog-witness: "400 Bad
    /// Request").
    #[error("old size {old_size} is larger than the checkpoint size {size}")]
    OldSizeTooLarge {
        /// The request's old size.
        old_size: u64,
        /// The checkpoint's size.
        size: u64,
    },

    /// The old size is not the size of the latest checkpoint the witness co-signed for the origin
    /// (c2sp.org/tlog-witness: "409 Conflict", with the held size as the body).
    #[error("old size {old_size} is not the size {held} this witness holds")]
    SizeMismatch {
        /// The request's old size.
        old_size: u64,
        /// The size the witness holds (0 if it never co-signed for the origin).
        held: u64,
    },

    /// The checkpoint is not consistent with the held one: the consistency proof does not verify,
    /// the same size has another root, a proof was sent from size 0, or a size-0 checkpoint does
    /// not have the empty root (c2sp.org/tlog-witness: "422 Unprocessable Entity").
    #[error("checkpoint is inconsistent with the held checkpoint: {reason}")]
    Inconsistent {
        /// Why.
        reason: String,
    },

    /// An admission limit was reached (see [`crate::witness::Limits`]).
    #[error("too many requests in flight ({scope:?} limit)")]
    Overloaded {
        /// Which limit.
        scope: LimitScope,
    },

    /// An admin call without a valid bearer token.
    #[error("missing or invalid admin bearer token")]
    Unauthenticated,

    /// The request needs something this witness is not configured for (sign-subtree needs an
    /// ML-DSA-44 key: the Ed25519 cosignature format cannot sign subtrees).
    #[error("not supported by this witness: {reason}")]
    Unsupported {
        /// Why.
        reason: &'static str,
    },

    /// An admin call named an invalid log (origin or verifier keys); `field` is the request field.
    #[error("invalid log: {field}: {reason}")]
    InvalidLog {
        /// The offending field, e.g. `log.vkeys[1]`.
        field: String,
        /// Why.
        reason: String,
    },

    /// The configuration is invalid; `field` names the offending field (e.g. `grpc.listen`).
    #[error("config: {field}: {reason}")]
    Config {
        /// The field.
        field: String,
        /// Why.
        reason: String,
    },

    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },

    /// TLS material could not be generated or loaded.
    #[error("tls: {0}")]
    Tls(String),

    /// RocksDB failed.
    #[error("storage: {0}")]
    Storage(#[from] rocksdb::Error),

    /// A stored record does not decode; the data directory is damaged.
    #[error("corrupt state for {key:?}: {reason}")]
    CorruptState {
        /// The RocksDB key.
        key: String,
        /// Why it does not decode.
        reason: &'static str,
    },

    /// A listener or server failed.
    #[error("transport: {0}")]
    Transport(String),

    /// A bug: an invariant did not hold (e.g. a task panicked).
    #[error("internal: {0}")]
    Internal(String),
}

impl Error {
    pub(crate) fn malformed(reason: impl Into<String>) -> Error {
        Error::Malformed {
            reason: reason.into(),
        }
    }

    pub(crate) fn config(field: impl Into<String>, reason: impl std::fmt::Display) -> Error {
        Error::Config {
            field: field.into(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether the error is the server's fault (storage, bugs), not the caller's.
    pub fn is_internal(&self) -> bool {
        matches!(
            self,
            Error::Config { .. }
                | Error::Io { .. }
                | Error::Tls(_)
                | Error::Storage(_)
                | Error::CorruptState { .. }
                | Error::Transport(_)
                | Error::Internal(_)
        )
    }

    /// The HTTP status of this error (c2sp.org/tlog-witness, "add-checkpoint").
    pub fn http_status(&self) -> StatusCode {
        match self {
            Error::Malformed { .. } | Error::OldSizeTooLarge { .. } | Error::InvalidLog { .. } => {
                StatusCode::BAD_REQUEST
            }
            Error::UnknownOrigin { .. } => StatusCode::NOT_FOUND,
            Error::Untrusted { .. } => StatusCode::FORBIDDEN,
            Error::SizeMismatch { .. } => StatusCode::CONFLICT,
            Error::Inconsistent { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Error::Overloaded {
                scope: LimitScope::Origin,
            } => StatusCode::TOO_MANY_REQUESTS,
            Error::Overloaded {
                scope: LimitScope::Global,
            } => StatusCode::SERVICE_UNAVAILABLE,
            Error::Unauthenticated => StatusCode::UNAUTHORIZED,
            Error::Unsupported { .. } => StatusCode::NOT_IMPLEMENTED,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message a client may see: internal errors carry no detail.
    fn client_message(&self) -> String {
        if self.is_internal() {
            "internal error".to_owned()
        } else {
            self.to_string()
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> tonic::Status {
        use tonic::Code;
        let code = match &e {
            Error::Malformed { .. } | Error::OldSizeTooLarge { .. } | Error::InvalidLog { .. } => {
                Code::InvalidArgument
            }
            Error::UnknownOrigin { .. } => Code::NotFound,
            Error::Untrusted { .. } => Code::PermissionDenied,
            Error::SizeMismatch { .. } => Code::Aborted,
            Error::Inconsistent { .. } => Code::FailedPrecondition,
            Error::Overloaded { .. } => Code::ResourceExhausted,
            Error::Unauthenticated => Code::Unauthenticated,
            Error::Unsupported { .. } => Code::Unimplemented,
            _ => Code::Internal,
        };
        if e.is_internal() {
            tracing::error!(error = %e, "internal error");
        }
        let mut status = tonic::Status::new(code, e.client_message());
        if let Error::SizeMismatch { held, .. } = e {
            // A decimal is always valid ASCII metadata.
            if let Ok(v) = held.to_string().parse() {
                status.metadata_mut().insert(TLOG_SIZE_METADATA, v);
            }
        }
        status
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.http_status();
        if self.is_internal() {
            tracing::error!(error = %self, "internal error");
        }
        match self {
            // c2sp.org/tlog-witness: "The response body MUST consist of the tree size of the
            // latest cosigned checkpoint in decimal, followed by a newline ... Content-Type of
            // text/x.tlog.size."
            Error::SizeMismatch { held, .. } => (
                status,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(TLOG_SIZE_CONTENT_TYPE),
                )],
                format!("{held}\n"),
            )
                .into_response(),
            Error::Overloaded { .. } => (
                status,
                [(header::RETRY_AFTER, HeaderValue::from_static("1"))],
                format!("{}\n", self.client_message()),
            )
                .into_response(),
            other => (
                status,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                )],
                format!("{}\n", other.client_message()),
            )
                .into_response(),
        }
    }
}
