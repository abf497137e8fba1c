#!/usr/bin/env bash
# Makes, locally, the two base images deploy/Dockerfile builds on, for machines that cannot pull
# swift:6.3.1-bookworm and debian:trixie-slim from Docker Hub (docs/container-image.md):
#
#   runtime  a minimal Debian 13 (trixie) root made by debootstrap --variant=minbase, trimmed and
#            configured the way debian:trixie-slim is (no documentation, manual pages or
#            translations; apt cleans up after itself; trixie-updates and trixie-security enabled)
#   build    such a Debian 12 (bookworm) root, the distribution this machine's Swift toolchain
#            (SWIFT_ROOT) is built for, plus the Debian packages a Swift build needs and the
#            toolchain copied under /usr, where swift:6.3.1-bookworm has it
#
# Both are made with `podman import` from a folder; nothing is pulled from a registry. An image that
# already exists is kept unless --force is given. Needs root (debootstrap, chroot), podman,
# debootstrap and debian-archive-keyring (`make image` installs them).
#
#   deploy/image/make-bases.sh [--force]
#
# Settings (environment): RUNTIME_IMAGE, BUILD_IMAGE (names of the two images), SWIFT_ROOT (the
# toolchain, holding usr/bin/swift), MIRROR, SECURITY_MIRROR (Debian archives), WORK (scratch folder).
set -euo pipefail

RUNTIME_IMAGE=${RUNTIME_IMAGE:-localhost/apns-worker/debian:trixie-slim}
BUILD_IMAGE=${BUILD_IMAGE:-localhost/apns-worker/swift:6.3.1-bookworm}
SWIFT_ROOT=${SWIFT_ROOT:-/opt/swift}
RUNTIME_SUITE=trixie
BUILD_SUITE=bookworm
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}
WORK=${WORK:-.build/image/bases}

# What a `swift build` of this project needs besides the toolchain, found by ldd of the toolchain's
# programs and by building with the list (docs/container-image.md has the reasoning):
#   binutils                     ld.gold, the linker swiftc drives on Linux
#   libc6-dev libstdc++-12-dev   C runtime objects and headers, libstdc++ (C and C++ targets; the
#                                static Swift runtime links -lstdc++); brings libgcc-12-dev
#   libcurl4 libxml2 libsqlite3-0 libncurses6
#                                loaded by swift-package, swift-driver, swift-build-tool and lld
#   git                          SwiftPM fetches dependencies with it
#   pkg-config                   finds librdkafka, libnghttp2 and OpenSSL (the Dockerfile installs it too)
#   ca-certificates              git over https when the build fetches from GitHub itself
# Left out of the official image's list: the -dev packages of the toolchain's own libraries
# (libcurl4-openssl-dev, libxml2-dev, libicu-dev, libedit-dev, libsqlite3-dev, libncurses-dev,
# uuid-dev), gcc, tzdata and libpython3-dev, which only a REPL, lldb or code using
# FoundationNetworking/FoundationXML needs.
BUILD_PACKAGES="binutils libc6-dev libstdc++-12-dev libcurl4 libxml2 libsqlite3-0 libncurses6 git pkg-config ca-certificates"

force=0
case "${1:-}" in
    --force) force=1 ;;
    "") ;;
    *) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

if [ "$(id -u)" != 0 ]; then
    echo "error: $0 needs root (debootstrap, chroot)" >&2
    exit 1
fi

need() { [ "$force" = 1 ] || ! podman image exists "$1"; }
need_runtime=0; need "$RUNTIME_IMAGE" && need_runtime=1
need_build=0; need "$BUILD_IMAGE" && need_build=1
if [ "$need_runtime" = 0 ] && [ "$need_build" = 0 ]; then
    echo "base images exist: $RUNTIME_IMAGE, $BUILD_IMAGE (--force makes them again)"
    exit 0
fi
if [ "$need_build" = 1 ] && [ ! -x "$SWIFT_ROOT/usr/bin/swift" ]; then
    echo "error: no Swift toolchain at $SWIFT_ROOT (SWIFT_ROOT=… names the folder holding usr/bin/swift)" >&2
    exit 1
fi

root="$WORK/root"
rm -rf "$root"
mkdir -p "$WORK"
trap 'rm -rf "$root"' EXIT

# Runs a command in the root with /proc and /dev mounted, in a mount namespace of its own: nothing
# stays mounted when it ends, whatever happens.
in_root() {
    # shellcheck disable=SC2016 # expanded by the inner shell
    unshare --mount --propagation private --fork \
        sh -c 'mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" && exec chroot "$0" "$@"' "$root" \
        env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"
}

# apt-get in the root, its output in $WORK/apt.log, the end of which is shown when it fails.
apt_in_root() {
    in_root apt-get -q "$@" >> "$WORK/apt.log" 2>&1 || {
        tail -20 "$WORK/apt.log" >&2
        echo "error: apt-get $* failed in the root (log: $WORK/apt.log)" >&2
        exit 1
    }
}

