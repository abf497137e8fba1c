#!/usr/bin/env bash
# Proves an apns-worker image works without running a container (`podman run` needs cgroups, which
# some build machines lack): extracts the image's root filesystem into a folder and runs the binary
# in it with chroot, the way the Deployment runs it (the image's user, environment, working
# directory and entrypoint; read-only root file system). Then prints what the image contains.
#
#   deploy/image/check-image.sh IMAGE ROOTFS SIMULATOR
#
# SIMULATOR: an apns-simulator binary built on this machine (the image has none: its apns-worker is
# built without the `Demo` trait, so it links neither the simulator nor the mock stack).
#
# Checks, each failing the script:
#   apns-worker --version   names librdkafka 2.14.2, the release the tests ran on (the build
#                           stage's, copied into the image; --help while the binary has no --version)
#   apns-worker --help      lists no `demo` or `dev` (the production binary has no embedded stack)
#   apns-worker validate    on the notification-event schema's own examples: exit 0, all valid;
#                           and an invalid event on stdin: exit 1, the problem reported
#   apns-worker send        one notification through TLS and HTTP/2 with a provider token (a P-256
#                           key made here) to SIMULATOR, running outside the image on 127.0.0.1 and
#                           trusted through its CA file: exit 0, delivered
# Needs root (chroot, mounts in a private mount namespace), podman, openssl and python3.
set -euo pipefail

if [ $# != 3 ]; then
    echo "usage: $0 IMAGE ROOTFS SIMULATOR" >&2
    exit 2
fi
image=$1
rootfs=$2
simulator=$3
here=$(cd "$(dirname "$0")" && pwd)
schema="$here/../../schemas/notification-event.schema.json"

# ---------------------------------------------------------------------------------------------------
# The root filesystem: `podman create` makes a container without starting it, `podman export` writes
# its file system.
# ---------------------------------------------------------------------------------------------------
start=$(date +%s)
rm -rf "$rootfs"
mkdir -p "$rootfs"
container=$(podman create --quiet "$image")
trap 'podman rm --force "$container" > /dev/null 2>&1 || true' EXIT
podman export "$container" | tar --numeric-owner -C "$rootfs" -xf -
podman rm "$container" > /dev/null
trap - EXIT
echo "extracted $image into $rootfs ($(du -sh "$rootfs" | cut -f1)) in $(($(date +%s) - start)) s"

# What the image runs with (podman run would apply the same).
user=$(podman image inspect --format '{{.Config.User}}' "$image")
workdir=$(podman image inspect --format '{{.Config.WorkingDir}}' "$image")
mapfile -t environment < <(podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$image" | sed '/^$/d')
mapfile -t entrypoint < <(podman image inspect --format '{{range .Config.Entrypoint}}{{println .}}{{end}}' "$image" | sed '/^$/d')
case "$user" in
    "" | 0 | 0:* | root | root:*)
        echo "error: the image runs as root (User '$user')" >&2
        exit 1
        ;;
esac
case "$user" in *:*) userspec=$user ;; *) userspec="$user:$user" ;; esac
echo "runs as $userspec in ${workdir:-/}: ${entrypoint[*]} … with ${environment[*]}"

# Files the checks read, copied into the tmpfs at /tmp: the schema's examples, one per line; a
# provider token key made now; the simulator's CA (below).
inputs=$(mktemp -d)
simulator_pid=""
trap 'if [ -n "$simulator_pid" ]; then kill "$simulator_pid" 2>/dev/null || true; fi; rm -rf "$inputs"' EXIT
python3 -c 'import json, sys
for example in json.load(open(sys.argv[1]))["examples"]:
    print(json.dumps(example))' "$schema" > "$inputs/examples.ndjson"
examples=$(wc -l < "$inputs/examples.ndjson")
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$inputs/AuthKey.p8" 2> /dev/null

# The simulator, outside the image, on a free port; it writes its CA into the inputs.
device=$(printf 'ab%.0s' $(seq 32))
"$simulator" --host 127.0.0.1 --port 0 --tls-dir "$inputs/tls" \
    --token-key "ABCDE12345:KEY1234567:$inputs/AuthKey.p8" --accept-any-device > "$inputs/simulator.out" 2>&1 &
simulator_pid=$!
simulator_port=""
for _ in $(seq 300); do
    simulator_port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$inputs/simulator.out")
    [ -n "$simulator_port" ] && [ -f "$inputs/tls/ca.pem" ] && break
    sleep 0.1
done
if [ -z "$simulator_port" ]; then
    echo "error: $simulator did not start:" >&2
    cat "$inputs/simulator.out" >&2
    exit 1
fi
chmod -R a+rX "$inputs"

