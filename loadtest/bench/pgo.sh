#!/bin/sh
# make pgo: regenerates cmd/riftgate/default.pgo, the CPU profile that
# `go build` optimises riftgate with (profile-guided optimisation: go build
# uses a main package's default.pgo by itself). The profile is riftgate's
# own, taken over one short round of make bench's loads (`riftload bench
# -profile-dir`): every case, on one node and on the 3-node cluster. The
# Makefile has built bin/riftgate, build/wasm and build/node before this runs.
# Extra arguments go to `riftload bench`.
set -eu
cd "$(dirname "$0")/../.."
GO=${GO:-go}
mkdir -p bin build
"$GO" build -o bin/riftload ./cmd/riftload

PIN=""
SERVER_CPU=""
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
	PIN="taskset -c 1"
	SERVER_CPU=0
fi
DIR=build/pgo
rm -rf "$DIR"
$PIN bin/riftload bench -server-cpu "$SERVER_CPU" -rounds 1 -slices 1 -d 5s -wrk "" -soak 0 \
	-profile-dir "$DIR" -out "" "$@" >build/pgo-report.md
"$GO" tool pprof -proto "$DIR"/*.pprof >cmd/riftgate/default.pgo.new
mv cmd/riftgate/default.pgo.new cmd/riftgate/default.pgo
echo "cmd/riftgate/default.pgo: $(ls "$DIR" | wc -l) profiles merged"
