#!/bin/sh
# make cluster: a local 3-node cluster to try, with the commands docs/cluster.md
# gives: nodes n1-n3 on 127.0.0.1-3, each with its admin API on :2525 and its
# peer listener on :7070 of its own address. n1 bootstraps, n2 and n3 join it.
# Data and logs go to build/cluster; Ctrl-C stops all three (SIGTERM).
# PORT and PEER_PORT override the ports; FRESH=1 starts from empty datadirs.
set -eu
cd "$(dirname "$0")/../.."
BIN=${RIFTGATE_BIN:-bin/riftgate}
DIR=build/cluster
PORT=${PORT:-2525}
PEER_PORT=${PEER_PORT:-7070}
[ "${FRESH:-0}" = 1 ] && rm -rf "$DIR"
mkdir -p "$DIR"
[ -s "$DIR/secret" ] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DIR/secret"

pids=""
stop() {
	trap - INT TERM EXIT
	[ -n "$pids" ] && kill $pids 2>/dev/null || true
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	echo "cluster stopped (data kept in $DIR; FRESH=1 make cluster starts over)"
}
trap stop INT TERM EXIT

node() { # node i flag...: start node i in the background
	i=$1
	shift
	"$BIN" start --host "127.0.0.$i" --port "$PORT" --datadir "$DIR/d$i" \
		--cluster-node-name "n$i" --cluster-listen "127.0.0.$i:$PEER_PORT" \
		--cluster-secret-file "$DIR/secret" --pidfile "$DIR/n$i.pid" --logfile "$DIR/n$i.log" "$@" \
		>"$DIR/n$i.out" 2>&1 &
	pids="$pids $!"
}
wait_admin() { # wait_admin i: until node i's admin API answers
	for _ in $(seq 1 200); do
		if curl -sf "http://127.0.0.$1:$PORT/cluster" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	echo "node n$1 did not start; see $DIR/n$1.out" >&2
	exit 1
}

node 1 --cluster-bootstrap
wait_admin 1
node 2 --cluster-join "http://127.0.0.1:$PEER_PORT"
node 3 --cluster-join "http://127.0.0.1:$PEER_PORT,http://127.0.0.2:$PEER_PORT"
wait_admin 2
wait_admin 3
cat <<MSG
A 3-node riftgate cluster runs on 127.0.0.1-3 (admin API :$PORT, peers :$PEER_PORT).
Try:
  curl 127.0.0.1:$PORT/cluster
  curl -X POST 127.0.0.2:$PORT/imposters -d '{"protocol":"http","port":4545,"stubs":[{"responses":[{"is":{"body":"hi"}}]}]}'
  curl 127.0.0.3:4545/
  curl 127.0.0.1:$PORT/imposters/4545
Logs: $DIR/n1.log $DIR/n2.log $DIR/n3.log. Ctrl-C stops the cluster.
MSG
wait
