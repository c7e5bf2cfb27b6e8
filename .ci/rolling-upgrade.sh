#!/usr/bin/env bash
# A rolling upgrade with two builds: `rtm` of the previous release (the commit pinned below,
# built from this clone's history into .build-previous) beside this one's, on one PostgreSQL
# (ClusterTests.rollingUpgrade). Run from the package root after `swift test` (reuses its build).
# `--build-only` builds the previous release (or finds it kept) and stops.
#
# The previous release's binary is the same for every run on one toolchain, so it is kept in
# ${XDG_CACHE_HOME:-~/.cache}/rtm-ci/, keyed by the pinned commit and the toolchain's version,
# as a user would keep a downloaded release (the Autobahn venv is kept there likewise); a
# machine without it builds it from the history. RTM_CI_NO_CACHE=1 always builds.
set -euo pipefail
cd "$(dirname "$0")/.."
# The release before cross-node call invitations (move it forward at each release).
previous=492fdd474cff223c9382b0d8b60687b07c44638d
start=$(date +%s)
source_dir="$PWD/.build-previous-src"
toolchain=$(swift --version 2>/dev/null | head -1 | cksum | cut -d' ' -f1)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/rtm-ci/previous-$previous-$toolchain"
binary="$cache/rtm"

if [ "${RTM_CI_NO_CACHE:-0}" = "1" ] || ! [ -x "$binary" ] || ! "$binary" --help >/dev/null 2>&1; then
    # A shallow clone lacks the pinned commit: fetch it (or the whole history) first.
    if ! git cat-file -e "$previous^{commit}" 2>/dev/null; then
        git fetch --quiet origin "$previous" 2>/dev/null || git fetch --quiet --unshallow 2>/dev/null || true
    fi
    git cat-file -e "$previous^{commit}" || { echo "the previous release's commit $previous is not in this clone's history"; exit 1; }
    if [ ! -d "$source_dir" ]; then
        git worktree add --detach "$source_dir" "$previous" >/dev/null
    fi
    (cd "$source_dir" && swift build --product rtm --scratch-path "$PWD/../.build-previous" 2>&1 | tail -1)
    git worktree remove --force "$source_dir"
    built="$PWD/.build-previous/debug"
    test -x "$built/rtm"
    # The binary and the resource bundles beside it (Bundle.module looks for them there).
    rm -rf "$cache.tmp" && mkdir -p "$cache.tmp"
    cp -a "$built/rtm" "$cache.tmp/"
    for bundle in "$built"/*.resources; do [ -e "$bundle" ] && cp -a "$bundle" "$cache.tmp/"; done
    rm -rf "$cache" && mv "$cache.tmp" "$cache"
    echo "previous release ($previous) built: $(( $(date +%s) - start )) s (kept in $cache)"
else
    echo "previous release ($previous): $binary"
fi
[ "${1:-}" = "--build-only" ] && exit 0
RTM_PREVIOUS_BINARY="$binary" RTM_REQUIRE_PREVIOUS_BINARY=1 swift test --skip-build --no-parallel --filter 'ClusterTests/rollingUpgrade'
echo "rolling upgrade: $(( $(date +%s) - start )) s"
