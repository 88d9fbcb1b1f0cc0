package storage

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Value-log GC reads every file it rewrites through badger's mapping of it.
// When the file is not in the page cache (the node's trimmer pages the value
// log out of memory, and with it out of the cache), each page fault reads
// the kernel's whole readahead window around it (read_ahead_kb, 8 MB on our
// virtio disk) in one go, and a writer's sync that arrives meanwhile waits
// behind those reads: during a reclamation, the writers' WAL msync went
// from p99 3.7 ms to 21.7 ms (max 120 ms), with 1.3 GB read for seed 002's
// medium docs; with the value log cached, it stayed at 4.5 ms.
//
// So the reclamation reads the file that GC will rewrite next into the
// page cache itself first (warmFile: only the parts not cached, a chunk at
// a time with no readahead, so that at most one chunk's read is ahead of a
// writer's sync), while GC rewrites the current one. Which file that is
// comes from badger's discard statistics, which it keeps in the DISCARD
// file of the value-log directory (badger v4: 16-byte slots of file id and
// discarded bytes, big-endian, sorted by file id, ended by a zero id); GC
// picks the file with most discarded bytes. The prediction is a hint:
// when it is wrong (another layout, stats that moved), GC reads the file
// itself as before. TestPredictValueLogGC checks it against badger's picks.

// warmChunk is what warmFile reads at a time.
const warmChunk = 256 << 10

// nextGCFile predicts the value-log file that badger's RunValueLogGC(ratio)
// rewrites next, as badger's pickLog does, leaving out file id skip (the
// one being rewritten). It returns "" when it sees none.
func nextGCFile(dir string, ratio float64, skip uint32) string {
	f, err := os.Open(filepath.Join(dir, "DISCARD"))
	if err != nil {
		return ""
	}
	defer f.Close()
	files, maxFid := vlogFiles(dir)
	var (
		best     uint64
		bestDisc uint64
		buf      = make([]byte, 16<<10)
		off      int64
	)
scan:
	for {
		n, err := f.ReadAt(buf, off)
		for i := 0; i+16 <= n; i += 16 {
			fid, disc := binary.BigEndian.Uint64(buf[i:]), binary.BigEndian.Uint64(buf[i+8:])
			if fid == 0 {
				break scan
			}
			// badger skips (and forgets) files that are gone
			if _, ok := files[fid]; ok && fid != uint64(skip) && disc > bestDisc {
				best, bestDisc = fid, disc
			}
		}
		if err != nil || n < len(buf) {
			break
		}
		off += int64(n)
	}
	if best == 0 || best >= maxFid {
		return "" // badger never rewrites the file being written
	}
	if float64(bestDisc) < ratio*float64(files[best]) {
		return ""
	}
	return vlogPath(dir, best)
}

// vlogFiles lists the value-log files in dir (id -> size) and the highest
// id.
func vlogFiles(dir string) (map[uint64]int64, uint64) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0
	}
	out := map[uint64]int64{}
	var maxFid uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".vlog")
		if !ok {
			continue
		}
		fid, err := strconv.ParseUint(name, 10, 32)
		if err != nil {
			continue
		}
		if fi, err := e.Info(); err == nil {
			out[fid] = fi.Size()
			maxFid = max(maxFid, fid)
		}
	}
	return out, maxFid
}

func vlogPath(dir string, fid uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%06d.vlog", fid))
}

// vlogFid is the file id of a value-log path, 0 for "".
func vlogFid(path string) uint32 {
	fid, _ := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".vlog"), 10, 32)
	return uint32(fid)
}

// warmFile reads the parts of the file at path that are not in the page
// cache, warmChunk at a time, and returns the bytes it read.
func warmFile(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	cached := residentPages(f, size) // nil: unknown
	noReadahead(f)
	var buf []byte
	var read int64
	for off := int64(0); off < size; off += warmChunk {
		end := min(off+warmChunk, size)
		if cached != nil && allResident(cached, off, end) {
			continue
		}
		// where the kernel can read into the cache without a copy, the
		// chunk's last byte is read to wait for it
		if readahead(f, off, end-off) {
			var b [1]byte
			if _, err := f.ReadAt(b[:], end-1); err != nil {
				return read, err
			}
			read += end - off
			continue
		}
		if buf == nil {
			buf = make([]byte, warmChunk)
		}
		n, err := f.ReadAt(buf[:end-off], off)
		read += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return read, err
		}
	}
	return read, nil
}

func allResident(pages []byte, from, to int64) bool {
	ps := int64(os.Getpagesize())
	for p := from / ps; p < (to+ps-1)/ps && p < int64(len(pages)); p++ {
		if pages[p]&1 == 0 {
			return false
		}
	}
	return true
}
