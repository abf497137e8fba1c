#!/usr/bin/env bash
# Builds the container image deploy/Dockerfile describes with podman, on base images made on this
# machine, and checks it without running a container (docs/container-image.md, "Without Docker
# Hub"). In order, each step failing the script:
#   1. deploy/image/make-bases.sh makes the two base images (kept between runs; IMAGE_BASES_FORCE
#      non-empty makes them again);
#   2. podman builds deploy/Dockerfile on them as IMAGE, never pulling; when the folder
#      SWIFT_PACKAGE_MIRROR exists, the package dependencies are fetched from that git mirror: it is
#      mounted read-only at /mnt for the RUN steps and git's GIT_CONFIG_* variables, as build
#      arguments, redirect GitHub URLs there;
#   3. deploy/image/check-image.sh runs the image's binary from its root filesystem, extracted into
#      .build/image/rootfs, with an apns-simulator built here (swift build --product apns-simulator).
# Prints how long the bases and the image build took. Installs nothing: `make image` installs the
# Debian packages first (podman, debootstrap, ...) and calls this.
#
#   deploy/image/build-image.sh
#
# Settings (environment; the defaults are the Makefile's): IMAGE_TAG (the short git revision), IMAGE
# (apns-worker:IMAGE_TAG), IMAGE_BUILD_BASE, IMAGE_RUNTIME_BASE, IMAGE_BASES_FORCE, SWIFT_ROOT (the
# toolchain copied into the build base), SWIFT_PACKAGE_MIRROR; SWIFT and SWIFTPM_FLAGS for the
# simulator's build. Needs root (debootstrap, chroot, mounts).
set -euo pipefail
cd "$(dirname "$0")/../.."

[ $# = 0 ] || { echo "usage: $0 (settings in the environment)" >&2; exit 2; }
IMAGE_TAG=${IMAGE_TAG:-$(git rev-parse --short HEAD)}
IMAGE=${IMAGE:-apns-worker:$IMAGE_TAG}
IMAGE_BUILD_BASE=${IMAGE_BUILD_BASE:-localhost/apns-worker/swift:6.3.1-bookworm}
IMAGE_RUNTIME_BASE=${IMAGE_RUNTIME_BASE:-localhost/apns-worker/debian:trixie-slim}
IMAGE_BASES_FORCE=${IMAGE_BASES_FORCE:-}
SWIFT_ROOT=${SWIFT_ROOT:-/opt/swift}
SWIFT_PACKAGE_MIRROR=${SWIFT_PACKAGE_MIRROR:-/opt/swift-packages}
SWIFT=${SWIFT:-swift}
read -r -a SWIFTPM_FLAGS <<< "${SWIFTPM_FLAGS:-}"

# 1. The bases.
start=$(date +%s)
force=()
if [ -n "$IMAGE_BASES_FORCE" ]; then force=(--force); fi
RUNTIME_IMAGE=$IMAGE_RUNTIME_BASE BUILD_IMAGE=$IMAGE_BUILD_BASE SWIFT_ROOT=$SWIFT_ROOT \
    deploy/image/make-bases.sh "${force[@]}"
echo "bases: $(($(date +%s) - start)) s"

# 2. The image. The mirror at /mnt, because it exists, empty, in both bases: podman leaves the mount
#    point of a --volume in every layer a RUN step makes, so a new folder would end up, empty, in the
#    runtime image (docs/container-image.md).
mirror=()
if [ -e "$SWIFT_PACKAGE_MIRROR" ]; then
    mirror=(--volume "$SWIFT_PACKAGE_MIRROR:/mnt:ro"
        --build-arg GIT_CONFIG_COUNT=1 --build-arg GIT_CONFIG_KEY_0=url./mnt/.insteadOf
        --build-arg GIT_CONFIG_VALUE_0=https://github.com/)
fi
revision=$(git rev-parse HEAD)
# The host's apt takes expired Release files (an archive snapshot): so may the image's librdkafka build.
expired=()
if apt-config dump 2>/dev/null | grep -q '^Acquire::Check-Valid-Until "false"'; then
    expired=(--build-arg LIBRDKAFKA_ALLOW_EXPIRED_RELEASE=1)
fi
start=$(date +%s)
(set -x
 podman build --isolation chroot --pull=never -f deploy/Dockerfile -t "$IMAGE" \
    --build-arg BUILD_IMAGE="$IMAGE_BUILD_BASE" --build-arg RUNTIME_IMAGE="$IMAGE_RUNTIME_BASE" \
    --build-arg VERSION="$IMAGE_TAG" --build-arg REVISION="$revision" \
    "${expired[@]}" "${mirror[@]}" .)
echo "image build: $(($(date +%s) - start)) s"

# 3. The checks, with the host's simulator.
(set -x; "$SWIFT" build "${SWIFTPM_FLAGS[@]}" --product apns-simulator)
simulator="$("$SWIFT" build "${SWIFTPM_FLAGS[@]}" --show-bin-path)/apns-simulator"
(set -x; deploy/image/check-image.sh "$IMAGE" .build/image/rootfs "$simulator")
