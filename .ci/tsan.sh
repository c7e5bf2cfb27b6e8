#!/usr/bin/env bash
# Thread Sanitizer run of the concurrency-heavy suites: the user-message mailbox and stores,
# the cluster (channel log, user messages, sessions, services across nodes), fan-out and
# delivery, and the SDK's reconnection through fault proxies. Builds into .build-tsan.
# Any ThreadSanitizer report fails the run (halt_on_error), as does a failing test.
# `--build-only` builds and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
swift build --build-tests --sanitize thread --scratch-path .build-tsan
echo "tsan build: $(( $(date +%s) - start )) s"
[ "${1:-}" = "--build-only" ] && exit 0
filter='RTMPostgresTests'
filter+='|Cluster[A-Za-z]*Tests|UserMessageBinaryTests|CommitDelayTests|SQLiteUserMessageStoreTests'
filter+='|DeliveryTests|MessageBatchTests|MessagingTests|FaultTests|ConnectionTests'
filter+='|EndToEndProcessTests'
# Left to the ordinary run: ClusterPublishOrderTests publishes flat out for throughput, which
# the sanitizer's slowdown (5-10x) turns into disconnections, not into a finding; and
# ClusterFailoverStreamTests, a 15 s failover scenario whose pass condition (every message
# delivered although the receiver's node stalls) is about time, which the slowdown stretches
# past the per-receiver cap (its code paths run in the other cluster suites here).
skip='ClusterPublishOrderTests|ClusterFailoverStreamTests'
log=$(mktemp)
status=0
# SWIFT_BACKTRACE=enable=no: after a report the sanitizer aborts, and the Swift runtime's
# backtracer then tried for ever to suspend the sanitizer's threads (the run hung instead of
# failing); the sanitizer's own report says where. The timeout bounds the run either way.
SWIFT_BACKTRACE=enable=no \
TSAN_OPTIONS="halt_on_error=1 abort_on_error=1 second_deadlock_stack=1 history_size=4 suppressions=$PWD/.ci/tsan.supp" \
    timeout --kill-after=30 1800 swift test --skip-build --sanitize thread --scratch-path .build-tsan --no-parallel --filter "$filter" --skip "$skip" 2>&1 | tee "$log" || status=$?
if grep -q "ThreadSanitizer" "$log"; then
    echo "ThreadSanitizer reported a problem (see above)"
    status=1
fi
rm -f "$log"
echo "tsan: $(( $(date +%s) - start )) s"
exit "$status"
