#!/usr/bin/env bash
# Runs every cargo-fuzz target (or those named) for a fixed time each.
#
#   fuzz/run.sh                      # 300 s per target
#   fuzz/run.sh 60 yaml_parse        # one target, 60 s
#   fuzz/run.sh 300 yaml_differential  # against Kubernetes' decoder (needs Go; not in the default list)
#   SANITIZER=address fuzz/run.sh    # with ASan (slower; the code is safe Rust, so `none` is
#                                    # the default: panics, overflows, hangs and OOM are caught
#                                    # either way)
#
# Needs `cargo install cargo-fuzz`. On a stable toolchain RUSTC_BOOTSTRAP=1 lets it pass the
# nightly-only flags it needs. Corpora grow in fuzz/corpus/<target> (not committed), seeded from
# fuzz/seeds/<target> and, for the YAML targets, the real corpus in tests/corpus/real.
# Crashes land in fuzz/artifacts/<target>/; turn each into a regression file (see
# docs/reliability.md) before fixing it. Exits non-zero if any target found a crash.
set -uo pipefail
cd "$(dirname "$0")"

seconds=${1:-300}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(yaml_parse engine_json admission_review yaml_fix yaml_patch)
fi
sanitizer=${SANITIZER:-none}
jobs=${FUZZ_JOBS:-1}
real=../tests/corpus/real
export RUSTC_BOOTSTRAP=1

for target in "${targets[@]}"; do
    cargo fuzz build --sanitizer "$sanitizer" "$target" || exit 2
    if [ "$target" = yaml_differential ] && [ -z "${PROBELINT_YAML_REFERENCE:-}" ]; then
        # Kubernetes' decoder, built with Go once per machine (docs/yaml.md).
        PROBELINT_YAML_REFERENCE=$(cargo run -q --manifest-path ../Cargo.toml \
            -p probelint-yaml-reference --bin yaml-reference-path) || exit 2
        export PROBELINT_YAML_REFERENCE
    fi
done

failed=()
for target in "${targets[@]}"; do
    corpus=corpus/$target
    mkdir -p "$corpus" "artifacts/$target"
    extra=(seeds/"$target")
    [ "$target" = yaml_differential ] && extra=(seeds/yaml_parse)
    case $target in
        yaml_parse | yaml_fix | yaml_differential)
            [ -d "$real" ] || { echo "fuzz/run.sh: the real corpus is missing at fuzz/$real (git checkout -- tests/corpus/real)" >&2; exit 2; }
            extra+=("$real") ;;
    esac
    echo "== $target: ${seconds}s (sanitizer $sanitizer)"
    start=$(date +%s)
    parallel=()
    [ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
    cargo fuzz run --sanitizer "$sanitizer" "$target" "$corpus" "${extra[@]}" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 "${parallel[@]}" >"artifacts/$target.log" 2>&1
    status=$?
    grep -E '^(#[0-9]+ +(INITED|DONE)|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+== ERROR|thread .* panicked|SUMMARY)' \
        "artifacts/$target.log" || true
    echo "== $target: exit $status after $(( $(date +%s) - start ))s, corpus $(ls "$corpus" | wc -l) inputs"
    [ "$status" -eq 0 ] || failed+=("$target")
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "crashes in: ${failed[*]} (see fuzz/artifacts/)"
    exit 1
fi
