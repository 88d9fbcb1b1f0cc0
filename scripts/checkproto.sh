#!/usr/bin/env bash
# Checks that the committed proto/*.pb.go are what proto/*.proto generate
# (with protoc-gen-go at go.mod's google.golang.org/protobuf version): a
# .proto edited without running `make proto` fails here. Needs protoc
# (Debian: protobuf-compiler); installs it with apt-get when missing and
# allowed (root, CI), else skips saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v protoc >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get update -qq >/dev/null && apt-get install -y -qq protobuf-compiler >/dev/null
	else
		echo "protoc not found (Debian: apt-get install protobuf-compiler): proto check skipped"
		exit 0
	fi
fi
v=$(go list -m -f '{{.Version}}' google.golang.org/protobuf)
bin=$(mktemp -d)
out=$(mktemp -d)
trap 'rm -rf "$bin" "$out"' EXIT
GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$v"
PATH="$bin:$PATH" protoc -I proto --go_out="$out" --go_opt=paths=source_relative proto/*.proto
status=0
for f in "$out"/*.pb.go; do
	name=$(basename "$f")
	# protoc's own version is stamped in a comment: another protoc build
	# generating the same code is not a difference
	if ! diff -u <(grep -v '^// 	protoc ' "proto/$name") <(grep -v '^// 	protoc ' "$f"); then
		echo "proto/$name is not what proto/${name%.pb.go}.proto generates: run make proto"
		status=1
	fi
done
for f in proto/*.pb.go; do
	[ -e "$out/$(basename "$f")" ] || { echo "$f has no .proto"; status=1; }
done
exit $status
