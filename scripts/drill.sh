#!/usr/bin/env bash
# Fault drills against the compose cluster (issue 6): a writer runs
# throughout and records every acknowledged write; after each drill every
# acknowledged write must be readable from every node. Prints what it does
# and a summary line "N passed, N failed". Skips (exit 0) without Docker.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! docker info >/dev/null 2>&1; then
	echo "drill: no Docker engine here, skipped"
	exit 0
fi
if docker compose version >/dev/null 2>&1; then
	COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null; then
	COMPOSE=(docker-compose)
else
	echo "drill: no docker compose, skipped"
	exit 0
fi

export SETTEE_ADMIN=admin:drill-pw SETTEE_CLUSTER_SECRET=drill-secret-$$
PROJECT=settee-drill-$$
DC=("${COMPOSE[@]}" -p "$PROJECT")
URLS=(http://127.0.0.1:5984 http://127.0.0.1:5985 http://127.0.0.1:5986)
AUTH=(-u "$SETTEE_ADMIN")
WORK=$(mktemp -d)
passed=0 failed=0

cleanup() {
	[ -n "${WRITER:-}" ] && kill "$WRITER" 2>/dev/null
	"${DC[@]}" down -v >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT

check() { # name, then a command that succeeds when the check passes
	local name=$1; shift
	if "$@"; then echo "PASS $name"; passed=$((passed + 1)); else echo "FAIL $name"; failed=$((failed + 1)); fi
}

wait_members() { # every node sees 3 live nodes within 60 s
	for _ in $(seq 120); do
		local ok=0
		for u in "${URLS[@]}"; do
			curl -sf "${AUTH[@]}" "$u/_membership" 2>/dev/null | grep -q '"all_nodes":\["settee@settee1","settee@settee2","settee@settee3"\]' && ok=$((ok + 1))
		done
		[ "$ok" = 3 ] && return 0
		sleep 0.5
	done
	return 1
}

writer() { # writes through a random live node; records acked ids
	local i=0
	while :; do
		i=$((i + 1))
		local u=${URLS[$((RANDOM % 3))]}
		code=$(curl -s -o /dev/null -w '%{http_code}' -m 10 "${AUTH[@]}" -X PUT "$u/drill/w$i" -d '{"v":1}')
		if [ "$code" = 201 ] || [ "$code" = 202 ]; then echo "w$i" >>"$WORK/acked"; fi
	done
}

all_acked_everywhere() { # within 60 s, every node holds every acked id
	sort -u "$WORK/acked" >"$WORK/want"
	for _ in $(seq 60); do
		local ok=0
		for u in "${URLS[@]}"; do
			curl -sf "${AUTH[@]}" "$u/drill/_all_docs" 2>/dev/null | grep -o '"id":"w[0-9]*"' | cut -d'"' -f4 | sort -u >"$WORK/have" || continue
			comm -23 "$WORK/want" "$WORK/have" | grep -q . || ok=$((ok + 1))
		done
		[ "$ok" = 3 ] && return 0
		sleep 1
	done
	echo "  missing on some node: $(comm -23 "$WORK/want" "$WORK/have" | head -5 | tr '\n' ' ')"
	return 1
}

echo "== build and start"
make -s docker >/dev/null || { echo "FAIL make docker"; echo "0 passed, 1 failed"; exit 1; }
"${DC[@]}" up -d >/dev/null 2>&1
check "three nodes form a cluster" wait_members
curl -sf "${AUTH[@]}" -X PUT "${URLS[0]}/drill?q=4&n=3" >/dev/null
: >"$WORK/acked"
writer & WRITER=$!
sleep 3

echo "== stop one node and start it again"
"${DC[@]}" stop settee3 >/dev/null 2>&1; sleep 5
"${DC[@]}" start settee3 >/dev/null 2>&1
check "node back in the cluster" wait_members
sleep 2
check "every acknowledged write on every node (stop/start)" all_acked_everywhere

echo "== kill a node mid-write"
docker kill "$(docker ps --format '{{.Names}}' | grep -E "^${PROJECT}[_-]settee2[_-]1$" | head -1)" >/dev/null 2>&1
sleep 5
"${DC[@]}" start settee2 >/dev/null 2>&1
check "killed node back" wait_members
sleep 2
check "every acknowledged write on every node (kill)" all_acked_everywhere

echo "== partition one node from the others, then reconnect it"
NET=$(docker network ls --format '{{.Name}}' | grep -E "^${PROJECT}[_-]default$" | head -1)
C3=$(docker ps --format '{{.Names}}' | grep -E "^${PROJECT}[_-]settee3[_-]1$" | head -1)
docker network disconnect "$NET" "$C3" >/dev/null 2>&1
sleep 8
docker network connect --alias settee3 "$NET" "$C3" >/dev/null 2>&1
check "partitioned node back" wait_members
sleep 2
check "every acknowledged write on every node (partition)" all_acked_everywhere

echo "== rolling restart"
for s in settee1 settee2 settee3; do
	"${DC[@]}" restart "$s" >/dev/null 2>&1
	wait_members || true
done
check "cluster after rolling restart" wait_members
kill "$WRITER" 2>/dev/null; wait "$WRITER" 2>/dev/null; WRITER=
check "every acknowledged write on every node (rolling restart)" all_acked_everywhere
echo "acknowledged writes: $(sort -u "$WORK/acked" | wc -l)"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
