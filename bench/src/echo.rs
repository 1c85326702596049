//! The echo servers' one handler, the same on both stacks (`echo-server`: axum-server;
//! `echo-listener`: the webhook's own listener): every POST body to `/echo`, `/validate` or
//! `/mutate` is parsed as JSON and answered with an allowed AdmissionReview for its uid
//! ([`review::echo_response`]). Nothing else.

use crate::review;
use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Both echo servers' command line: `--listen ADDR --tls-cert FILE --tls-key FILE`.
#[derive(clap::Parser)]
pub struct Args {
    #[arg(long)]
    pub listen: SocketAddr,
    #[arg(long)]
    pub tls_cert: PathBuf,
    #[arg(long)]
    pub tls_key: PathBuf,
}

async fn echo(body: Bytes) -> Response {
    match review::echo_response(&body) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(message) => (StatusCode::BAD_REQUEST, message).into_response(),
    }
}

/// The echo's routes.
pub fn router() -> Router {
    Router::new()
        .route("/echo", post(echo))
        .route("/validate", post(echo))
        .route("/mutate", post(echo))
}
