#!/usr/bin/env bash
# Builds the release images, probelint-webhook (what the Helm chart runs) and probelint (the CLI,
# for CI jobs), as OCI image layout archives under target/images/, without a Docker daemon or
# any image builder: each image is its executable in an otherwise empty root filesystem, written
# by `oci-image` (tests/cluster/src/bin/oci-image.rs, the writer the node suite uses for its own
# images), byte for byte the same for the same binaries.
#
#   scripts/build-images.sh                      # for this machine, from a `cargo build --release`
#   scripts/build-images.sh --version 0.1.0 --registry ghcr.io/probelint \
#       --binaries amd64=dist/x86_64-unknown-linux-musl --binaries arm64=dist/aarch64-unknown-linux-musl
#
# --binaries ARCH=DIR (repeatable) names a directory holding `probelint` and `probelint-webhook`
# built for linux/ARCH; all of them go into one multi-platform image index per image. Without
# it, the binaries are built here for this machine's architecture; a dynamically linked binary
# is imaged with the shared libraries it loads here (from `ldd`), so for another architecture
# give static (musl) binaries, as the release workflow does.
#
# Then, for example:
#   skopeo copy --all oci-archive:target/images/probelint-webhook.tar docker://REGISTRY/probelint-webhook:VERSION
#   kind load image-archive target/images/probelint-webhook.tar
#   sudo ctr -n k8s.io images import --all-platforms target/images/probelint-webhook.tar
#   podman load -i target/images/probelint-webhook.tar
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

version=$(awk '/^\[workspace\.package\]/{p=1; next} /^\[/{p=0} p && /^version *=/{gsub(/[" ]/, "", $0); sub(/^version=/, "", $0); print; exit}' Cargo.toml)
registry=ghcr.io/probelint
out=target/images
binaries=()
while [ $# -gt 0 ]; do
    case $1 in
        --version) version=$2; shift 2 ;;
        --registry) registry=$2; shift 2 ;;
        --binaries) binaries+=("$2"); shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "build-images: unknown argument $1 (see the comment at the top of $0)" >&2; exit 2 ;;
    esac
done

if [ ${#binaries[@]} -eq 0 ]; then
    case $(uname -m) in
        x86_64) arch=amd64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) echo "build-images: no OCI architecture for $(uname -m); pass --binaries ARCH=DIR" >&2; exit 2 ;;
    esac
    cargo build --release --locked -p probelint -p probelint-webhook
    binaries=("$arch=${CARGO_TARGET_DIR:-target}/release")
fi

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
cargo build --locked -q -p probelint-cluster --bin oci-image
oci_image="${CARGO_TARGET_DIR:-target}/debug/oci-image"

image() {
    local name=$1 description=$2
    shift 2
    local args=()
    for pair in "${binaries[@]}"; do
        args+=(--binary "${pair%%=*}=${pair#*=}/$name")
    done
    "$oci_image" \
        --reference "$registry/$name:$version" \
        "${args[@]}" \
        --at "/usr/local/bin/$name" \
        --user 65532:65532 \
        --label "org.opencontainers.image.title=$name" \
        --label "org.opencontainers.image.description=$description" \
        --label "org.opencontainers.image.source=https://github.com/probelint/probelint" \
        --label "org.opencontainers.image.licenses=Apache-2.0" \
        --label "org.opencontainers.image.version=$version" \
        --label "org.opencontainers.image.revision=$revision" \
        --out "$out/$name.tar"
}
image probelint-webhook "probelint admission webhook for GPU model-serving probes"
image probelint "probelint CLI: lint Kubernetes manifests for GPU model-serving probe mistakes"
(cd "$out" && sha256sum probelint-webhook.tar probelint.tar > SHA256SUMS)
echo "build-images: $out/probelint-webhook.tar and $out/probelint.tar ($registry/…:$version)"
