#!/usr/bin/env bash
# Fails when a fuzz target exists that the Makefile's fuzz target does not
# run: a new Fuzz function must be added there.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
while IFS= read -r line; do
	file=${line%%:*}
	name=$(sed -E 's/^.*func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"$line")
	pkg=./$(dirname "$file")/
	if ! grep -qE "go test ${pkg//./\\.} .*-fuzz '\^${name}\\\$\\\$'" Makefile; then
		echo "make fuzz does not run $name ($pkg)"
		status=1
	fi
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | grep -v '^./third_party/' | sed 's#^\./##')
exit $status
