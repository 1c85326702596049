#!/usr/bin/env bash
# Prints the version a release tag stands for, after checking that the tree agrees with it: the
# workspace's crate version (Cargo.toml), the chart's version and appVersion (charts/probelint)
# and a `## [VERSION]` section in CHANGELOG.md. A tag that disagrees with any of them fails
# before anything is built, so a release never ships binaries, images and a chart that name
# different versions.
#
#   scripts/release-version.sh v0.1.0        # prints 0.1.0, or says what disagrees (exit 1)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:?usage: scripts/release-version.sh TAG (vMAJOR.MINOR.PATCH)}
version=${tag#v}
if ! [[ $tag =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
    echo "release-version: tag $tag is not vMAJOR.MINOR.PATCH[-PRERELEASE]" >&2
    exit 1
fi

# The first `version = "…"` after `[workspace.package]`.
crates=$(awk '/^\[workspace\.package\]/{p=1; next} /^\[/{p=0} p && /^version *=/{gsub(/[" ]/, "", $0); sub(/^version=/, "", $0); print; exit}' "$root/Cargo.toml")
chart=$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$root/charts/probelint/Chart.yaml")
app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$root/charts/probelint/Chart.yaml")

status=0
check() {
    if [ "$2" != "$version" ]; then
        echo "release-version: tag $tag, but $1 is ${2:-missing}" >&2
        status=1
    fi
}
check "the crates' version (Cargo.toml [workspace.package])" "$crates"
check "the chart's version (charts/probelint/Chart.yaml)" "$chart"
check "the chart's appVersion (charts/probelint/Chart.yaml)" "$app"
if ! grep -q "^## \[$version\]" "$root/CHANGELOG.md"; then
    echo "release-version: CHANGELOG.md has no \"## [$version]\" section" >&2
    status=1
fi
[ "$status" -eq 0 ] && echo "$version"
exit "$status"
