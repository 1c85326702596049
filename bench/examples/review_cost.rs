//! What answering one review costs in the webhook's handler, without the network:
//! `cargo run --release -p probelint-bench --example review_cost -- WHAT ITERATIONS`.
//!
//! WHAT is `validate`, `mutate` or `echo` (the echo server's handler: parse the body, answer
//! allowed); each iteration answers the bench's three review bodies in turn, as
//! `bench-run webhook` sends them, and encodes the answer. Meant to be run under
//! `valgrind --tool=cachegrind` at two iteration counts: the difference, divided by the
//! difference of the counts, is the instructions one round of three reviews costs, free of
//! start-up and of the machine's load (`bench/profile-notes.md`, "Webhook").

use probelint_bench::review::{bodies, echo_response};
use probelint_policies::Policy;
use probelint_webhook::review::{Mode, Settings, admit_with};
use std::hint::black_box;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_default();
    let iterations: usize = args
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or("usage: review_cost validate|mutate|echo ITERATIONS")?;
    let mode = match what.as_str() {
        "validate" => Some(Mode::Validate),
        "mutate" => Some(Mode::Mutate),
        "echo" => None,
        other => {
            return Err(format!(
                "unknown handler {other:?}: validate, mutate or echo"
            ));
        }
    };
    let policy = Policy::builtin().map_err(|e| e.to_string())?;
    let settings = Settings::default();
    let bodies = bodies();
    let mut answered = 0usize;
    for _ in 0..iterations {
        for body in &bodies {
            let json = match mode {
                Some(mode) => admit_with(black_box(&body.json), mode, &policy, &settings)
                    .map_err(|e| e.to_string())?
                    .review
                    .to_json(),
                None => echo_response(black_box(&body.json))?,
            };
            answered += black_box(json).len();
        }
    }
    println!("{answered} bytes answered");
    Ok(())
}