# Runs the entrypoint with the given arguments in the root filesystem, in a mount namespace of its
# own (nothing stays mounted afterwards): /proc, /dev, the host's /etc/hosts and /etc/resolv.conf
# (a container runtime provides these), a tmpfs at /tmp holding the inputs, the rest read-only;
# then as the image's user with only the image's environment.
in_image() {
    # shellcheck disable=SC2016 # expanded by the inner shell
    unshare --mount --propagation private --fork sh -ec '
        root=$1 inputs=$2; shift 2
        mount --bind "$root" "$root"
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        for file in /etc/hosts /etc/resolv.conf; do
            [ -f "$root$file" ] || continue
            mount --bind "$file" "$root$file"
        done
        mount -t tmpfs -o mode=1777,size=256m tmpfs "$root/tmp"
        cp -r "$inputs" "$root/tmp/inputs"
        mount -o remount,bind,ro "$root"
        exec "$@"' sh "$rootfs" "$inputs" \
        chroot --userspec="$userspec" "$rootfs" \
        /usr/bin/env -i -C "${workdir:-/}" "${environment[@]}" "${entrypoint[@]}" "$@"
}

failed=""
# Runs one check: the command's status must be the expected one and its output (stdout and stderr)
# must contain the expected text.
check() {
    local name=$1 status=$2 text=$3; shift 3
    local output actual started=$SECONDS
    echo "== $name: ${entrypoint[*]} $*"
    set +e
    output=$("$@" 2>&1)
    actual=$?
    set -e
    printf '%s\n' "$output" | sed 's/^/   /'
    if [ "$actual" != "$status" ]; then
        echo "FAILED: $name exited $actual, expected $status"
        failed="$failed $name"
    elif ! grep -qF -- "$text" <<< "$output"; then
        echo "FAILED: $name did not print '$text'"
        failed="$failed $name"
    else
        echo "ok: $name (exit $actual, $((SECONDS - started)) s)"
    fi
}

start=$(date +%s)
# `--version` once the binary has it; ArgumentParser lists it in --help then.
help=$(in_image --help 2>&1 || true)
if grep -q -- '--version' <<< "$help"; then
    check version 0 "librdkafka 2.14.2" in_image --version
else
    echo "(this build has no --version; --help instead)"
    check help 0 "USAGE: apns-worker" in_image --help
fi
check validate 0 "$examples events: $examples valid, 0 invalid" in_image validate /tmp/inputs/examples.ndjson
invalid='{"id":"x","deviceToken":"zz","topic":"com.example.app","pushType":"alert","payload":{}}'
check validate-invalid 1 "/deviceToken" \
    in_image validate - <<< "$invalid"
if grep -qE '^ +(demo|dev) ' <<< "$help"; then
    echo "FAILED: the image's apns-worker lists demo or dev (built with the Demo trait)"
    failed="$failed no-demo"
else
    echo "ok: no-demo (the image's apns-worker has no embedded stack)"
fi
check send 0 "outcome: delivered" \
    in_image send --host 127.0.0.1 --port "$simulator_port" --ca-file /tmp/inputs/tls/ca.pem \
    --key-file /tmp/inputs/AuthKey.p8 --team-id ABCDE12345 --key-id KEY1234567 --topic com.example.app \
    --device-token "$device" --payload '{"aps":{"alert":"from the image"}}'

# The binary loads only what the runtime stage installs.
echo "== shared libraries of /usr/local/bin/apns-worker"
libraries=$(chroot "$rootfs" /usr/bin/ldd /usr/local/bin/apns-worker)
printf '%s\n' "$libraries" | sed 's/^/   /'
if grep -q "not found" <<< "$libraries"; then
    echo "FAILED: a library apns-worker needs is missing from the image"
    failed="$failed libraries"
fi
echo "checks took $(($(date +%s) - start)) s"

# ---------------------------------------------------------------------------------------------------
# What the runtime stage holds
# ---------------------------------------------------------------------------------------------------
echo "== /usr/local/bin"
(cd "$rootfs/usr/local/bin" && find . -mindepth 1 -printf '%M %u:%g %10s  %P\n' | sort -k4)
echo "== Debian packages (dpkg-query --admindir $rootfs/var/lib/dpkg)"
dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f='${db:Status-Abbrev} ${Package} ${Version} ${Installed-Size}\n' \
    | awk '$1 == "ii" { printf "   %-28s %-28s %6d KiB\n", $2, $3, $4; n++; kib += $4 }
           END { printf "   %d packages, %.1f MiB installed\n", n, kib / 1024 }'
echo "== image"
podman image inspect --format '{{.Id}} {{.Size}}' "$image" | while read -r id size; do
    echo "   $image  id ${id:0:12}  $size bytes ($(numfmt --to=si "$size")B, $(numfmt --to=iec "$size")iB)"
done
podman image inspect --format '{{range $k, $v := .Labels}}   {{$k}}={{$v}}{{println}}{{end}}' "$image" | sed '/^$/d'
echo "   root filesystem: $(du -sh --apparent-size "$rootfs" | cut -f1) apparent"

if [ -n "$failed" ]; then
    echo "FAILED:$failed"
    exit 1
fi
echo "all image checks passed"
