#!/usr/bin/env bash
# Soak: the release webhook under continuous HTTPS load on loopback, its certificate rotated
# through the kubelet's `..data` symlink swap, its policy file rewritten (valid and invalid in
# turn), then SIGTERM with the load still running. Prints a report table (and writes it to
# $SOAK_REPORT, default target/soak-report.md) and fails if a request failed before SIGTERM,
# RSS grew more than 10 % after warm-up, a reload was missed, no hostile connection was closed or
# the exit was not clean.
#
#   tests/soak/soak.sh                  # 10 minutes, rotation every 30 s, policy every 45 s
#   SOAK_SECONDS=120 tests/soak/soak.sh
#
# Knobs (environment): SOAK_SECONDS (600), SOAK_ROTATE_SECONDS (30), SOAK_POLICY_SECONDS (45),
# SOAK_WARMUP_SECONDS (duration/10, at most 60), SOAK_BUCKET_SECONDS (60),
# SOAK_KEEPALIVE_CLIENTS (4), SOAK_FRESH_CLIENTS (4: a new TLS connection per review), and the
# hostile clients beside them, each reconnecting when the webhook closes it: SOAK_IDLE_CLIENTS (64),
# SOAK_TRICKLING_CLIENTS (8: a request head a byte at a time), SOAK_ZERO_WINDOW_CLIENTS (4: HTTP/2,
# zero window, 32 streams each); 0 turns a kind off.
# The webhook inherits the environment. It allocates with mimalloc, so glibc's MALLOC_* settings
# no longer change it (see docs/reliability.md, "Memory").
#
# The driver is the `soak` test in webhook/tests/hostile.rs; CI runs its 30-second sibling
# `soak_30_seconds` on every `cargo test --workspace`. Not for CI itself: it takes minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."

export SOAK_SECONDS=${SOAK_SECONDS:-600}
report=${SOAK_REPORT:-target/soak-report.md}
mkdir -p "$(dirname "$report")"
SOAK_REPORT=$(cd "$(dirname "$report")" && pwd)/$(basename "$report")
export SOAK_REPORT

cargo test --release --locked -p probelint-webhook --test hostile --no-run
echo "soak: ${SOAK_SECONDS}s of load; report in $SOAK_REPORT"
cargo test --release --locked -p probelint-webhook --test hostile -- \
    --ignored --exact soak --nocapture --test-threads 1
