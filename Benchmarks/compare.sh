#!/usr/bin/env bash
# The fan-out comparison in one run: this server, the bare transport limit (the reference
# floor-server) and nats-server, under the same load. Builds everything in release mode, starts
# the three servers on loopback, runs each shape REPS times back to back (rtm and floor with the
# same generator, `rtm bench fanout --baseline`; nats with the reference harness's NATS client),
# prints medians and ratios, and stops what it started.
#
#   Benchmarks/compare.sh                 # ~6 min with the defaults
#   REPS=5 SECS=5 SHAPES="1:0 100:0 1000:0 1000:400" Benchmarks/compare.sh
#
# Environment: REPS (3), SECS (5), SHAPES ("subs:rate" pairs, rate 0 = max), FANOUT_BENCH (path
# of the reference harness, default ../shared/tools/fanout-bench), OUT (results directory),
# SKIP_BUILD=1 (use the binaries already built).
#
# The generator runs on its honest defaults, what real clients send: every frame masked with its
# own random key (RFC 6455 §5.3), one publish per frame, client message ids. Pass none of the
# shortcut flags (--unmasked-shortcut, --no-msg-id) here: summarize.py flags any run that took one.
#
# Both Swift servers are built the same way: release, and without run-time exclusivity checks in
# every module, dependencies included (`-Xswiftc -enforce-exclusivity=unchecked`; `RTM_FAST=1`
# does the same for this package's own modules). That is how `rtm serve` should be built for
# deployment; giving the floor the same flags keeps the comparison apples to apples.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
REPS=${REPS:-3}
SECS=${SECS:-5}
SHAPES=${SHAPES:-"1:0 100:0 1000:0 1000:400"}
FANOUT_BENCH=${FANOUT_BENCH:-../shared/tools/fanout-bench}
OUT=${OUT:-Benchmarks/results/$(date +%Y%m%d-%H%M%S)}
RTM_PORT=19700 FLOOR_PORT=18080 NATS_PORT=14222
mkdir -p "$OUT"

FAST=(-c release -Xswiftc -enforce-exclusivity=unchecked)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    echo "building (release)…" >&2
    RTM_FAST=1 swift build "${FAST[@]}" --product rtm --scratch-path .build-fast >&2
    swift build "${FAST[@]}" --package-path "$FANOUT_BENCH" --scratch-path .build-fanout-fast >&2
fi
RTM=.build-fast/release/rtm
FB=.build-fanout-fast/release/fanout-bench
if ! command -v nats-server >/dev/null; then
    if [ "$(id -u)" = 0 ]; then (apt-get update -qq && apt-get install -y -qq nats-server) >&2 || true; fi
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

DATA=$(mktemp -d)
APP=0123456789abcdef0123456789abcdef CERT=fedcba9876543210fedcba9876543210
$RTM serve --port $RTM_PORT --data-dir "$DATA" --app-id $APP --app-certificate $CERT \
    --publish-rate 0 --login-rate 0 --log-level error >/dev/null 2>&1 & pids+=($!); RTM_PID=$!
$FB floor-server --host 127.0.0.1 --port $FLOOR_PORT >/dev/null 2>&1 & pids+=($!); FLOOR_PID=$!
NATS_PID=""
if command -v nats-server >/dev/null; then
    printf 'listen: 127.0.0.1:%s\n' $NATS_PORT > "$OUT/nats.conf"
    nats-server -c "$OUT/nats.conf" >/dev/null 2>&1 & pids+=($!); NATS_PID=$!
fi
sleep 1

for shape in $SHAPES; do
    subs=${shape%%:*}; rate=${shape##*:}
    for rep in $(seq "$REPS"); do
        echo "subs=$subs rate=$rate rep=$rep" >&2
        $RTM bench fanout --url ws://127.0.0.1:$RTM_PORT --baseline ws://127.0.0.1:$FLOOR_PORT \
            --app-id $APP --app-certificate $CERT --subs "$subs" --rate "$rate" --seconds "$SECS" \
            --server-pid $RTM_PID --baseline-pid $FLOOR_PID --json \
            | python3 -c 'import json,sys; [print(json.dumps(dict(r, server=("rtm","floor")[i], subs='"$subs"', shape_rate='"$rate"', rep='"$rep"'))) for i, r in enumerate(json.load(sys.stdin))]' \
            >> "$OUT/runs.jsonl" || echo "rtm/floor run failed (loss or disconnection reported)" >&2
        if [ -n "$NATS_PID" ]; then
            $FB nats --host 127.0.0.1 --port $NATS_PORT --subs "$subs" --rate "$rate" --size 100 --seconds "$SECS" \
                --server-pid $NATS_PID --json \
                | python3 -c 'import json,sys; r=json.load(sys.stdin); r.update(server="nats", subs='"$subs"', shape_rate='"$rate"', rep='"$rep"'); print(json.dumps(r))' \
                >> "$OUT/runs.jsonl" || echo "nats run failed" >&2
        fi
    done
done

python3 Benchmarks/summarize.py "$OUT/runs.jsonl" | tee "$OUT/summary.md"
python3 Benchmarks/plot.py "$OUT/runs.jsonl" "$OUT/fanout.svg"
if command -v convert >/dev/null && convert "$OUT/fanout.svg" "$OUT/fanout.png" 2>/dev/null; then
    echo "chart: $OUT/fanout.png" >&2
else
    echo "chart: $OUT/fanout.svg (install imagemagick for a PNG)" >&2
fi
