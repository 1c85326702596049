//! `echo-server --listen ADDR --tls-cert FILE --tls-key FILE`: the webhook's limit on a stock
//! stack: axum over axum-server with rustls and ring (TLS 1.3/1.2, ALPN h2 and http/1.1, the
//! webhook's rustls settings), a multi-threaded tokio runtime; the echo handler
//! ([`probelint_bench::echo`]) and nothing else. The webhook itself serves connections through
//! its own listener (connection caps, timeouts, memory accounting): `echo-listener` is the same
//! echo on that listener, and this one the yardstick the benchmarks used before it. It uses the
//! webhook's allocator too (mimalloc), so that the comparison is of the work, not of the
//! allocators.

use axum_server::tls_rustls::RustlsConfig;
use clap::Parser;
use probelint_bench::echo::Args;
use std::process::ExitCode;

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
        let app = probelint_bench::echo::router();
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
