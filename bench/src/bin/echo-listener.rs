//! `echo-listener --listen ADDR --tls-cert FILE --tls-key FILE`: the echo of `echo-server`
//! ([`probelint_bench::echo`]: parse the body, answer an allowed AdmissionReview) on the
//! webhook's own stack: its listener (`webhook/src/listen.rs`: hyper over tokio-rustls, the
//! connection cap, the timeouts, answers counted against the review memory), its rustls
//! configuration, runtime and open file limit, through [`probelint_webhook::run_router`]. Set
//! beside `probelint-webhook`, the difference is the judging alone, not the transport. Runs
//! until SIGTERM or Ctrl-C; logs to stdout. The webhook's allocator (mimalloc), as echo-server.

use clap::Parser;
use probelint_bench::echo::Args;
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    probelint_webhook::run_router(
        args.listen,
        args.tls_cert,
        args.tls_key,
        probelint_bench::echo::router(),
    )
}
