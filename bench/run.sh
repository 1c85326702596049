#!/usr/bin/env bash
# probelint benchmarks: the linter and the webhook, each side by side with its own limit and a
# peer, on this machine, in one run. Prints one table and writes docs/benchmarks.md.
#
#   bench/run.sh                 # everything (~10 minutes on 2 cores; more the first time,
#                                # while Checkov's venv is made)
#   BENCH_SKIP_CHECKOV=1 bench/run.sh
#
# Every figure is a ratio of two things measured in this run, interleaved, medians of several
# runs. Everything runs on loopback; the only network use is `pip install checkov` into a venv
# (cached in target/bench-venv), which is skipped, and reported as such, if it fails.
#
# Settings (environment): BENCH_SEED (1), BENCH_RUNS (5 runs per corpus size),
# BENCH_SMALL_RUNS (100 single-file runs), BENCH_WEBHOOK_REPS (3), BENCH_CHECKOV_RUNS (3),
# BENCH_CHECKOV_2000 (auto: also 2,000 files when the measurements so far leave room within
# BENCH_BUDGET_S, 600 s, not counting the build),
# BENCH_SKIP_CHECKOV (0), CHECKOV_VERSION (3.3.30), BENCH_VENV, BENCH_MARKDOWN
# (docs/benchmarks.md).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
SEED=${BENCH_SEED:-1}
RUNS=${BENCH_RUNS:-5}
SMALL_RUNS=${BENCH_SMALL_RUNS:-100}
WEBHOOK_REPS=${BENCH_WEBHOOK_REPS:-3}
CHECKOV_RUNS=${BENCH_CHECKOV_RUNS:-3}
CHECKOV_2000=${BENCH_CHECKOV_2000:-auto}
SKIP_CHECKOV=${BENCH_SKIP_CHECKOV:-0}
CHECKOV_VERSION=${CHECKOV_VERSION:-3.3.30}
BUDGET_S=${BENCH_BUDGET_S:-600}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
VENV=${BENCH_VENV:-$TARGET_DIR/bench-venv}
MARKDOWN=${BENCH_MARKDOWN:-$ROOT/docs/benchmarks.md}
BIN=$TARGET_DIR/release

WORK=$(mktemp -d "${TMPDIR:-/tmp}/probelint-bench.XXXXXX")
cleanup() {
    # The servers are children of bench-run, which kills them when it ends and which they do
    # not outlive (PR_SET_PDEATHSIG); this only removes files.
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
RESULTS=$WORK/results
CORPUS=$WORK/corpus
mkdir -p "$RESULTS" "$CORPUS"
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }
step() { printf '\n== [%4ss] %s\n' "$(elapsed)" "$*" >&2; }

step "build (release)"
cargo build --release -p probelint -p probelint-webhook -p probelint-bench >&2

BUILD_S=$(elapsed)
MEASURE_START=$(date +%s)
measured() { echo $(($(date +%s) - MEASURE_START)); }

step "engine microbenchmarks (criterion)"
# Short windows: these are nanosecond loops; criterion's median is stable well within them.
CRITERION_HOME=$WORK/criterion timeout 300 \
    cargo bench -p probelint-bench --bench engine -- \
    --warm-up-time 1 --measurement-time 3 --noplot >&2

step "corpus (seed $SEED)"
for n in 100 1000 2000 10000; do
    "$BIN/gen-corpus" --files "$n" --seed "$SEED" --out "$CORPUS/n$n" >&2
done
# The pre-commit case: one ~2 KB GPU Deployment with findings.
SMALL=$(find "$CORPUS/n100" -name '*-gpu-deployment-no-startup.yaml' | sort | head -n 1)
[ -n "$SMALL" ] || { echo "no small GPU Deployment in the corpus" >&2; exit 1; }

step "linter: full lint vs parse-only, 100 / 1,000 / 10,000 files; one file vs --version"
timeout 600 "$BIN/bench-run" lint \
    --probelint "$BIN/probelint" --parse-only "$BIN/parse-only" \
    --corpus "$CORPUS/n100" "$CORPUS/n1000" "$CORPUS/n10000" \
    --runs "$RUNS" --small "$SMALL" --small-runs "$SMALL_RUNS" \
    --out "$RESULTS/lint.json"

step "YAML parsers side by side (one thread): 1,000 generated files, then the real-world corpus"
# Not a ratio with a target: it says where parse-only's time goes (the parser's events against
# the whole loader) and what another parser would change.
{
    "$BIN/parse-candidates" "$CORPUS/n1000"
    echo
    "$BIN/parse-candidates" tests/corpus
} | tee "$WORK/parsers.txt" >&2

step "linter: --fix and human output on one file of 500 / 1,000 / 2,000 / 8,000 fixable containers"
timeout 300 "$BIN/bench-run" fix --probelint "$BIN/probelint" \
    --containers 500,1000,2000,8000 --runs 3 --out "$RESULTS/fix.json"

