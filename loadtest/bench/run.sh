#!/bin/sh
# make bench: side-by-side benchmarks of riftgate, a raw fasthttp server and
# Mountebank 2.9.1, written to docs/benchmarks.md. The Makefile has built
# bin/riftgate, build/wasm and build/node before this runs.
#
# The servers are pinned to CPU 0 (riftload bench starts them under taskset);
# this script pins the load generator, and the wrk it runs, to CPU 1.
# Extra arguments go to `riftload bench` (see `riftload bench -h`).
set -eu
cd "$(dirname "$0")/../.."
GO=${GO:-go}
mkdir -p bin
"$GO" build -o bin/riftload ./cmd/riftload

PIN=""
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
	PIN="taskset -c 1"
	SERVER_CPU=0
else
	SERVER_CPU=""
fi
exec $PIN bin/riftload bench -server-cpu "$SERVER_CPU" -out docs/benchmarks.md "$@"
