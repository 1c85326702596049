#!/bin/sh
# Cost of one probe run beside a plain GET by curl, against the same loopback server, and beside
# a trivial exec (/bin/true), the floor of any exec probe:
#   probe/bench/cost.sh [RUNS]   (after `cargo build --release -p probelint-probe`; needs
#   python3, curl and GNU time). Prints wall and CPU seconds per run and the peak RSS of one run.
set -eu
runs=${1:-200}
root=$(cd "$(dirname "$0")/../.." && pwd)
probe="$root/target/release/probelint-probe"
[ -x "$probe" ] || { echo "build it first: cargo build --release -p probelint-probe" >&2; exit 2; }
dir=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$dir"' EXIT
touch "$dir/health"
# A vLLM-sized scrape: the real one is a few hundred lines; the probe reads four series of it.
{
    i=0
    while [ $i -lt 300 ]; do echo "vllm:other_series_$i{engine=\"0\",model_name=\"m\"} $i.0"; i=$((i+1)); done
    echo 'vllm:num_requests_running{engine="0",model_name="m"} 3.0'
    echo 'vllm:num_requests_waiting{engine="0",model_name="m"} 1.0'
    echo 'vllm:generation_tokens_total{engine="0",model_name="m"} 1000.0'
    echo 'vllm:prompt_tokens_total{engine="0",model_name="m"} 500.0'
} > "$dir/metrics"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$dir" && exec python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1) &
server=$!
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.1; done

measure() { # name, command...
    name=$1; shift
    /usr/bin/time -f "%e %U %S" -o "$dir/t" sh -c "i=0; while [ \$i -lt $runs ]; do $* >/dev/null 2>&1; i=\$((i+1)); done"
    # shellcheck disable=SC2068
    /usr/bin/time -f "%M" -o "$dir/m" $@ >/dev/null 2>&1
    read -r wall user sys < "$dir/t"
    awk -v n="$name" -v r="$runs" -v w="$wall" -v u="$user" -v s="$sys" -v m="$(cat "$dir/m")" \
        'BEGIN { printf "%-32s %8.2f ms wall %8.2f ms cpu %6d KiB max RSS\n", n, 1000*w/r, 1000*(u+s)/r, m }'
}
measure "probelint-probe" "$probe startup --server vllm --port $port"
measure "probelint-probe live (progress)" "$probe live --server vllm --port $port --cache $dir/live"
measure "curl -sf" "curl -sf http://127.0.0.1:$port/health"
# The floor of any exec probe: a process that does nothing (a path, so the shell forks it).
measure "/bin/true (trivial exec)" "/bin/true"
