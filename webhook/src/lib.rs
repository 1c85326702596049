//! `probelint-webhook`: the probelint rules as a Kubernetes validating and mutating admission
//! webhook, so that a GPU pod with probes that would restart-storm or take traffic too early is
//! stopped (or fixed) at `kubectl apply`, whoever or whatever created it.
//!
//! This crate only adds AdmissionReview, TLS, reloading and metrics around the engine
//! (`probelint-policies`); everything that decides lives there. The binary (`main.rs`) parses
//! its arguments into a [`Config`] and calls [`run`].

pub mod admission;
mod budget;
pub mod cost;
mod listen;
mod logtext;
mod messages;
mod metrics;
mod reload;
pub mod review;
mod server;
mod state;

/// The longest warning the webhook sends (kubectl prints each on one line).
pub use messages::MAX_WARNING_CHARS;
/// The most memory one review may take ([`cost::Shape::review_bytes`]); past it, 413.
pub use server::MAX_REVIEW_MEMORY;
#[cfg(test)]
mod testing;

use clap::{Parser, ValueEnum};
use probelint_policies::Policy;
use reload::{Reloader, StartupError, TlsFiles, WatchError};
use state::AppState;
use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// What the webhook serves, and from which files: the binary's command line
/// (`Config::parse()`). Each field's doc comment is its `--help` text; `--help` opens with the
/// package's description, not with this comment.
///
/// The webhook serves POST /validate (deny on error findings), /validate/warn (warnings only)
/// and /mutate (JSON Patch with safe fixes) over TLS, plus /livez and /readyz; Prometheus
/// /metrics on a separate plain-HTTP port.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Config {
    /// Address of the TLS port (reviews, /livez, /readyz).
    #[arg(long, default_value = "0.0.0.0:8443", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Address of the plain-HTTP port (/metrics, /livez, /readyz).
    #[arg(long, default_value = "0.0.0.0:9090", value_name = "ADDR:PORT")]
    pub metrics_listen: SocketAddr,
    /// PEM certificate chain of the TLS port; reloaded when it changes.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: PathBuf,
    /// PEM private key of the TLS port; reloaded when it changes.
    #[arg(long, value_name = "FILE")]
    pub tls_key: PathBuf,
    /// PEM CA bundle: require a client certificate signed by it (the apiserver's).
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// Policy file (the format of the CLI's .probelint.yaml); reloaded when it changes. Without
    /// it the built-in policy applies.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// The username of an operator whose objects (with a controller ownerReference) are a
    /// controller's, like those of the built-in controllers: not refused, not mutated when not
    /// Pods. Repeat it, or separate names with commas, e.g.
    /// `system:serviceaccount:kserve:kserve-controller-manager`. Find an operator's with
    /// `kubectl get pods -n NAMESPACE -o jsonpath='{..serviceAccountName}'`.
    #[arg(
        long = "controller-service-account",
        value_name = "USERNAME",
        value_delimiter = ','
    )]
    pub controller_service_accounts: Vec<String>,
    /// `LABEL=true` on an object takes it out of review, where the policy allows an object to
    /// exempt itself (`allowAnnotationExemptions`); each such review is logged and counted with
    /// who sent it. Otherwise the object is judged, with a warning that the label is not honoured.
    #[arg(long, value_name = "LABEL", default_value = review::OPT_OUT_LABEL)]
    pub object_opt_out_label: String,
    /// Log format. `RUST_LOG` sets the level (default `info`).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only for a person at a terminal: a log collector would store the escape codes
    // (and writing them was about a third of the cost of a review's log line in a profile).
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stdout().is_terminal());
    match format {
        LogFormat::Text => {
            logtext::escape_request_text();
            builder.init();
        }
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}

/// Raises the soft limit on open files to the hard one and returns the limit now in force.
/// containerd starts containers with a soft limit of 1024 (and a hard one far above): every
/// connection, on either port, is a file descriptor, and at 1024 a few hundred idle
/// connections were enough to lock reviewers out.
fn raise_fd_limit() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let before = getrlimit(Resource::Nofile);
    let (soft, hard) = (before.current, before.maximum);
    let show = |v: Option<u64>| v.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
    if soft == hard {
        tracing::info!(soft = %show(soft), hard = %show(hard), "open file limit");
        return soft.unwrap_or(u64::MAX);
    }
    match setrlimit(
        Resource::Nofile,
        Rlimit {
            current: hard,
            maximum: hard,
        },
    ) {
        Ok(()) => {
            tracing::info!(
                soft_before = %show(soft),
                soft = %show(hard),
                hard = %show(hard),
                "raised the open file limit to its hard limit"
            );
            hard.unwrap_or(u64::MAX)
        }
        Err(error) => {
            tracing::warn!(
                soft = %show(soft),
                hard = %show(hard),
                %error,
                "cannot raise the open file limit; connection caps follow the soft limit"
            );
            soft.unwrap_or(u64::MAX)
        }
    }
}