step "probelint findings on 1,000 files (JSON)"
rc=0
"$BIN/probelint" "$CORPUS/n1000" --format json --output "$WORK/probelint-1000.json" || rc=$?
[ "$rc" -le 1 ] || { echo "probelint failed with exit code $rc" >&2; exit 1; }

CHECKOV_JSON=()
if [ "$SKIP_CHECKOV" = 1 ]; then
    step "Checkov: skipped (BENCH_SKIP_CHECKOV=1)"
else
    step "Checkov $CHECKOV_VERSION (venv $VENV)"
    have=$("$VENV/bin/checkov" --version 2>/dev/null || true)
    if [ "$have" != "$CHECKOV_VERSION" ]; then
        rm -rf "$VENV"
        if ! { python3 -m venv "$VENV" >&2 &&
            timeout 600 "$VENV/bin/pip" install --quiet --disable-pip-version-check \
                "checkov==$CHECKOV_VERSION" >&2; }; then
            echo "could not install Checkov; its rows are left out" >&2
            rm -rf "$VENV"
        fi
    fi
    if [ -x "$VENV/bin/checkov" ]; then
        for n in 1000 2000; do
            if [ "$n" = 2000 ]; then
                # 2,000 files only when the run can afford one more Checkov run (~1 min) and
                # still leave the webhook its ~4 minutes.
                case "$CHECKOV_2000" in
                    0 | no) continue ;;
                    auto) [ "$(measured)" -lt $((BUDGET_S - 360)) ] || {
                        echo "skipping Checkov at 2,000 files: $(measured) s spent measuring" >&2
                        continue
                    } ;;
                esac
                runs=1
            else
                runs=$CHECKOV_RUNS
            fi
            # --skip-download: no calls to Bridgecrew/Prisma; the two probe checks only. After
            # each Checkov run, probelint on the same files $RUNS times (side by side).
            if ! timeout 900 "$BIN/bench-run" time --name "checkov-$n" --runs "$runs" --ok 0,1 \
                --budget-s 240 --stdout "$WORK/checkov-$n.json" --out "$RESULTS/checkov-$n.json" \
                --paired-program "$BIN/probelint" --paired-arg "$CORPUS/n$n" \
                --paired-runs "$RUNS" --paired-ok 0,1 \
                -- "$VENV/bin/checkov" -d "$CORPUS/n$n" --framework kubernetes \
                --check CKV_K8S_8,CKV_K8S_9 --compact --skip-download --output json; then
                echo "Checkov at $n files failed; its row is left out" >&2
                rm -f "$RESULTS/checkov-$n.json" "$WORK/checkov-$n.json"
            fi
        done
        if [ -s "$WORK/checkov-1000.json" ]; then
            CHECKOV_JSON=(--checkov-json "$WORK/checkov-1000.json")
        fi
    fi
fi
"$BIN/bench-run" findings --probelint-json "$WORK/probelint-1000.json" "${CHECKOV_JSON[@]}" \
    --corpus "$CORPUS/n1000" --matching tcp-readiness --out "$RESULTS/findings.json"

step "webhook: /validate and /mutate against the two echo servers (HTTPS, loopback)"
# TMPDIR: the run's certificate goes under $WORK, removed whatever happens.
TMPDIR=$WORK timeout 600 "$BIN/bench-run" webhook \
    --webhook "$BIN/probelint-webhook" --echo "$BIN/echo-server" \
    --echo-listener "$BIN/echo-listener" \
    --reps "$WEBHOOK_REPS" --warmup-s 1 --closed-s 4 --open-s 4 --open-fractions 0.25,0.5,0.75 \
    --connections 16 --open-connections 64 --client-threads 1 \
    --out "$RESULTS/webhook.json"

step "report"
CPU=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || true)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || true)
if [ -n "$COMMIT" ] && [ -n "$(git status --porcelain -- policies lint webhook bench 2>/dev/null)" ]; then
    COMMIT="$COMMIT + uncommitted changes"
