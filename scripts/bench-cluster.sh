#!/usr/bin/env bash
# Runs `settee bench` against a local 3-node cluster of separate processes
# (q=8 n=3 by default), the setup of issue 3's benchmark.
#   scripts/bench-cluster.sh [BIN] [bench flags...]
# BIN defaults to bin/settee (make build). Ports 17984-17986 and 17101-17103.
set -euo pipefail
BIN=${1:-bin/settee}
shift || true
dir=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
for i in 1 2 3; do
	join=()
	[ "$i" -gt 1 ] && join=(--join 127.0.0.1:17984)
	"$BIN" serve --name "n$i@127.0.0.1" --data-dir "$dir/n$i" --http "127.0.0.1:1798$((i + 3))" \
		--node-addr "127.0.0.1:1710$i" --cluster-secret bench --admin admin:pw "${join[@]}" >"$dir/n$i.log" 2>&1 &
	pids+=($!)
	sleep 0.5
done
for _ in $(seq 60); do
	n=$(curl -s -u admin:pw http://127.0.0.1:17984/_membership | grep -o '@127.0.0.1' | wc -l || true)
	[ "$n" -ge 6 ] && break
	sleep 1
done
"$BIN" bench --url http://admin:pw@127.0.0.1:17984 --q 8 --n 3 "$@"
