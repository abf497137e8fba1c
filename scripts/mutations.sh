#!/usr/bin/env bash
# Shows the deterministic simulation finds defects: applies each deliberate defect of
# Tests/SimulationTests/Mutations/*.patch to the sources in turn, builds, runs the simulation on
# MUTATION_SEEDS seeds (1000), and expects it to fail; then takes the defect out again. Prints, for
# each, the first seed that caught it and what broke, or "SURVIVED". Exits 1 when any survived, or
# when the tree has changes to Sources (a patch must apply to clean sources). Installs nothing.
#
#   scripts/mutations.sh [NAME...]     (`make mutations`; names without .patch, default all)
#
# Environment: SWIFT (default swift), SWIFTPM_FLAGS, MUTATION_SEEDS.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
read -r -a SWIFTPM_FLAGS <<< "${SWIFTPM_FLAGS:-}"
seeds=${MUTATION_SEEDS:-1000}
git diff --quiet -- Sources || { echo "Sources has changes: commit or stash them first" >&2; exit 2; }
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for patch in Tests/SimulationTests/Mutations/*.patch; do names+=("$(basename "$patch" .patch)"); done
fi
survived=""
for name in "${names[@]}"; do
    patch=Tests/SimulationTests/Mutations/$name.patch
    git apply "$patch"
    trap 'git apply -R "$patch"' EXIT
    log=.build/mutation-$name.log
    if ! "$SWIFT" build --build-tests "${SWIFTPM_FLAGS[@]}" > "$log" 2>&1; then
        echo "$name: does not build (see $log)"; survived="$survived $name"
    elif SIMULATION_SEEDS=$seeds "$SWIFT" test --skip-build "${SWIFTPM_FLAGS[@]}" --filter '^SimulationTests\.' >> "$log" 2>&1; then
        echo "$name: SURVIVED $seeds seeds"; survived="$survived $name"
    else
        caught=$(grep -ac '^FAILED seed' "$log" || true)
        echo "$name: caught ($caught+ of $seeds seeds failed); first: $(grep -a -m1 '^FAILED seed' "$log" | cut -c8-300)"
    fi
    git apply -R "$patch"
    trap - EXIT
done
"$SWIFT" build --build-tests "${SWIFTPM_FLAGS[@]}" > /dev/null
[ -z "$survived" ] || { echo "SURVIVED:$survived"; exit 1; }
echo "every mutation was caught"
