//! `echo-server --listen ADDR --tls-cert FILE --tls-key FILE`: the webhook's limit. The same
//! stack as `probelint-webhook` (axum over axum-server with rustls and ring, TLS 1.3/1.2, ALPN
//! h2 and http/1.1, a multi-threaded tokio runtime); every POST body is parsed as JSON and
//! answered with an allowed AdmissionReview for its uid. Nothing else. It uses the webhook's
//! allocator too (mimalloc), so that the comparison is of the work, not of the allocators.

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    listen: SocketAddr,
    #[arg(long)]
    tls_cert: PathBuf,
    #[arg(long)]
    tls_key: PathBuf,
}

async fn echo(body: Bytes) -> Response {
    match probelint_bench::review::echo_response(&body) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(message) => (StatusCode::BAD_REQUEST, message).into_response(),
    }
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = match (std::fs::read(&args.tls_cert), std::fs::read(&args.tls_key)) {
        (Ok(cert), Ok(key)) => probelint_bench::tls::server_config(&cert, &key),
        (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
    };
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            eprintln!("echo-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("echo-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let app = Router::new()
            .route("/echo", post(echo))
            .route("/validate", post(echo))
            .route("/mutate", post(echo));
        let server = axum_server::bind_rustls(args.listen, RustlsConfig::from_config(config))
            .serve(app.into_make_service());
        tokio::select! {
            r = server => r,
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo-server: {e}");
            ExitCode::FAILURE
        }
    }
}
