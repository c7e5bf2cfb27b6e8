#!/usr/bin/env bash
# A rolling upgrade with two builds: `rtm` of the previous release (the commit pinned below,
# built from this clone's history into .build-previous) beside this one's, on one PostgreSQL
# (ClusterTests.rollingUpgrade). Run from the package root after `swift test` (reuses its build).
set -euo pipefail
cd "$(dirname "$0")/.."
# The release before cross-node call invitations (move it forward at each release).
previous=492fdd474cff223c9382b0d8b60687b07c44638d
start=$(date +%s)
source_dir="$PWD/.build-previous-src"
# A shallow clone lacks the pinned commit: fetch it (or the whole history) first.
if ! git cat-file -e "$previous^{commit}" 2>/dev/null; then
    git fetch --quiet origin "$previous" 2>/dev/null || git fetch --quiet --unshallow 2>/dev/null || true
fi
git cat-file -e "$previous^{commit}" || { echo "the previous release's commit $previous is not in this clone's history"; exit 1; }
if [ ! -d "$source_dir" ]; then
    git worktree add --detach "$source_dir" "$previous" >/dev/null
fi
(cd "$source_dir" && swift build --product rtm --scratch-path "$PWD/../.build-previous" 2>&1 | tail -1)
binary="$PWD/.build-previous/debug/rtm"
test -x "$binary"
echo "previous release ($previous) built: $(( $(date +%s) - start )) s"
RTM_PREVIOUS_BINARY="$binary" RTM_REQUIRE_PREVIOUS_BINARY=1 swift test --skip-build --no-parallel --filter 'ClusterTests/rollingUpgrade'
git worktree remove --force "$source_dir"
echo "rolling upgrade: $(( $(date +%s) - start )) s"