/// Threads that evaluate reviews over [`server::INLINE_BODY_LIMIT`]. The review memory budget
/// decides how many run at once; more threads than cores would not finish them sooner.
const MAX_BLOCKING_THREADS: usize = 8;
/// How long an evaluation thread waits for more work before it exits. mimalloc keeps the pages
/// a thread freed in that thread's heap until the thread allocates again or exits: an idle
/// thread that had evaluated a 7 MiB review kept up to 200 MiB resident (tokio's default is
/// 10 s), where a second later the memory is back with the system.
const BLOCKING_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(1);

/// Serves until SIGTERM: logging, the open file limit, the runtime, then both ports.
pub fn run(config: Config) -> ExitCode {
    init_logging(config.log_format);
    on_runtime("probelint-webhook", |fd_limit| serve(config, fd_limit))
}

/// Serves `router` alone, on one TLS port at `listen`, the way [`run`] serves the review port:
/// the same open file limit, runtime, rustls configuration (ring, TLS 1.3 and 1.2, ALPN h2 and
/// http/1.1, no client certificates), connection cap, timeouts, accounting of every answer
/// against the review memory, and drain on SIGTERM. Nothing of the webhook's own: no policy,
/// no review guards, no metrics port, no reloading of the certificate. Text logs (`RUST_LOG`,
/// default `info`) go to stdout. For the benchmarks' echo (`bench/src/bin/echo-listener.rs`):
/// a baseline with the webhook's transport and none of its judging.
pub fn run_router(
    listen: SocketAddr,
    tls_cert: PathBuf,
    tls_key: PathBuf,
    router: axum::Router,
) -> ExitCode {
    init_logging(LogFormat::Text);
    on_runtime("the router", |fd_limit| async move {
        let builtin = Policy::builtin().map_err(|e| format!("built-in policy: {e}"))?;
        let state = Arc::new(AppState::with_settings(
            builtin,
            review::Settings::default(),
        ));
        let files = TlsFiles {
            cert: tls_cert,
            key: tls_key,
            client_ca: None,
        };
        // Loaded as the webhook loads it; the reloader itself is not started.
        let (_, tls) = Reloader::load(files, None, state.clone()).map_err(|e| e.to_string())?;
        let caps = server::connection_caps(fd_limit);
        server::serve_router(listen, router, None, tls, state, caps)
            .await
            .map_err(|e| format!("server: {e}"))
    })
}

/// Raises the open file limit, installs ring as the crypto provider, builds the runtime and
/// runs `serve` (given the open file limit) on it; `name` says what failed in the error line.
fn on_runtime<F, E>(name: &str, serve: impl FnOnce(u64) -> F) -> ExitCode
where
    F: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let fd_limit = raise_fd_limit();
    // Every rustls configuration names ring explicitly; installing it as the process default as
    // well means no code path can ever ask rustls to choose between providers.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(fd_limit)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "{name} cannot run");
            ExitCode::FAILURE
        }
    }
}

/// Why the webhook cannot serve: logged after `probelint-webhook cannot run`, exit status 1.
#[derive(Debug, thiserror::Error)]
enum ServeError {
    /// The certificate, its key, the client CA or the policy cannot be loaded.
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// The files cannot be watched for changes.
    #[error(transparent)]
    Watch(#[from] WatchError),
    /// A port cannot be bound (or its address read).
    #[error("server: {0}")]
    Server(std::io::Error),
}

async fn serve(config: Config, fd_limit: u64) -> Result<(), ServeError> {
    let builtin = Policy::builtin().map_err(StartupError::BuiltinPolicy)?;
    let controllers = review::Controllers::with_operators(config.controller_service_accounts);
    let operators: Vec<&str> = controllers.operators().collect();
    tracing::info!(
        operators = ?operators,
        "besides the built-in controllers, these operators' objects are a controller's"
    );
    let settings = review::Settings {
        controllers,
        opt_out_label: config.object_opt_out_label,
    };
    let state = Arc::new(AppState::with_settings(builtin, settings));
    let files = TlsFiles {
        cert: config.tls_cert,
        key: config.tls_key,
        client_ca: config.client_ca,
    };
    let client_auth = files.client_ca.is_some();
    let (reloader, tls) = Reloader::load(files, config.policy, state.clone())?;
    reloader.spawn()?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        policy_version = %state.policy().version,
        client_auth,
        "probelint-webhook starting"
    );
    let caps = server::connection_caps(fd_limit);
    server::serve(config.listen, config.metrics_listen, tls, state, caps)
        .await
        .map_err(ServeError::Server)
}

#[cfg(test)]
mod tests {
    use super::Config;
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_is_consistent() {
        Config::command().debug_assert();
    }
}
