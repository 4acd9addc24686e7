//! The crate's one error type. Each daemon maps it into its own error enum at the call site
//! (a read failure stays an I/O error, the rest are TLS material errors).

use std::path::PathBuf;

/// Everything that can go wrong in the shared plumbing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },

    /// A PEM file holds no usable certificate or key.
    #[error("{}: {reason}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why it was rejected (short; never the file's content).
        reason: String,
    },

    /// rcgen could not generate a key or certificate.
    #[error("certificate generation: {0}")]
    Certificate(String),
}

impl Error {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
