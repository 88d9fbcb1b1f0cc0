package storage

import (
	"os"
	"syscall"
	"unsafe"
)

// residentPages reports, a byte per page, which pages of f's first size
// bytes are in the page cache (bit 0), nil when it cannot tell. It maps
// the file for the question only.
func residentPages(f *os.File, size int64) []byte {
	if size <= 0 || int64(int(size)) != size {
		return nil
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil
	}
	defer func() { _ = syscall.Munmap(m) }()
	ps := int64(os.Getpagesize())
	vec := make([]byte, (size+ps-1)/ps)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return nil
	}
	return vec
}
