#!/usr/bin/env bash
# Makes sure a supported librdkafka (LIBRDKAFKA_MIN and later) is there for the build, the tests and
# the demo: the system's when it is recent enough (pkg-config rdkafka), else Debian forky's (the
# release after Debian 13) librdkafka 2.14.2, built from Debian's source package into
# .build/librdkafka/prefix, which the
# Makefile puts first on PKG_CONFIG_PATH and into the binaries' run path (docs/kafka.md, "Which
# librdkafka"). Called by every make target that builds; a second run is a no-op.
#
#   scripts/librdkafka.sh              ensure it, say what was done
#   scripts/librdkafka.sh --prefix     print the prefix the Makefile uses (whether built or not)
#
# The source comes from the Debian archive this machine's apt is already configured with (its
# `deb` entry for the system's own suite, component main; LIBRDKAFKA_DEBIAN_ARCHIVE=URI overrides),
# through a private apt state under .build/librdkafka/apt: the system's apt configuration, lists
# and cache are left as they are. What is checked before anything is built:
#   - apt: the forky Release file's signature (Debian's archive keyring), then the SHA-256 of the
#     .dsc and of both tarballs against the signed Sources index;
#   - here: the orig tarball's SHA-256 against the .dsc's Checksums-Sha256;
#   - dpkg-source: the .dsc's OpenPGP signature by its Debian maintainer (debian-keyring), and every
#     file's checksum again.
# Needs root (or sudo) only to install the Debian packages listed in BUILD_DEPENDS when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

LIBRDKAFKA_MIN=2.14.2         # also in Sources/CRdKafka/shim.h (#error) and docs/compatibility.md
# forky is Debian's testing suite: its librdkafka moves on (2.14.2-1 when this was written). A later
# Debian revision of 2.14.2 is taken; another upstream version stops this script with what forky has.
DEBIAN_SUITE=forky
DEBIAN_UPSTREAM=2.14.2        # the upstream version of forky's package (2.14.2-1 on 2026-06-26)
ROOT="$PWD/.build/librdkafka"
PREFIX="$ROOT/prefix"
STAMP="$PREFIX/.debian-source"
# Building it: a C compiler and make (build-essential, which brings dpkg-dev for dpkg-source),
# pkg-config, python3 (librdkafka's configure runs lds-gen.py for the linker script that keeps its
# exported symbols to the public API), the libraries of the features built in (OpenSSL for SSL and
# SASL SCRAM, zlib, zstd, lz4 as Debian's package links them), and the keyrings that check the source.
BUILD_DEPENDS="build-essential pkg-config python3 libssl-dev zlib1g-dev libzstd-dev liblz4-dev debian-archive-keyring debian-keyring"

if [ "${1:-}" = "--prefix" ]; then echo "$PREFIX"; exit 0; fi
[ $# = 0 ] || { echo "usage: $0 [--prefix]" >&2; exit 2; }

say() { echo "librdkafka: $*"; }
die() { echo "librdkafka: error: $*" >&2; exit 1; }
at_least() { dpkg --compare-versions "$1" ge "$2"; }

# 1. The system's, when recent enough (pkg-config without the Makefile's PKG_CONFIG_PATH).
system_version=$(env -u PKG_CONFIG_PATH pkg-config --modversion rdkafka 2>/dev/null || true)
if [ -n "$system_version" ] && at_least "$system_version" "$LIBRDKAFKA_MIN"; then
    say "the system's $system_version (>= $LIBRDKAFKA_MIN), nothing to build"
    exit 0
fi

# 2. Built before: the prefix says which Debian source it came from.
if [ -f "$STAMP" ] && [ -f "$PREFIX/lib/pkgconfig/rdkafka.pc" ]; then
    built=$(head -1 "$STAMP")
    case "$built" in
        "librdkafka $DEBIAN_UPSTREAM-"*)
            say "$built, built before in ${PREFIX#"$PWD"/} (the system's is ${system_version:-none})"
            exit 0 ;;
    esac
    say "${PREFIX#"$PWD"/} holds $built, not $DEBIAN_UPSTREAM: building again"
fi

start=$(date +%s)
say "the system's is ${system_version:-not installed} (< $LIBRDKAFKA_MIN): building Debian $DEBIAN_SUITE's librdkafka $DEBIAN_UPSTREAM into ${PREFIX#"$PWD"/}"

# 3. Build dependencies, when missing (root, else sudo, else it says what to run and this stops).
# shellcheck disable=SC2086 # a list of names
scripts/install-packages.sh $BUILD_DEPENDS

