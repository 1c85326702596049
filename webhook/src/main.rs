//! The `probelint-webhook` binary: reads its arguments and runs the webhook
//! ([`probelint_webhook::run`]).

use clap::Parser;
use probelint_webhook::{Config, LogFormat};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Kubernetes admission webhook for GPU model-serving probes.
///
/// Serves POST /validate (deny on error findings), /validate/warn (warnings only) and /mutate
/// (JSON Patch with safe fixes) over TLS, plus /livez and /readyz; Prometheus /metrics on a
/// separate plain-HTTP port.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Args {
    /// Address of the TLS port (reviews, /livez, /readyz).
    #[arg(long, default_value = "0.0.0.0:8443", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// Address of the plain-HTTP port (/metrics, /livez, /readyz).
    #[arg(long, default_value = "0.0.0.0:9090", value_name = "ADDR:PORT")]
    metrics_listen: SocketAddr,
    /// PEM certificate chain of the TLS port; reloaded when it changes.
    #[arg(long, value_name = "FILE")]
    tls_cert: PathBuf,
    /// PEM private key of the TLS port; reloaded when it changes.
    #[arg(long, value_name = "FILE")]
    tls_key: PathBuf,
    /// PEM CA bundle: require a client certificate signed by it (the apiserver's).
    #[arg(long, value_name = "FILE")]
    client_ca: Option<PathBuf>,
    /// Policy file (the format of the CLI's .probelint.yaml); reloaded when it changes. Without
    /// it the built-in policy applies.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The username of an operator whose objects (with a controller ownerReference) are a
    /// controller's, like those of the built-in controllers: not refused, not mutated when not
    /// Pods. Repeat it, or separate names with commas, e.g.
    /// `system:serviceaccount:kserve:kserve-controller-manager`. Find an operator's with
    /// `kubectl get pods -n NAMESPACE -o jsonpath='{..serviceAccountName}'`.
    #[arg(long, value_name = "USERNAME", value_delimiter = ',')]
    controller_service_account: Vec<String>,
    /// `LABEL=true` on an object takes it out of review, where the policy allows an object to
    /// exempt itself (`allowAnnotationExemptions`); each such review is logged and counted with
    /// who sent it. Otherwise the object is judged, with a warning that the label is not honoured.
    #[arg(long, value_name = "LABEL", default_value = probelint_webhook::review::OPT_OUT_LABEL)]
    object_opt_out_label: String,
    /// Log format. `RUST_LOG` sets the level (default `info`).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    probelint_webhook::run(Config {
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        client_ca: args.client_ca,
        policy: args.policy,
        controller_service_accounts: args.controller_service_account,
        object_opt_out_label: args.object_opt_out_label,
        log_format: args.log_format,
    })
}
