#!/usr/bin/env bash
# The tests that cannot run under -race, selected by build constraint.
#
# `make test` runs every package with -race. A test file that the race
# detector cannot run (several nodes in one process, badger's value-log
# GC: docs/testing.md says why) carries `//go:build !race`, so the race
# pass does not compile it, and this script runs what such files hold:
#
#   scripts/norace.sh run [go test flags]  go test -count=1 -run '^(…)$' over
#                                          the packages that have such tests
#   scripts/norace.sh list                 one line per package: its dir and
#                                          the tests only a build without
#                                          -race has
#   scripts/norace.sh check                fails when such a test would run
#                                          in no pass of `make test` (.ci/run)
#
# Which files a build without -race has and a build with it lacks is asked
# of `go list` (with and without -race), so any constraint that leaves a
# file out of the race build counts, whatever it is written as. The test
# names are the Test, Fuzz and Example functions declared in those files.
# Only those tests run here, not the rest of their packages: those ran
# under -race already.
set -euo pipefail
cd "$(dirname "$0")/.."

# Packages that `make test` runs whole without -race (beside or after the
# race pass): their !race tests run there, not here. `check` verifies the
# Makefile does run them so.
whole=(interop/couchrepl interop/console resourcetest)

root=$(pwd)

# files prints "dir file" for every test file of every package in the
# build the flags given describe.
files() {
	go list "$@" -f '{{$d := .Dir}}{{range .TestGoFiles}}{{$d}} {{.}}
{{end}}{{range .XTestGoFiles}}{{$d}} {{.}}
{{end}}' ./... | sed "s|^$root/||; s|^$root |. |" | sort
}

# names prints the test functions declared in the files given (gofmt puts
# every top-level func at the start of its line). TestMain is not a test;
# a name whose prefix is followed by a lower-case letter is not one for go
# test either.
names() {
	grep -hoE '^func (Test|Fuzz|Example)[A-Za-z0-9_]*\(' "$@" |
		sed 's/^func //; s/($//' |
		grep -vE '^(Test|Fuzz|Example)[a-z]' | grep -vx TestMain | sort -u || true
}

is_whole() {
	local w
	for w in "${whole[@]}"; do [ "$1" = "$w" ] && return 0; done
	return 1
}

# split writes, to the two files given, "dir file" for the test files a
# build without -race has and those the race build has.
split() {
	files >"$1"
	files -race >"$2"
}

# dirs prints the packages with test files only a build without -race has,
# apart from the packages run whole.
dirs() {
	local dir
	comm -23 "$1" "$2" | awk '{print $1}' | sort -u | while read -r dir; do
		is_whole "$dir" || echo "$dir"
	done
}

# list prints "dir Name Name…" for each of those packages that declares
# tests in those files.
list() {
	local dir f ns fs
	for dir in $(dirs "$1" "$2"); do
		fs=()
		for f in $(comm -23 "$1" "$2" | awk -v d="$dir" '$1 == d {print $2}'); do
			fs+=("$dir/$f")
		done
		ns=$(names "${fs[@]}" | tr '\n' ' ')
		if [ -n "$ns" ]; then echo "$dir ${ns% }"; fi
	done
}

norace=$(mktemp)
race=$(mktemp)
trap 'rm -f "$norace" "$race"' EXIT
split "$norace" "$race"

case "${1:-}" in
list)
	list "$norace" "$race"
	;;
run)
	shift
	pkgs=()
	tests=()
	while read -r dir ns; do
		pkgs+=("./$dir/")
		for n in $ns; do tests+=("$n"); done
	done < <(list "$norace" "$race")
	if [ ${#pkgs[@]} -eq 0 ]; then
		echo "norace.sh: no test is left out of the race build"
		exit 0
	fi
	re="^($(IFS='|'; echo "${tests[*]}"))\$"
	echo "go test -count=1 $* -run '$re' ${pkgs[*]}"
	go test -count=1 "$@" -run "$re" "${pkgs[@]}"
	;;
check)
	fail=0
	# 1. The names this script finds are the tests go test finds: in every
	# package with files left out of the race build, each test that
	# `go test -list` names (built without -race) is declared where names()
	# sees it, so the parse misses none.
	for dir in $(dirs "$norace" "$race"); do
		declared=$(names "$dir"/*_test.go)
		if ! out=$(go test -list '.*' "./$dir/" 2>&1); then
			echo "norace.sh: go test -list ./$dir/ failed:"
			echo "$out"
			exit 1
		fi
		listed=$(grep -E '^(Test|Fuzz|Example)' <<<"$out" | sort -u || true)
		missed=$(comm -23 <(echo "$listed") <(echo "$declared"))
		if [ -n "$missed" ]; then
			echo "norace.sh: go test lists tests in $dir that the script's parse does not see:"
			echo "$missed" | sed 's/^/  /'
			fail=1
		fi
	done
	# 2. make test runs this script, and runs the packages it leaves out
	# whole without -race.
	recipe=$(make -n test)
	if ! grep -q 'scripts/norace.sh run' <<<"$recipe"; then
		echo "norace.sh: make test does not run scripts/norace.sh run"
		fail=1
	fi
	for w in "${whole[@]}"; do
		if ! grep -qE "go test -count=1( -timeout [0-9]+[a-z]+)? \./$w/" <<<"$recipe"; then
			echo "norace.sh: make test does not run ./$w/ whole without -race, and this script leaves its !race tests to it"
			fail=1
		fi
	done
	if [ "$fail" -ne 0 ]; then
		exit 1
	fi
	list "$norace" "$race" | while read -r dir ns; do
		echo "norace.sh: ./$dir/: $(wc -w <<<"$ns") tests outside the race build, all run by make test"
	done
	;;
*)
	echo "usage: $0 run [go test flags] | list | check" >&2
	exit 2
	;;
esac
