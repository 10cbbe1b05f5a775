#!/bin/sh
# make bench: side-by-side benchmarks of riftgate, a raw fasthttp server and
# Mountebank 2.9.1, written to docs/benchmarks.md. The Makefile has built
# bin/riftgate, build/wasm and build/node before this runs.
#
# The servers are pinned to CPU 0 (riftload bench starts them under taskset);
# this script pins the load generator, and the wrk it runs, to CPU 1.
# Extra arguments go to `riftload bench` (see `riftload bench -h`); the soak
# (-soak, 10 minutes by default) runs after the rounds.
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
# The in-process benchmarks first, on the servers' CPU, while nothing else
# of the bench runs: issue #16's per-request costs, reported with the load.
# They are compiled with riftgate's profile (cmd/riftgate/default.pgo), as
# the binary under load is.
INPROC=build/bench-inprocess.txt
mkdir -p build
SPIN=""
[ -n "$SERVER_CPU" ] && SPIN="taskset -c $SERVER_CPU"
PGO=off
[ -f cmd/riftgate/default.pgo ] && PGO="$PWD/cmd/riftgate/default.pgo"
RIFTGATE_WASM_DIR=${RIFTGATE_WASM_DIR:-build/wasm} $SPIN "$GO" test -pgo="$PGO" -run '^$' -bench '^BenchmarkServe$' \
	-benchmem -count 5 ./gateway/ | tee "$INPROC"
exec $PIN bin/riftload bench -server-cpu "$SERVER_CPU" -inprocess "$INPROC" -out docs/benchmarks.md "$@"