# 4. Where Debian's archive is: the URIs of the system's own suite, component main, as apt reads its
#    configuration (sources.list and deb822 .sources alike). Not the security or updates suites.
if [ -n "${LIBRDKAFKA_DEBIAN_ARCHIVE:-}" ]; then
    uris=$LIBRDKAFKA_DEBIAN_ARCHIVE
    say "archive: $uris (LIBRDKAFKA_DEBIAN_ARCHIVE)"
else
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || die "no VERSION_CODENAME in /etc/os-release; set LIBRDKAFKA_DEBIAN_ARCHIVE=<a Debian archive URI>"
    uris=$(apt-get indextargets --no-release-info --format '$(TARGET_OF) $(RELEASE) $(COMPONENT) $(REPO_URI)' \
        | awk -v suite="$codename" '$1 == "deb" && $2 == suite && $3 == "main" { print $4 }' | sort -u | tr '\n' ' ')
    uris=${uris% }
    [ -n "$uris" ] || die "apt has no 'deb' entry for suite $codename, component main (sources.list or sources.list.d/*.sources) to take Debian's archive from; set LIBRDKAFKA_DEBIAN_ARCHIVE=<a Debian archive URI> or install librdkafka-dev >= $LIBRDKAFKA_MIN"
    say "archive: $uris (apt's entry for $codename main)"
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || die "$keyring is missing (Debian package debian-archive-keyring)"

# 5. A private apt state that knows only forky's sources, and the source package from it.
apt_dir="$ROOT/apt"
rm -rf "$apt_dir"
mkdir -p "$apt_dir/sources.list.d" "$apt_dir/state/lists/partial" "$apt_dir/cache/archives/partial" "$ROOT/source"
cat > "$apt_dir/$DEBIAN_SUITE-src.sources" <<EOF
Types: deb-src
URIs: $uris
Suites: $DEBIAN_SUITE
Components: main
Signed-By: $keyring
EOF
APT=(-q -o "Dir::Etc::SourceList=$apt_dir/$DEBIAN_SUITE-src.sources" -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
     -o "Dir::State=$apt_dir/state" -o "Dir::State::status=/var/lib/dpkg/status" -o "Dir::Cache=$apt_dir/cache")
# A Release file past its Valid-Until is refused (a stale or replayed archive), as apt refuses it,
# unless LIBRDKAFKA_ALLOW_EXPIRED_RELEASE=1: for a frozen snapshot of the archive (a mirror that
# stopped updating), where the system's own apt is configured the same way (Acquire::Check-Valid-Until
# "false"); the signature is checked either way. The image build passes it when the host's apt does.
if [ "${LIBRDKAFKA_ALLOW_EXPIRED_RELEASE:-}" = 1 ]; then APT+=(-o "Acquire::Check-Valid-Until=false"); fi
# As root, apt downloads as user _apt, who cannot write into a checkout; it would fall back to root
# with a warning each time. Say so once instead.
if [ "$(id -u)" = 0 ]; then APT+=(-o "APT::Sandbox::User=root"); fi
apt-get "${APT[@]}" update > "$ROOT/apt.log" 2>&1 \
    || { tail -20 "$ROOT/apt.log" >&2; die "apt-get update of $DEBIAN_SUITE's sources failed (log: ${ROOT#"$PWD"/}/apt.log)"; }
version=$(apt-cache "${APT[@]}" showsrc --only-source librdkafka 2>/dev/null \
    | awk '/^Version: / { print $2 }' | grep -E "^$DEBIAN_UPSTREAM-" | sort -V | tail -1 || true)
[ -n "$version" ] || die "Debian $DEBIAN_SUITE has no librdkafka $DEBIAN_UPSTREAM-* any more (it has: $(apt-cache "${APT[@]}" showsrc --only-source librdkafka 2>/dev/null | awk '/^Version: / { print $2 }' | tr '\n' ' ')); update DEBIAN_UPSTREAM in $0"
rm -rf "$ROOT/source"; mkdir -p "$ROOT/source"
(cd "$ROOT/source" && apt-get "${APT[@]}" source --download-only "librdkafka=$version") >> "$ROOT/apt.log" 2>&1 \
    || { tail -20 "$ROOT/apt.log" >&2; die "apt-get source librdkafka=$version failed (log: ${ROOT#"$PWD"/}/apt.log)"; }
dsc="$ROOT/source/librdkafka_$version.dsc"
orig="$ROOT/source/librdkafka_$DEBIAN_UPSTREAM.orig.tar.gz"
[ -f "$dsc" ] && [ -f "$orig" ] || die "apt-get source did not leave $dsc and $orig"
say "downloaded librdkafka $version from $DEBIAN_SUITE (apt checked them against the signed Sources index)"

