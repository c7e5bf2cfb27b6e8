#!/usr/bin/env bash
# The README's release build of `rtm`, and the process tests run against it (RTM_BINARY).
# Reuses the debug test bundle already built by `swift test`; the binary under test is the
# release one. Run from the package root after `swift test`. `--build-only` builds and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# Exactly the README's command (Operations → Release build).
RTM_FAST=1 swift build -c release -Xswiftc -enforce-exclusivity=unchecked --product rtm --scratch-path .build-fast
echo "release build: $(( $(date +%s) - start )) s"
binary="$PWD/.build-fast/release/rtm"
test -x "$binary"
[ "${1:-}" = "--build-only" ] && exit 0
# Every test that starts `rtm` processes (see EndToEndProcessTests for the list of what users see).
filter='EndToEndProcessTests'
filter+='|ProcessTests/(suspendedProcess|unprivileged)'
filter+='|ClusterTests/(serveProcesses|zombieNodeIsFenced)|ClusterUserMessageTests/killedNodeProcess'
filter+='|ClusterServicesTests/killedNodeProcessReleasesLocks|ClusterSessionTests/deadNodeUsersTimeOut'
filter+='|ClusterDatabaseRestartTests/databaseRestartUnderLoad'
filter+='|DeliveryTests/userMessageSurvivesKill9|UserMessageBinaryTests/(acknowledgedSurviveKill9Midstream|resendAfterKill9StoredOnce)'
filter+='|DrainTests/sigtermDrainsProcess|SignalingCLITests|InterruptTests|TLSTests/serveProcessReloadsOnHangup|ServeOptionsTests/storeFlags'
RTM_BINARY="$binary" swift test --skip-build --no-parallel --filter "$filter"
echo "release end-to-end: $(( $(date +%s) - start )) s"
