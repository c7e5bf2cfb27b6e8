#!/usr/bin/env bash
# Builds the libFuzzer targets (RTM_FUZZ=1, address sanitizer, into .build-fuzz) and runs each
# for a bounded time, starting from the seed corpus in Fuzz/corpus/<target>. Fails (exit 1) if any
# target finds a crash, a sanitizer report or a leak; the input is left in
# .build-fuzz/artifacts/<target>-crash-… (replay it: .build-fuzz/debug/<target> <file>).
#
#   Fuzz/run.sh [seconds per target, default 60] [target ...]
#   Fuzz/run.sh --build-only [target ...]   (builds the targets, default every one, and stops)
#
# Needs a toolchain with libFuzzer (the swift.org one on Linux). What the fuzzer learns goes to
# .build-fuzz/corpus/<target>, kept between runs; the seeds in the repository are not modified.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

build_only=false
seconds=60
if [ "${1:-}" = "--build-only" ]; then
    build_only=true
    shift
else
    seconds="${1:-60}"
    shift || true
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(FuzzFrameCodec FuzzBinaryFrame FuzzTokens FuzzServerFrameDecoder FuzzJSONPublish)

export RTM_FUZZ=1
scratch=.build-fuzz
start=$(date +%s)
for target in "${targets[@]}"; do
    swift build --scratch-path "$scratch" --product "$target" 2>&1 | grep -v "Cannot export local symbol" | tail -n 3
done
echo "fuzz build: $(( $(date +%s) - start )) s"
$build_only && exit 0

bin="$scratch/debug"
mkdir -p "$scratch/artifacts"
failed=()
for target in "${targets[@]}"; do
    work="$scratch/corpus/$target"
    mkdir -p "$work"
    echo "== $target: ${seconds} s"
    # -timeout: one input taking longer than 10 s is a finding (a hang); -rss_limit_mb bounds a
    # runaway allocation; the first corpus directory receives new inputs, the seeds are read only.
    if ! "$bin/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$scratch/artifacts/$target-" "$work" "Fuzz/corpus/$target" \
            >"$scratch/$target.log" 2>&1; then
        failed+=("$target")
        tail -n 40 "$scratch/$target.log"
    fi
    grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)|^#[0-9]+.*DONE" "$scratch/$target.log" || true
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "FUZZ FAILURES: ${failed[*]} (inputs in $scratch/artifacts)"
    exit 1
fi
echo "fuzz: no findings in ${targets[*]}"