# Leaves out what the root does not need at run time and what differs per machine, then imports it.
import_root() {
    local name=$1 description=$2
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
        "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old "$root"/tmp/* "$root"/var/tmp/*
    find "$root/var/log" -type f -delete
    # A container runtime provides these when it starts a container (and podman build for RUN steps):
    # empty files, no device nodes.
    : > "$root/etc/resolv.conf"; : > "$root/etc/hostname"; : > "$root/etc/hosts"
    chmod 0644 "$root/etc/resolv.conf" "$root/etc/hostname" "$root/etc/hosts"
    find "$root/dev" -mindepth 1 -delete
    local previous
    previous=$(podman image inspect --format '{{.Id}}' "$name" 2>/dev/null || true)
    tar --numeric-owner --xattrs --acls -C "$root" -cf - . \
        | podman import --quiet \
            --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
            --change 'CMD ["bash"]' \
            --change "LABEL org.opencontainers.image.description=\"$description\"" \
            --message "$description" - "$name" > /dev/null
    echo "imported $name ($(podman image inspect --format '{{.Size}}' "$name" | numfmt --to=si)B)"
    # The image this one replaces (--force), unless something still uses it.
    if [ -n "$previous" ]; then podman image rm "$previous" > /dev/null 2>&1 || true; fi
}

# ---------------------------------------------------------------------------------------------------
# A root: minbase SUITE, configured like debian:SUITE-slim, with current updates (make_root SUITE).
# ---------------------------------------------------------------------------------------------------
make_root() {
local SUITE=$1
rm -rf "$root"
echo "debootstrap --variant=minbase $SUITE from $MIRROR"
debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$SUITE" "$root" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; echo "error: debootstrap failed (log: $WORK/debootstrap.log)" >&2; exit 1; }

rm -f "$root/etc/apt/sources.list"
cat > "$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

# As in the debian:*-slim images: dpkg leaves out documentation (copyright files kept), manual pages
# and translations, now and in every later apt-get install.
cat > "$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
EOF
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/info/* "$root"/usr/share/linda/* "$root"/usr/share/lintian/overrides/* \
    "$root"/usr/share/locale/* "$root"/usr/share/man/* "$root"/usr/share/groff/*

# As in the Debian images: apt keeps no downloaded packages or caches, fetches no translations, keeps
# index files compressed; no service starts while packages are installed.
cat > "$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
echo 'Acquire::Languages "none";' > "$root/etc/apt/apt.conf.d/docker-no-languages"
echo 'Acquire::GzipIndexes "true";' > "$root/etc/apt/apt.conf.d/docker-gzip-indexes"
echo 'Apt::AutoRemove::SuggestsImportant "false";' > "$root/etc/apt/apt.conf.d/docker-autoremove-suggests"
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"

# The point release in the archive plus SUITE-updates and SUITE-security, as a rebuilt official
# image has them.
cp /etc/resolv.conf "$root/etc/resolv.conf"
: > "$WORK/apt.log"
apt_in_root update
apt_in_root -y dist-upgrade
}

# ---------------------------------------------------------------------------------------------------
# Runtime base
# ---------------------------------------------------------------------------------------------------
if [ "$need_runtime" = 1 ]; then
    make_root "$RUNTIME_SUITE"
    import_root "$RUNTIME_IMAGE" "Debian $RUNTIME_SUITE minbase, slimmed like debian:$RUNTIME_SUITE-slim (made by deploy/image/make-bases.sh)"
fi

# ---------------------------------------------------------------------------------------------------
# Build base
# ---------------------------------------------------------------------------------------------------
if [ "$need_build" = 1 ]; then
    make_root "$BUILD_SUITE"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    apt_in_root update
    # shellcheck disable=SC2086 # a list of names
    apt_in_root -y install --no-install-recommends $BUILD_PACKAGES
    # The toolchain goes where swift:6.3.1-bookworm unpacks it (/usr/bin/swift,
    # /usr/lib/swift, /usr/libexec/swift/...): on PATH, and at the paths the Dockerfile names.
    cp -a "$SWIFT_ROOT/usr/." "$root/usr/"
    chmod -R o+r "$root/usr/lib/swift"
    # Fails here, not minutes into an image build, when a library the toolchain loads is missing.
    for program in swift-driver swift-frontend swift-package swift-build-tool clang ld.gold; do
        if in_root ldd "/usr/bin/$program" | grep "not found"; then
            echo "error: /usr/bin/$program in the build base misses the libraries above" >&2
            exit 1
        fi
    done
    version=$(in_root swift --version 2>/dev/null | head -1 | tr -d '"')
    echo "build base: $version"
    import_root "$BUILD_IMAGE" "Debian $BUILD_SUITE with the Swift toolchain of this machine ($version) under /usr (made by deploy/image/make-bases.sh)"
fi
