#!/usr/bin/env bash
# Runs `settee repbench` between two local single-node servers (issue 4's
# setup) and prints, for the replication phase only: wall, the CPU seconds
# of the source, the target and the client, the machine's idle CPU seconds,
# and the target's peak RSS (VmHWM).
#   scripts/repbench.sh [BIN] [repbench flags...]
# BIN defaults to bin/settee (make build). Ports 18984/18985 (HTTP) and
# 18060/18061 (pprof), or $PORT_BASE+0..3. SERVE_ARGS go to both servers.
set -euo pipefail
BIN=${1:-bin/settee}
shift || true
P=${PORT_BASE:-18980}
dir=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
# shellcheck disable=SC2086
"$BIN" serve --data-dir "$dir/a" --http "127.0.0.1:$((P + 4))" --admin admin:pw --pprof "127.0.0.1:$((P + 1))" ${SERVE_ARGS:-} >"$dir/a.log" 2>&1 &
src=$!
pids+=("$src")
# shellcheck disable=SC2086
"$BIN" serve --data-dir "$dir/b" --http "127.0.0.1:$((P + 5))" --admin admin:pw --pprof "127.0.0.1:$((P + 0))" ${SERVE_ARGS:-} >"$dir/b.log" 2>&1 &
tgt=$!
pids+=("$tgt")
for port in $((P + 4)) $((P + 5)); do
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$port/_up" >/dev/null 2>&1 && break
		sleep 0.1
	done
done
# CPU seconds of a process (user+system), and of the machine's idle time
cpu() { awk '{printf "%.2f", ($14+$15)/100}' "/proc/$1/stat"; }
idle() { awk '/^cpu /{printf "%.2f", ($5+$6)/100}' /proc/stat; }
"$BIN" repbench --source-url "http://admin:pw@127.0.0.1:$((P + 4))" \
	--target-url "http://admin:pw@127.0.0.1:$((P + 5))" "$@" >"$dir/out" 2>&1 &
cli=$!
pids+=("$cli")
phase=load
while kill -0 "$cli" 2>/dev/null; do
	if [ "$phase" = load ] && grep -q '^== bench ==' "$dir/out"; then
		s0=$(cpu "$src") t0=$(cpu "$tgt") c0=$(cpu "$cli") i0=$(idle)
		phase=bench
		if [ -n "${PROFILE:-}" ]; then # PROFILE=dir: CPU profiles of both servers, PROFILE_SECS (5) into the replication
			mkdir -p "$PROFILE"
			curl -s -o "$PROFILE/target.cpu" "http://127.0.0.1:$((P + 0))/debug/pprof/profile?seconds=${PROFILE_SECS:-5}" &
			curl -s -o "$PROFILE/source.cpu" "http://127.0.0.1:$((P + 1))/debug/pprof/profile?seconds=${PROFILE_SECS:-5}" &
		fi
		if [ -n "${ALLOCS:-}" ]; then # ALLOCS=dir: the target's allocation profile when the replication ends
			mkdir -p "$ALLOCS"
			curl -s -o "$ALLOCS/target.allocs.0" "http://127.0.0.1:$((P + 0))/debug/pprof/allocs"
		fi
		if [ -n "${TRACE:-}" ]; then # TRACE=dir: 3 s execution trace of the target, 1 s into the replication
			mkdir -p "$TRACE"
			(sleep 1; curl -s -o "$TRACE/target.trace" "http://127.0.0.1:$((P + 0))/debug/pprof/trace?seconds=3") &
		fi
		if [ -n "${HEAP:-}" ]; then # HEAP=dir: the target's heap profile and memstats every second of the replication
			mkdir -p "$HEAP"
			(for k in $(seq 30); do sleep 1; curl -sf -o "$HEAP/target.heap.$k" "http://127.0.0.1:$((P + 0))/debug/pprof/heap?debug=1" || break
				grep -E 'VmRSS|VmHWM|RssAnon|RssFile' "/proc/$tgt/status" | tr '\n' ' ' >"$HEAP/target.rss.$k"; done) &
		fi
	fi
	if [ "$phase" = bench ] && grep -q '^wall=' "$dir/out"; then
		s1=$(cpu "$src") t1=$(cpu "$tgt") c1=$(cpu "$cli") i1=$(idle)
		hwm1=$(awk '/VmHWM/{print $2/1024 " MB"}' "/proc/$tgt/status")
		[ -n "${ALLOCS:-}" ] && curl -s -o "$ALLOCS/target.allocs.1" "http://127.0.0.1:$((P + 0))/debug/pprof/allocs"
		phase=done
	fi
	sleep 0.05
done
wait "$cli" || { cat "$dir/out"; exit 1; }
cat "$dir/out"
hwm=$(awk '/VmHWM/{print $2/1024 " MB"}' "/proc/$tgt/status")
if [ "$phase" = done ]; then
	awk -v s="$s1-$s0" -v t="$t1-$t0" -v c="$c1-$c0" -v i="$i1-$i0" 'BEGIN{
		split(s,a,"-"); split(t,b,"-"); split(c,d,"-"); split(i,e,"-");
		printf "cpu during replication: source %.2fs target %.2fs client %.2fs; machine idle %.2fs\n",
			a[1]-a[2], b[1]-b[2], d[1]-d[2], e[1]-e[2] }'
fi
echo "major page faults: source $(awk '{print $12}' "/proc/$src/stat") target $(awk '{print $12}' "/proc/$tgt/stat")"
echo "target VmHWM: $hwm (${hwm1:-?} when the replication completed; the rest is the cleanup)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
