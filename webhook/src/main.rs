//! The `probelint-webhook` binary: reads its arguments ([`probelint_webhook::Config`]) and runs
//! the webhook ([`probelint_webhook::run`]).

use clap::Parser as _;
use probelint_webhook::Config;
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    probelint_webhook::run(Config::parse())
}
