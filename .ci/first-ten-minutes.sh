#!/usr/bin/env bash
# A new user's first ten minutes: what the README's first screen tells them to do, run as it says,
# in the repository root, with the README's own commands:
#
#   swift run rtm serve                          # terminal 1 (creates the development app in rtm-data/)
#   swift run rtm listen room --user bob         # terminal 2
#   swift run rtm pub room "hello" --user alice  # terminal 3: bob's listener prints it
#   Ctrl-C the server, start it again            # the listener prints connected → disconnected,
#                                                # then connecting → connected, and keeps receiving
#
# Run from the package root after `swift test` (or `swift build`) has built the debug products.
# Every process runs in its own process group, as in its own terminal, and "Ctrl-C" is SIGINT to
# that group, as a terminal sends it. Every wait has a deadline; the script ends with one line,
# `first-ten-minutes: PASS`, or `first-ten-minutes: FAIL: <step>` followed by the logs. Every process
# it started is stopped on exit, and `rtm-data/` is removed if it was not there before.
# Needs no network (loopback only) and no root. Port 9600 (the README's) must be free.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
set -m   # job control: each background job gets its own process group with SIGINT not ignored

port=9600
# Every `swift run` first checks the build (it is up to date after `swift test`, but loading the
# package alone takes seconds, more on a busy machine, and a stale build is rebuilt): a command
# started with `swift run` gets this long; what the running processes do gets `deadline`.
build_deadline=${RTM_FIRST_TEN_BUILD_DEADLINE:-600}
deadline=${RTM_FIRST_TEN_DEADLINE:-60}

logs=$(mktemp -d)
had_data=false
[ -e rtm-data ] && had_data=true
started=()        # process group ids of everything started here
step="setup"

say() { echo "first-ten-minutes: $*"; }

show_logs() {
    local f
    for f in "$logs"/*.log; do
        [ -e "$f" ] || continue
        echo "----- $(basename "$f") (last 40 lines)"
        tail -n 40 "$f" || true
    done
    echo "-----"
}

verdict=false
fail() {
    verdict=true
    say "FAIL: $step${1:+: $1}"
    show_logs
    exit 1
}

# Whether a process runs (an exited child stays a zombie until it is waited for: not alive).
alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

cleanup() {
    local status=$? group tries
    set +e
    if [ "$status" -ne 0 ] && [ "$verdict" = false ]; then
        say "FAIL: $step (exit status $status)"
        show_logs
    fi
    for group in "${started[@]}"; do
        alive "$group" || continue
        kill -TERM -- "-$group" 2>/dev/null
        tries=0
        while alive "$group" && [ "$tries" -lt 50 ]; do sleep 0.1; tries=$((tries + 1)); done
        alive "$group" && kill -KILL -- "-$group" 2>/dev/null
        wait "$group" 2>/dev/null
    done
    if [ "$had_data" = false ]; then rm -rf rtm-data; fi
    rm -rf "$logs"
    exit "$status"
}
trap cleanup EXIT
trap 'step="$step (interrupted)"; fail' INT TERM

# Waits until `condition` (a command) succeeds, for at most `seconds`; fails the step otherwise.
# `watch` (a pid, optional): fail at once if that process ends first.
wait_for() {
    local seconds=$1 condition=$2 watch=${3:-}
    local end=$((SECONDS + seconds))
    while ! eval "$condition"; do
        if [ -n "$watch" ] && ! alive "$watch"; then fail "the process ended before: $condition"; fi
        [ "$SECONDS" -lt "$end" ] || fail "not within ${seconds} s: $condition"
        sleep 0.2
    done
}

# GET /health on the README's port answers 200 (bash's /dev/tcp: no curl needed).
healthy() {
    local answer
    answer=$( { exec 3<>"/dev/tcp/127.0.0.1/$port" &&
                printf 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3 &&
                timeout 2 cat <&3; } 2>/dev/null ) || return 1
    [[ "$answer" == "HTTP/1.1 200"* ]]
}
port_open() { { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; }

# Lines of a log matching a fixed string.
count() {
    local n
    n=$(grep -cF -- "$2" "$logs/$1.log" 2>/dev/null) || true
    echo "${n:-0}"
}

# Ctrl-C: SIGINT to the process group, then the exit status within `seconds`.
interrupt() {
    local group=$1 seconds=$2 code=0
    kill -INT -- "-$group"
    wait_for "$seconds" "! alive $group"
    wait "$group" || code=$?
    return "$code"
}

# Ctrl-C to a process group, which must exit with status 0 within `seconds`.
stops_cleanly() {
    local code=0
    interrupt "$1" "$2" || code=$?
    [ "$code" -eq 0 ] || fail "exit status $code"
}

start_server() {
    local log=$1
    swift run rtm serve </dev/null >"$logs/$log.log" 2>&1 &
    server=$!
    started+=("$server")
    wait_for "$build_deadline" "healthy" "$server"
}

step="port $port is free (nothing else may answer in place of the server)"
port_open && fail "something already listens on 127.0.0.1:$port"

step="swift run rtm serve: listening on 127.0.0.1:$port"
start_server server
grep -q "development app" "$logs/server.log" || fail "it did not print the development app"
test -f rtm-data/app.json || fail "no rtm-data/app.json"
say "ok: $step"

step="swift run rtm listen room --user bob: logged in and subscribed"
swift run rtm listen room --user bob </dev/null >"$logs/listener.log" 2>&1 &
listener=$!
started+=("$listener")
wait_for "$build_deadline" '[ "$(count listener "#room snapshot")" -ge 1 ]' "$listener"
say "ok: $step"

step='swift run rtm pub room "hello" --user alice'
timeout "$build_deadline" swift run rtm pub room "hello" --user alice </dev/null >"$logs/pub.log" 2>&1 \
    || fail "exit status $?"
grep -q "published to #room" "$logs/pub.log" || fail "no 'published to #room' line"
say "ok: $step"

step="the listener prints alice's message"
wait_for "$deadline" '[ "$(count listener "#room seq=")" -ge 1 ] && grep -F "#room seq=" "$logs/listener.log" | grep -qF "from alice: hello"' "$listener"
say "ok: $step"

step="Ctrl-C stops the server cleanly"
# A drain: the listener gets a goaway and the server exits once it has gone (--drain-timeout 30 s).
stops_cleanly "$server" 45
say "ok: $step"

step="the listener reports the lost link (connected → disconnected)"
wait_for "$deadline" '[ "$(count listener "connected → disconnected")" -ge 1 ]' "$listener"
say "ok: $step"

step="the server started again: listening"
start_server server-again
say "ok: $step"

step="the listener reconnects by itself (connecting → connected)"
wait_for "$deadline" '[ "$(count listener "connecting → connected")" -ge 2 ]' "$listener"
say "ok: $step"

step="the listener keeps receiving on room"
timeout "$build_deadline" swift run rtm pub room "hello again" --user alice </dev/null >"$logs/pub-again.log" 2>&1 \
    || fail "rtm pub: exit status $?"
wait_for "$deadline" 'grep -qF "from alice: hello again" "$logs/listener.log"' "$listener"
say "ok: $step"

step="Ctrl-C stops the listener (it logs out, exit status 0)"
stops_cleanly "$listener" 15
say "ok: $step"

step="Ctrl-C stops the server again"
stops_cleanly "$server" 45
say "ok: $step"

say "PASS"
