#!/usr/bin/env bash
# Fault drills against the compose cluster (issue 6): a writer runs
# throughout and records every acknowledged write; after each drill every
# acknowledged write must be readable from every node. During the partition
# both sides edit the same docs; after it every node must keep both edits,
# the same winner and the other in _conflicts. Prints what it does and a
# summary line "N passed, N failed". Skips (exit 0) without Docker.
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
SIDE=$PROJECT-side # the partitioned node's own network: keeps its published port
CONFLICT_IDS=(c1 c2 c3)
passed=0 failed=0

cleanup() {
	[ -n "${WRITER:-}" ] && kill "$WRITER" 2>/dev/null
	"${DC[@]}" down -v >/dev/null 2>&1
	docker network rm "$SIDE" >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP # so that cleanup runs then too

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

within() { # seconds, then a command retried once a second until it succeeds; says $WHY when not
	local n=$1; shift
	WHY=
	for _ in $(seq "$n"); do
		"$@" && return 0
		sleep 1
	done
	echo "  $WHY"
	return 1
}

put_rev() { # URL, body: PUT, then print the new rev when acknowledged (201 or 202)
	local out code
	out=$(curl -s -m 10 "${AUTH[@]}" -X PUT "$1" -d "$2" -w '\n%{http_code}')
	code=${out##*$'\n'}
	if [ "$code" != 201 ] && [ "$code" != 202 ]; then
		echo "  PUT $1: $code ${out%$'\n'*}"
		return 1
	fi
	grep -o '"rev":"[^"]*"' <<<"$out" | cut -d'"' -f4
}

conflict_base() { # each conflict doc written to all three copies (w=3)
	local id rev
	for id in "${CONFLICT_IDS[@]}"; do
		rev=$(put_rev "${URLS[0]}/drill/$id?w=3" '{"side":"base"}') || { echo "$rev"; return 1; }
		echo "$rev" >"$WORK/$id.base"
	done
}

conflict_edits() { # while settee3 is cut off: each base rev edited on both sides
	local id base a b
	for id in "${CONFLICT_IDS[@]}"; do
		base=$(cat "$WORK/$id.base" 2>/dev/null) || return 1
		a=$(put_rev "${URLS[2]}/drill/$id?rev=$base&w=1" '{"side":"isolated"}') || { echo "$a"; return 1; }
		b=$(put_rev "${URLS[0]}/drill/$id?rev=$base" '{"side":"majority"}') || { echo "$b"; return 1; }
		[ "$a" != "$b" ] || { echo "  $id: both sides made $a"; return 1; }
		echo "$a" >"$WORK/$id.isolated"
		echo "$b" >"$WORK/$id.majority"
	done
}

conflicts_kept() { # every node shows each conflict doc's CouchDB winner (of one generation: the greater rev) with the other edit in _conflicts
	local id u a b win lose body
	for id in "${CONFLICT_IDS[@]}"; do
		a=$(cat "$WORK/$id.isolated" 2>/dev/null) && b=$(cat "$WORK/$id.majority" 2>/dev/null) || { WHY="$id: no edits on both sides to check"; return 1; }
		win=$(printf '%s\n' "$a" "$b" | LC_ALL=C sort | tail -1)
		if [ "$win" = "$a" ]; then lose=$b; else lose=$a; fi
		for u in "${URLS[@]}"; do
			body=$(curl -s -m 10 "${AUTH[@]}" "$u/drill/$id?conflicts=true")
			if ! grep -q "\"_rev\":\"$win\"" <<<"$body" || ! grep -q "\"_conflicts\":\[\"$lose\"\]" <<<"$body"; then
				WHY="$u/drill/$id?conflicts=true: $body (want _rev $win, _conflicts [$lose])"
				return 1
			fi
		done
	done
}

changes_list_both() { # every node's _changes?style=all_docs lists both leaf revs of each conflict doc
	local id u a b body row
	for u in "${URLS[@]}"; do
		body=$(curl -s -m 10 "${AUTH[@]}" "$u/drill/_changes?style=all_docs")
		for id in "${CONFLICT_IDS[@]}"; do
			a=$(cat "$WORK/$id.isolated" 2>/dev/null) && b=$(cat "$WORK/$id.majority" 2>/dev/null) || { WHY="$id: no edits on both sides to check"; return 1; }
			row=$(grep -o "\"id\":\"$id\",\"changes\":\[[^]]*\]" <<<"$body" | tail -1)
			if ! grep -q "\"rev\":\"$a\"" <<<"$row" || ! grep -q "\"rev\":\"$b\"" <<<"$row" || [ "$(grep -o '"rev"' <<<"$row" | wc -l)" != 2 ]; then
				WHY="$u/drill/_changes?style=all_docs, $id: ${row:-no row} (want $a and $b)"
				return 1
			fi
		done
	done
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

echo "== partition one node from the others, edit the same docs on both sides, then reconnect it"
check "conflict docs on all three copies" conflict_base
NET=$(docker network ls --format '{{.Name}}' | grep -E "^${PROJECT}[_-]default$" | head -1)
C3=$(docker ps --format '{{.Names}}' | grep -E "^${PROJECT}[_-]settee3[_-]1$" | head -1)
# settee3 alone on its own network: cut off from settee1/2, its port still published
docker network create "$SIDE" >/dev/null 2>&1
docker network connect "$SIDE" "$C3" >/dev/null 2>&1
docker network disconnect "$NET" "$C3" >/dev/null 2>&1
sleep 2
check "each conflict doc edited on both sides (settee3 with w=1)" conflict_edits
sleep 6
docker network connect --alias settee3 "$NET" "$C3" >/dev/null 2>&1
docker network disconnect "$SIDE" "$C3" >/dev/null 2>&1
check "partitioned node back" wait_members
sleep 2
check "every acknowledged write on every node (partition)" all_acked_everywhere
check "both edits kept on every node: the same winner, the other in _conflicts" within 60 conflicts_kept
check "_changes?style=all_docs lists both leaf revs on every node" within 60 changes_list_both

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
