#!/bin/sh
# Entry point of the `probelint` pre-commit hook (.pre-commit-hooks.yaml).
#
# pre-commit keeps one clean checkout of this repository per `rev` and runs this script from
# it, with the staged file names as arguments. The first run builds probelint from that
# checkout with `cargo install --locked` (so with the committed Cargo.lock) into
# `$CARGO_TARGET_DIR/pre-commit-hook/<commit>/` (CARGO_TARGET_DIR defaults to the checkout's
# target/); later runs reuse that binary. With CARGO_TARGET_DIR set, checkouts of one commit
# share one binary (`pre-commit try-repo` clones afresh on every run) and a new `rev` rebuilds
# only what changed. Run from a checkout with uncommitted changes, it rebuilds every time.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd -P)

# The commit this checkout is, if it is a clean git checkout of its own.
commit=
if [ "$(git -C "$root" rev-parse --show-toplevel 2>/dev/null)" = "$root" ] &&
    [ -z "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit=$(git -C "$root" rev-parse --verify -q HEAD 2>/dev/null) || commit=
fi
if [ -n "$commit" ]; then
    install_root="${CARGO_TARGET_DIR:-$root/target}/pre-commit-hook/$commit"
else
    install_root="$root/target/pre-commit-hook/working-tree"
fi
bin="$install_root/bin/probelint"
[ -x "$bin" ] || [ ! -x "$bin.exe" ] || bin="$bin.exe"

if [ -z "$commit" ] || [ ! -x "$bin" ]; then
    if ! command -v cargo >/dev/null 2>&1; then
        echo "probelint hook: cargo not found on PATH. Install Rust (1.89 or later, https://rustup.rs)," >&2
        echo "or install probelint yourself and use the \`probelint-system\` hook instead." >&2
        exit 2
    fi
    echo "probelint hook: building probelint from $root (once per hook revision)..." >&2
    cargo install --locked --quiet --force --path "$root/lint" --root "$install_root" >&2
    bin="$install_root/bin/probelint"
    [ -x "$bin" ] || bin="$bin.exe"
fi

exec "$bin" "$@"
