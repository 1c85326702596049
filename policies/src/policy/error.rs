//! The error a policy file can cause, shared by the file, its custom rules and its operator
//! defaults.

/// A problem in a policy file. `Display` says where and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The YAML could not be read as a policy (syntax, unknown key, wrong type).
    #[error("{0}")]
    Parse(String),
    /// The YAML was well-formed but a value makes no sense.
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
}

impl PolicyError {
    pub(crate) fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        PolicyError::Invalid {
            key: key.into(),
            message: message.into(),
        }
    }
}
