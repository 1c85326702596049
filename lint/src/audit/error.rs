//! Why `probelint audit` audited nothing: no client configuration, an unreachable cluster,
//! rejected credentials, or the run's deadline. Each variant displays as the sentence a user
//! reads after `probelint: error: `. (A kind that cannot be listed is not one of these: it is
//! reported in the audit, and the rest is audited.)

use super::chain;
use kube::config::{InClusterError, KubeconfigError};
use std::path::PathBuf;
use std::time::Duration;

/// Why an audit could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The async runtime the Kubernetes client runs on could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// The whole run took longer than `--deadline`.
    #[error(
        "the audit did not finish within --deadline ({} s, the whole run's limit): the \
         apiserver answers too slowly or without end; audit one namespace at a time \
         (-n), with a --selector, or with a longer --deadline",
        .0.as_secs()
    )]
    Deadline(Duration),
    /// No `--kubeconfig`, no `KUBECONFIG`, no `~/.kube/config`, and not in a pod.
    #[error(
        "no kubeconfig: --kubeconfig is not given, KUBECONFIG is not set, \
         ~/.kube/config does not exist, and this is not a pod with a service account \
         (KUBERNETES_SERVICE_HOST is not set); pass --kubeconfig FILE or set KUBECONFIG"
    )]
    NoKubeconfig,
    /// The kubeconfig file (`--kubeconfig` or `~/.kube/config`) cannot be read or parsed.
    #[error("cannot read kubeconfig {}: {}", path.display(), chain(error))]
    ReadKubeconfig {
        path: PathBuf,
        error: KubeconfigError,
    },
    /// The kubeconfig file was read, but its context, cluster or user cannot be used.
    #[error("kubeconfig {}: {}", path.display(), chain(error))]
    Kubeconfig {
        path: PathBuf,
        error: KubeconfigError,
    },
    /// A file `KUBECONFIG` names cannot be read or parsed.
    #[error("cannot read KUBECONFIG={paths}: {}", chain(error))]
    ReadKubeconfigEnv {
        paths: String,
        error: KubeconfigError,
    },
    /// `KUBECONFIG` is set, but none of its paths is a file that can be read.
    #[error("KUBECONFIG={paths} names no readable file")]
    KubeconfigEnvEmpty { paths: String },
    /// The files `KUBECONFIG` names were read, but their context, cluster or user cannot be
    /// used.
    #[error("KUBECONFIG={paths}: {}", chain(error))]
    KubeconfigEnv {
        paths: String,
        error: KubeconfigError,
    },
    /// `--context` in a pod without a kubeconfig: the service account has no contexts.
    #[error(
        "--context {context} needs a kubeconfig, and there is none (in a pod, \
         probelint uses the pod's service account)"
    )]
    ContextWithoutKubeconfig { context: String },
    /// The pod's service account (the in-cluster configuration) cannot be used.
    #[error(
        "cannot use the pod's service account (in-cluster config): {}",
        chain(.0)
    )]
    InCluster(InClusterError),
    /// The client for the cluster at `server` cannot be built from the configuration.
    #[error("cannot build a client for {server}: {}", chain(error))]
    Client { server: String, error: kube::Error },
    /// The apiserver answered 401 to a request: the credentials are no longer accepted.
    #[error(
        "the cluster at {server} rejected the credentials (401 Unauthorized: {message}); the \
         token or client certificate has expired or is not accepted: refresh the \
         kubeconfig (e.g. your cloud's `get-credentials`) and run again"
    )]
    Unauthorized { server: String, message: String },
    /// No answer from the cluster at `server`: `what` is what happened (the client's error
    /// chain, or that `--request-timeout` passed).
    #[error(
        "cannot reach the cluster at {server}: {what} (is the cluster up, and is this the \
         right context? `kubectl cluster-info` shows what kubectl reaches)"
    )]
    Unreachable { server: String, what: String },
    /// Discovery (`/api`, `/apis`) is not served at `server` (404).
    #[error("{server} serves no API discovery (/api, /apis): is it a Kubernetes apiserver?")]
    NoDiscovery { server: String },
    /// Discovery failed in a way that would only skip one kind of a list (forbidden, an
    /// apiserver error, an unreadable or oversized answer): without discovery nothing can be
    /// listed. `message` says what discovery got.
    #[error("{message}")]
    Discovery { message: String },
}

#[cfg(test)]
mod tests {
    use super::AuditError;
    use std::time::Duration;

    /// The sentences users (and `tests/audit.rs`) read, word for word.
    #[test]
    fn the_messages_say_what_happened_and_what_to_do() {
        let server = "https://127.0.0.1:6443".to_owned();
        assert_eq!(
            AuditError::Unauthorized {
                server: server.clone(),
                message: "Unauthorized".into()
            }
            .to_string(),
            "the cluster at https://127.0.0.1:6443 rejected the credentials (401 Unauthorized: \
             Unauthorized); the token or client certificate has expired or is not accepted: \
             refresh the kubeconfig (e.g. your cloud's `get-credentials`) and run again"
        );
        assert_eq!(
            AuditError::Deadline(Duration::from_secs(60)).to_string(),
            "the audit did not finish within --deadline (60 s, the whole run's limit): the \
             apiserver answers too slowly or without end; audit one namespace at a time (-n), \
             with a --selector, or with a longer --deadline"
        );
        assert_eq!(
            AuditError::NoDiscovery { server }.to_string(),
            "https://127.0.0.1:6443 serves no API discovery (/api, /apis): is it a Kubernetes \
             apiserver?"
        );
        assert_eq!(
            AuditError::ContextWithoutKubeconfig {
                context: "prod".into()
            }
            .to_string(),
            "--context prod needs a kubeconfig, and there is none (in a pod, probelint uses the \
             pod's service account)"
        );
    }
}
