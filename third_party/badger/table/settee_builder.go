package table

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"
)

// settee patch.

// setteeSealBlock compresses and encrypts one finished block in place:
// handleBlock's work, done by a block goroutine or, in a gated builder
// (Options.Gate), by finishBlock itself.
func (b *Builder) setteeSealBlock(item *bblock) {
	blockBuf := item.data[:item.end]
	if b.opts.Compression != options.None {
		out, err := b.compressData(blockBuf)
		y.Check(err)
		blockBuf = out
	}
	if b.shouldEncrypt() {
		out, err := b.encrypt(blockBuf)
		y.Check(y.Wrapf(err, "Error while encrypting block in table builder."))
		blockBuf = out
	}

	// BlockBuf should always less than or equal to allocated space. If the blockBuf is greater
	// than allocated space that means the data from this block cannot be stored in its
	// existing location.
	allocatedSpace := maxEncodedLen(b.opts.Compression, (item.end)) + padding + 1
	y.AssertTrue(len(blockBuf) <= allocatedSpace)

	// blockBuf was allocated on allocator. So, we don't need to copy it over.
	item.data = blockBuf
	item.end = len(blockBuf)
	b.compressedSize.Add(uint32(len(blockBuf)))
}

// SetteeGate is the builder's gate (Options.Gate), nil when there is none.
func (b *Builder) SetteeGate() *y.Gate { return b.opts.Gate }

// setteeWriteTable writes a new table file with write(2), syncs it and
// maps it for reading.
//
// Upstream copied the table into a shared writable mapping of the new file
// and msync'd it. msync write-protects every dirty page it writes back
// (page_mkclean), and each of those is a TLB shootdown to the other CPUs
// running the process: on settee's 2-core machine, a perf profile of a
// compaction's merge had 9% of all CPU in msync, and the kernel, which is
// not preempted there (PREEMPT_NONE), held both cores for 11 ms at a time
// while user writes waited to be scheduled. Pages written with write(2)
// are mapped nowhere when they are written back.
func setteeWriteTable(fname string, bd buildData) (*z.MmapFile, error) {
	f, err := os.OpenFile(fname, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0666)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("file already exists: %s", fname)
	} else if err != nil {
		return nil, y.Wrapf(err, "while creating table: %s", fname)
	}
	fail := func(err error, what string) (*z.MmapFile, error) {
		_ = f.Close()
		return nil, y.Wrapf(err, "while %s table %s", what, fname)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for _, bl := range bd.blockList {
		_, _ = w.Write(bl.data[:bl.end])
	}
	_, _ = w.Write(bd.index)
	_, _ = w.Write(y.U32ToBytes(uint32(len(bd.index))))
	_, _ = w.Write(bd.checksum)
	_, _ = w.Write(y.U32ToBytes(uint32(len(bd.checksum))))
	if err := w.Flush(); err != nil { // the first write error, if any
		return fail(err, "writing")
	}
	if err := f.Sync(); err != nil {
		return fail(err, "syncing")
	}
	if st, err := f.Stat(); err != nil {
		return fail(err, "checking")
	} else if st.Size() != int64(bd.Size) {
		return fail(fmt.Errorf("wrote %d bytes, want %d", st.Size(), bd.Size), "checking")
	}
	mf, err := z.OpenMmapFileUsing(f, bd.Size, true)
	if err != nil {
		return fail(err, "mapping")
	}
	return mf, nil
}
