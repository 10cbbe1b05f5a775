#!/bin/sh
# ab-cluster.sh A B [SLICES]: the stateful cluster case of two riftgate
# builds, A against B, in one run. Two 3-node clusters run at once (A on
# 127.0.0.21-23, B on 127.0.0.31-33, every node pinned to CPU 0) and take
# turns under the same load (riftload on CPU 1: 64 virtual users logging
# in and out of their own flows, spread over the three nodes), in 3 s
# slices, the order alternating (A B, B A, ...); it prints B's summed
# throughput over A's. Running both clusters through the whole run, rather
# than one after the other, is what makes a few percent visible on a
# shared machine: sequential runs of one build swing by 30% here, and one
# build against itself gives 0.99-1.00 over 16 slices (0.91 over 4).
# DURABILITY (memory) is the imposter's. Data goes to a temporary folder;
# every process it started is stopped on exit.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 riftgate-A riftgate-B [slices]" >&2; exit 2; }
A=$1
B=$2
SLICES=${3:-10}
DURABILITY=${DURABILITY:-memory}
cd "$(dirname "$0")/../.."
LOAD=${RIFTLOAD:-bin/riftload}
[ -x "$LOAD" ] || go build -o "$LOAD" ./cmd/riftload
DIR=$(mktemp -d)
pids=""
stop() {
	trap - INT TERM EXIT
	[ -n "$pids" ] && kill $pids 2>/dev/null || true
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	rm -rf "$DIR"
}
trap stop INT TERM EXIT
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/secret"

cluster() { # cluster BIN NET: three nodes on 127.0.0.NET1-3
	for i in 1 2 3; do
		h=127.0.0.$2$i
		join="--cluster-bootstrap"
		[ "$i" = 1 ] || join="--cluster-join http://127.0.0.${2}1:7070"
		taskset -c 0 "$1" start --host "$h" --port 2525 --datadir "$DIR/$2$i" --nologfile \
			--pidfile "$DIR/$2$i.pid" --cluster-node-name "n$i" --cluster-listen "$h:7070" \
			--cluster-secret-file "$DIR/secret" $join >"$DIR/$2$i.out" 2>&1 &
		pids="$pids $!"
		for _ in $(seq 1 100); do
			curl -sf "http://$h:2525/imposters" >/dev/null 2>&1 && break
			sleep 0.1
		done
	done
}
cluster "$A" 2
cluster "$B" 3
for net in 2 3; do
	for _ in $(seq 1 150); do
		[ "$(curl -s "http://127.0.0.${net}1:2525/cluster" | grep -o '"voter"' | wc -l)" = 3 ] && break
		sleep 0.2
	done
	curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' "http://127.0.0.${net}1:2525/imposters" --data-binary @- <<EOF
{"protocol":"http","port":4545,"_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id","durability":"$DURABILITY"}},
 "defaultResponse":{"statusCode":404,"body":"no match"},"stubs":[
 {"scenarioName":"session","requiredScenarioState":"Started","newScenarioState":"in","predicates":[{"equals":{"method":"POST","path":"/login"}}],"responses":[{"is":{"statusCode":200,"headers":{"Connection":"keep-alive"},"body":"in"}}]},
 {"scenarioName":"session","requiredScenarioState":"in","newScenarioState":"Started","predicates":[{"equals":{"method":"POST","path":"/logout"}}],"responses":[{"is":{"statusCode":200,"headers":{"Connection":"keep-alive"},"body":"out"}}]}]}
EOF
done
cat >"$DIR/scenario.json" <<'EOF'
{"name":"session","steps":[{"method":"POST","path":"/login","expectStatus":200},{"method":"POST","path":"/logout","expectStatus":200}]}
EOF
sleep 2

slice() { # slice NET: one 3 s slice on that cluster; prints its throughput
	taskset -c 1 "$LOAD" run -c 64 -d 3s -warmup 300ms -scenario "$DIR/scenario.json" -format json -progress never \
		"http://127.0.0.${1}1:4545" "http://127.0.0.${1}2:4545" "http://127.0.0.${1}3:4545" 2>/dev/null |
		sed -n 's/.*"throughput": *\([0-9.]*\).*/\1/p' | head -n 1
}
for i in $(seq 1 "$SLICES"); do
	order="2 3"
	[ $((i % 2)) = 0 ] && order="3 2"
	for net in $order; do
		name=A
		[ "$net" = 3 ] && name=B
		echo "slice $i $name $(slice "$net")"
	done
done | awk '{ print; sum[$3] += $4 } END { printf "A %.0f req/s, B %.0f req/s, B/A %.3f\n", sum["A"] / NR * 2, sum["B"] / NR * 2, sum["B"] / sum["A"] }'
