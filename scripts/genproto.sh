#!/usr/bin/env bash
# Regenerates proto/*.pb.go. Needs protoc (Debian: protobuf-compiler) and
# protoc-gen-go at the version of google.golang.org/protobuf in go.mod.
set -euo pipefail
cd "$(dirname "$0")/.."
v=$(go list -m -f '{{.Version}}' google.golang.org/protobuf)
command -v protoc-gen-go >/dev/null || go install "google.golang.org/protobuf/cmd/protoc-gen-go@$v"
protoc -I proto --go_out=proto --go_opt=paths=source_relative proto/*.proto
