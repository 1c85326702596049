#!/usr/bin/env bash
# Prints the CHANGELOG.md section of one version (without its heading): the release notes.
#
#   scripts/changelog-section.sh 0.1.0
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?usage: scripts/changelog-section.sh VERSION}
awk -v v="$version" '
    index($0, "## [" v "]") == 1 { found = 1; next }
    found && /^## \[/ { exit }
    found { print }
    END { if (!found) { print "changelog-section: no ## [" v "] in CHANGELOG.md" > "/dev/stderr"; exit 1 } }
' "$root/CHANGELOG.md"