fi
NOTES=$WORK/notes.md
{
    cat <<EOF
## What was run

- **Corpus**: \`cargo run --release -p probelint-bench --bin gen-corpus -- --files N --seed $SEED --out DIR\`,
  deterministic synthetic manifests of ~2 KB (GPU Deployments, StatefulSets, LeaderWorkerSets,
  KServe InferenceServices and Jobs, CPU Deployments; good, missing, port-open, too-short and
  no-startup probes; ~1 file in 4 with several documents: a Deployment with its PDB and HPA,
  or with its Service). The file name says what is in it.
- **Linter**: \`probelint DIR\` (human output to /dev/null, as pre-commit runs it) against
  \`parse-only DIR\` (\`bench/src/bin/parse-only.rs\`): the CLI's own discovery, reads and
  rayon-parallel YAML parsing (\`probelint_yaml::load::parse_stream_partial\`), nothing else.
  $RUNS interleaved runs each after a warm-up, median wall time; peak RSS from \`wait4\`.
  µs/file is (lint time − \`probelint --version\` time) / files.
- **Fixes and findings per file**: one Pod with N GPU containers whose readiness probe only
  opens a port (\`probelint_bench::corpus::fixable_pod\`; 2 findings and 2 fixes each, all in
  one document), N = 500, 1,000, 2,000, 8,000: \`probelint --fix --format json FILE\` on a
  fresh copy and \`probelint FILE\` (human output), 3 interleaved rounds, medians, minus
  \`probelint --version\`, per container and per finding.
- **Single file**: \`probelint FILE\` for one $(wc -c <"$SMALL") B GPU Deployment against
  \`probelint --version\`, $SMALL_RUNS interleaved runs each, medians.
- **Checkov** $CHECKOV_VERSION in a venv: \`checkov -d DIR --framework kubernetes --check
  CKV_K8S_8,CKV_K8S_9 --compact --skip-download --output json\`, $CHECKOV_RUNS runs at 1,000
  files (one at 2,000 when time allows), each followed by $RUNS runs of \`probelint DIR\`
  on the same files; medians.
  Findings are counted on the corpus's \`*-tcp-readiness.yaml\` files, whose readiness probe
  only opens a port (with a startup and a liveness probe present).
- **Webhook**: the release \`probelint-webhook\` (built-in policy, default log level, logs to
  /dev/null) against two echo servers, each of which parses the JSON body and answers an
  allowed AdmissionReview (\`bench/src/echo.rs\`), all on loopback with a certificate made for
  the run. The **same-stack echo**, \`echo-listener\` (\`bench/src/bin/echo-listener.rs\`), runs
  on the webhook's own listener through \`probelint_webhook::run_router\`: hyper over
  tokio-rustls (\`webhook/src/listen.rs\`), the same rustls/ring configuration, connection cap,
  timeouts, answer accounting, runtime and open file limit; against it a ratio is the cost of
  judging alone, and the targets are set against it. The **axum echo**, \`echo-server\`
  (\`bench/src/bin/echo-server.rs\`: axum + axum-server + rustls/ring, the yardstick before),
  is kept for context: against it a ratio also holds the webhook's transport, and the
  same-stack echo against the axum echo is that transport's cost alone. The load generator
  (\`bench/src/loadgen.rs\`, hyper + tokio-rustls, HTTP/1.1 keep-alive, one client thread)
  sends three real AdmissionReviews in turn: a GPU Deployment with findings, a clean one and a
  GPU Pod that \`/mutate\` patches. Max throughput: 16 connections in a closed loop, 4 s after
  1 s of warm-up. Latency: fixed rates of 25 %, 50 % (the target's) and 75 % of the
  same-stack echo's max (every server at the same rates), 64 pooled connections, 4 s each
  after 1 s of warm-up, latency from when the request was issued (queueing included). CPU per request: the server process's user + system
  time (\`/proc/PID/stat\`) from when the connections are up to the end of the run, warm-up
  included, over the requests it answered; the load generator's the same way.
  $WEBHOOK_REPS repetitions, each going through the rates and, at each, the four targets (the
  two echoes, /validate and /mutate) in turn; medians.
- **Engine**: criterion (\`bench/benches/engine.rs\`), \`evaluate_one\` on a GPU Deployment
  and \`fix::mutate\` on a GPU Pod, each beside serde_json parsing the same object.

EOF
    cat <<EOF
## YAML parsers side by side

\`parse-candidates DIR\` (\`bench/src/bin/parse-candidates.rs\`) on the same 1,000 generated
files and on \`tests/corpus\` (real-world manifests and the peer tools' examples): our whole
loader (saphyr-parser's events, the tree with every node's location, YAML 1.1 resolution, the
limits), saphyr-parser's event stream alone, rlsp-yaml-parser's event stream and its own loader;
one thread, 9 interleaved rounds, medians. Every file a parser refuses is named.

\`\`\`text
$(cat "$WORK/parsers.txt")
\`\`\`

EOF
    if [ -f "$ROOT/bench/profile-notes.md" ]; then
        cat "$ROOT/bench/profile-notes.md"
    fi
} >"$NOTES"
"$BIN/bench-run" report --results "$RESULTS" --criterion "$WORK/criterion" \
    --markdown "$MARKDOWN" --nproc "$(nproc)" --date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
    --cpu "$CPU" --commit "$COMMIT" --seconds "$(measured) s (after a $BUILD_S s build)" \
    --notes "$NOTES"
step "done"
