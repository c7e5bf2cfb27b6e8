#!/usr/bin/env bash
# Every build the CI run needs, two at a time, before any test runs: the debug build with the
# tests (the README's test command), the release build of `rtm`, the previous release's `rtm`
# (the rolling upgrade), the ThreadSanitizer build and the fuzz targets. A Swift build keeps one
# core busy for long stretches (a release build's whole-module compile of a large module is one
# process), so two builds side by side finish well before the same builds one after another.
# No test runs meanwhile: the tests' timing sees an idle machine. Each later step's own build
# command then finds its products up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
logs=$(mktemp -d)

# Resolve each build directory's dependencies one after another first: the builds then start
# from their own checkouts and do not race for the shared repository cache.
swift package resolve >/dev/null
swift package --scratch-path .build-tsan resolve >/dev/null
RTM_FAST=1 swift package --scratch-path .build-fast resolve >/dev/null
RTM_FUZZ=1 swift package --scratch-path .build-fuzz resolve >/dev/null
echo "builds: dependencies resolved: $(( $(date +%s) - start )) s"

lane() {   # lane NAME COMMAND...: runs the commands (each a string) in order, logging to $logs/NAME.log
    local name=$1; shift
    local command
    for command in "$@"; do
        echo "== $command ($(( $(date +%s) - start )) s)" >>"$logs/$name.log"
        bash -c "$command" >>"$logs/$name.log" 2>&1 || { echo "== FAILED: $command" >>"$logs/$name.log"; return 1; }
    done
    echo "== done ($(( $(date +%s) - start )) s)" >>"$logs/$name.log"
}

lane debug-tsan "swift build --build-tests" "bash .ci/tsan.sh --build-only" &
a=$!
lane release-previous-fuzz "bash .ci/release-e2e.sh --build-only" "bash .ci/rolling-upgrade.sh --build-only" \
    "bash Fuzz/run.sh --build-only" &
b=$!
status=0
wait "$a" || status=1
wait "$b" || status=1
for log in "$logs"/*.log; do
    echo "---- $(basename "$log" .log)"
    grep -E "^== |Build complete|build: |built|previous release" "$log" || true
    if [ "$status" != 0 ]; then grep -E "error:" "$log" | head -50 || true; tail -n 40 "$log"; fi
done
rm -rf "$logs"
echo "builds: $(( $(date +%s) - start )) s"
exit "$status"
