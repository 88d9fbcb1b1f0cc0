//go:build !(linux && (amd64 || arm64 || loong64 || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x))

package storage

import "os"

// Where fadvise64 and readahead take their offsets in register pairs
// (32-bit Linux) or do not exist, warmFile reads its chunks with pread and
// leaves the kernel's readahead as it is.

func noReadahead(*os.File) {}

func readahead(*os.File, int64, int64) bool { return false }