# 6. The orig tarball against the .dsc's SHA-256, then unpacked by dpkg-source, which checks the
#    maintainer's signature of the .dsc. Debian's patches are not applied (--skip-patches): all three
#    swap librdkafka's bundled copies (cJSON, nanopb, the OpenTelemetry protobuf code) for Debian
#    packages, and the third points the build at OpenTelemetry sources that only Debian's own build
#    generates, from opentelemetry-proto, which Debian 12 does not have. None of them changes what
#    the library does; the tree built is upstream's v2.14.2 as released, bundled copies included.
expected=$(awk '/^Checksums-Sha256:/ { in_sums = 1; next } /^[^ ]/ { in_sums = 0 }
                in_sums && $3 == name { print $1 }' name="$(basename "$orig")" "$dsc")
actual=$(sha256sum "$orig" | cut -d' ' -f1)
[ -n "$expected" ] || die "no SHA-256 for $(basename "$orig") in $(basename "$dsc")"
[ "$expected" = "$actual" ] || die "$(basename "$orig"): SHA-256 $actual, the .dsc says $expected"
say "$(basename "$orig"): SHA-256 $actual, as the .dsc says"
src="$ROOT/source/librdkafka-$DEBIAN_UPSTREAM"
dpkg-source --require-valid-signature --skip-patches -x "$dsc" "$src" > "$ROOT/dpkg-source.log" 2>&1 \
    || { cat "$ROOT/dpkg-source.log" >&2; die "dpkg-source refused $(basename "$dsc")"; }
signer=$(gpgv --keyring /usr/share/keyrings/debian-keyring.gpg "$dsc" 2>&1 | sed -n 's/.*Good signature from "\(.*\)".*/\1/p' | head -1)
say "$(basename "$dsc"): signed by ${signer:-a Debian developer} (debian-keyring); unpacked without Debian's patches (upstream's tree)"

# 7. Configure, build and install the C library only (no C++ library, examples or tests). Features:
#    SSL, SASL PLAIN/SCRAM/OAUTHBEARER (built in), gzip, zstd, lz4 (external, as Debian links it),
#    snappy (built in). Left out: SASL GSSAPI (Kerberos, Cyrus libsasl2) and the libcurl-based OIDC
#    token fetch, which Debian's build has and the tests do not use (docs/kafka.md). Static
#    libraries are not kept: the binaries load librdkafka.so.1 from the prefix (run path).
build_log="$ROOT/build.log"
(
    cd "$src"
    ./configure --prefix="$PREFIX" --enable-ssl --enable-zstd --enable-lz4-ext --disable-gssapi --disable-curl
    make -C src -j"$(nproc)" lib
    rm -rf "$PREFIX"
    make -C src install
) > "$build_log" 2>&1 || { tail -30 "$build_log" >&2; die "the build failed (log: ${build_log#"$PWD"/})"; }
grep -o 'BUILT_WITH .*' "$build_log" | head -1 | sed 's/^/librdkafka: /; s/  */ /g'
rm -f "$PREFIX"/lib/*.a "$PREFIX/lib/pkgconfig/rdkafka-static.pc"

# 8. What the build will find and what a program linked against it runs with.
found=$(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --modversion rdkafka)
[ "$found" = "$DEBIAN_UPSTREAM" ] || die "pkg-config finds $found in the prefix, not $DEBIAN_UPSTREAM"
probe="$ROOT/version-probe"
printf '#include <stdio.h>\n#include <librdkafka/rdkafka.h>\nint main(void) { puts(rd_kafka_version_str()); return 0; }\n' > "$probe.c"
# shellcheck disable=SC2046 # pkg-config's flags are words
cc -o "$probe" "$probe.c" $(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags --libs rdkafka) -Wl,-rpath,"$PREFIX/lib"
loaded=$("$probe")
[ "$loaded" = "$DEBIAN_UPSTREAM" ] || die "a program linked against the prefix runs with librdkafka $loaded"
echo "librdkafka $version (Debian $DEBIAN_SUITE source, $actual)" > "$STAMP"
# The unpacked and built tree and the private apt lists are not needed again (about 170 MB); the
# downloaded source package and the logs stay.
rm -rf "$src" "$apt_dir"
say "built $version into ${PREFIX#"$PWD"/} in $(($(date +%s) - start)) s: pkg-config says $found, rd_kafka_version_str() says $loaded"
