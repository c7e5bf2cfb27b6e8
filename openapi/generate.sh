#!/usr/bin/env bash
# Generates Sources/RTMAdminAPI (the admin API's types, server routes and client) from
# openapi/admin.yaml with swift-openapi-generator (the version Package.swift's runtime goes
# with), built once into .build-openapi-generator.
# With --check: generates into a scratch directory and fails when the committed files differ,
# or when a committed .swift file there is one the document no longer gives.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.14.3
tool_dir=.build-openapi-generator
if [ ! -x "$tool_dir/swift-openapi-generator/.build/debug/swift-openapi-generator" ]; then
    rm -rf "$tool_dir" && mkdir -p "$tool_dir"
    git clone --quiet --depth 1 --branch "$version" https://github.com/apple/swift-openapi-generator "$tool_dir/swift-openapi-generator"
    swift build --package-path "$tool_dir/swift-openapi-generator" --product swift-openapi-generator
fi
generator="$tool_dir/swift-openapi-generator/.build/debug/swift-openapi-generator"
output=Sources/RTMAdminAPI
if [ "${1:-}" = "--check" ]; then
    output=$(mktemp -d)
    trap 'rm -rf "$output"' EXIT
fi
log=$(mktemp)
if ! "$generator" generate openapi/admin.yaml --config Sources/RTMAdminAPI/openapi-generator-config.yaml --output-directory "$output" >"$log" 2>&1; then
    cat "$log"
    exit 1
fi
rm -f "$log"
if [ "${1:-}" = "--check" ]; then
    for file in "$output"/*.swift; do
        if ! cmp -s "$file" "Sources/RTMAdminAPI/$(basename "$file")"; then
            echo "Sources/RTMAdminAPI/$(basename "$file") is not what openapi/admin.yaml gives: run openapi/generate.sh and commit the result"
            exit 1
        fi
    done
    for file in Sources/RTMAdminAPI/*.swift; do
        if [ ! -f "$output/$(basename "$file")" ]; then
            echo "$file is not generated from openapi/admin.yaml any more: remove it"
            exit 1
        fi
    done
    echo "Sources/RTMAdminAPI is current with openapi/admin.yaml"
fi
