#!/usr/bin/env bash
# Autobahn|Testsuite against both WebSocket sides: installs `wstest` (Python 2.7,
# pinned versions in .ci/autobahn-requirements.txt) into a virtualenv outside the repository,
# then runs the AutobahnTests suite: `fuzzingclient` against the server's WebSocket layer and
# `fuzzingserver` against the SDK's, each behind a test echo handler. Fails on any case that is
# not OK, NON-STRICT or INFORMATIONAL (reports under .build/autobahn/).
#
# Needs pyenv's Python 2.7.18 (RTM_PYTHON2 to point elsewhere); without it this script fails,
# it never skips. The virtualenv is kept in ~/.cache/rtm-autobahn (RTM_AUTOBAHN_VENV) and
# reused while it still runs.
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="/opt/swift/usr/bin:$PATH"
command -v swift >/dev/null || { echo "autobahn: swift toolchain not found (expected /opt/swift)" >&2; exit 1; }

python2="${RTM_PYTHON2:-/root/.pyenv/versions/2.7.18/bin/python}"
if [ ! -x "$python2" ]; then
    echo "autobahn: Python 2.7 not found at $python2 (set RTM_PYTHON2); Autobahn|Testsuite needs it" >&2
    exit 1
fi
"$python2" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (2, 7) else 1)' \
    || { echo "autobahn: $python2 is not Python 2.7" >&2; exit 1; }

cache="${XDG_CACHE_HOME:-$HOME/.cache}/rtm-autobahn"
venv="${RTM_AUTOBAHN_VENV:-$cache/venv}"
requirements="$PWD/.ci/autobahn-requirements.txt"
stamp="$venv/.requirements"
if ! { [ -x "$venv/bin/wstest" ] && cmp -s "$requirements" "$stamp" && "$venv/bin/wstest" -a >/dev/null 2>&1; }; then
    echo "autobahn: installing Autobahn|Testsuite into $venv"
    rm -rf "$venv"
    mkdir -p "$cache"
    # virtualenv for Python 2.7 (the last versions that create 2.7 environments), installed
    # into the cache, not into pyenv's Python.
    PYTHONUSERBASE="$cache/tools" "$python2" -m pip install --user --quiet --disable-pip-version-check 'virtualenv<20.22'
    PYTHONUSERBASE="$cache/tools" "$python2" -m virtualenv --quiet -p "$python2" "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$stamp"
fi
"$venv/bin/wstest" -a

# The same build settings as .ci/run, so an existing build is reused rather than redone.
export RTM_WARNINGS_AS_ERRORS="${RTM_WARNINGS_AS_ERRORS:-1}"
swift build --build-tests

reports="$PWD/.build/autobahn"
rm -rf "$reports"
mkdir -p "$reports"
RTM_AUTOBAHN=1 RTM_WSTEST="$venv/bin/wstest" RTM_AUTOBAHN_DIR="$reports" \
    swift test --skip-build --no-parallel --filter AutobahnTests
echo "autobahn: all cases passed; reports in $reports"
