package cdeflate

// The Huffman side of deflate, after zlib's trees.c: the frequency counts
// of a block, the trees built from them (build_tree with its heap and its
// depth tie-break, gen_bitlen's overflow repair, gen_codes), the choice
// between a stored, a static and a dynamic block (_tr_flush_block), and
// the block's bits. Every rule that decides a bit is zlib's; the bit
// buffer is wider than zlib's 16 bits, which changes no output byte.

const (
	lengthCodes = 29
	literals    = 256
	lCodes      = literals + 1 + lengthCodes // 286
	dCodes      = 30
	blCodes     = 19
	heapSize    = 2*lCodes + 1 // 573
	maxBits     = 15
	maxBLBits   = 7
	endBlock    = 256
	rep3to6     = 16
	repz3to10   = 17
	repz11to138 = 18

	storedBlock = 0
	staticTrees = 1
	dynTrees    = 2
)

var (
	extraLbits  = [lengthCodes]int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	extraDbits  = [dCodes]int{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	extraBLbits = [blCodes]int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 3, 7}
	blOrder     = [blCodes]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}
)

// ctData is one tree element. zlib overlays freq with code and dad with
// len; nothing reads one after the other is written, so they are apart.
type ctData struct {
	freq, code uint16
	dad, len   uint16
}

type staticTreeDesc struct {
	tree      []ctData // static tree, or nil
	extra     []int
	extraBase int
	elems     int
	maxLength int
}

type treeDesc struct {
	dyn     []ctData
	maxCode int
	stat    *staticTreeDesc
}

// The tables tr_static_init builds.
var (
	staticLtree [lCodes + 2]ctData
	staticDtree [dCodes]ctData
	distCode    [512]uint8
	lengthCode  [maxMatch - minMatch + 1]uint8
	baseLength  [lengthCodes]int
	baseDist    [dCodes]int

	staticLDesc  = staticTreeDesc{staticLtree[:], extraLbits[:], literals + 1, lCodes, maxBits}
	staticDDesc  = staticTreeDesc{staticDtree[:], extraDbits[:], 0, dCodes, maxBits}
	staticBLDesc = staticTreeDesc{nil, extraBLbits[:], 0, blCodes, maxBLBits}
)

func init() {
	length := 0
	code := 0
	for code = 0; code < lengthCodes-1; code++ {
		baseLength[code] = length
		for n := 0; n < 1<<extraLbits[code]; n++ {
			lengthCode[length] = uint8(code)
			length++
		}
	}
	// Length 258 can be code 284 + 5 bits or code 285: zlib uses 285.
	lengthCode[length-1] = uint8(code)

	dist := 0
	for code = 0; code < 16; code++ {
		baseDist[code] = dist
		for n := 0; n < 1<<extraDbits[code]; n++ {
			distCode[dist] = uint8(code)
			dist++
		}
	}
	dist >>= 7
	for ; code < dCodes; code++ {
		baseDist[code] = dist << 7
		for n := 0; n < 1<<(extraDbits[code]-7); n++ {
			distCode[256+dist] = uint8(code)
			dist++
		}
	}

	var blCount [maxBits + 1]uint16
	n := 0
	for ; n <= 143; n++ {
		staticLtree[n].len = 8
		blCount[8]++
	}
	for ; n <= 255; n++ {
		staticLtree[n].len = 9
		blCount[9]++
	}
	for ; n <= 279; n++ {
		staticLtree[n].len = 7
		blCount[7]++
	}
	for ; n <= 287; n++ {
		staticLtree[n].len = 8
		blCount[8]++
	}
	genCodes(staticLtree[:], lCodes+1, &blCount)
	for n := 0; n < dCodes; n++ {
		staticDtree[n].len = 5
		staticDtree[n].code = uint16(biReverse(uint(n), 5))
	}
}

func dCode(dist int) int {
	if dist < 256 {
		return int(distCode[dist])
	}
	return int(distCode[256+(dist>>7)])
}

func biReverse(code uint, n int) uint {
	var res uint
	for {
		res |= code & 1
		code >>= 1
		res <<= 1
		n--
		if n <= 0 {
			break
		}
	}
	return res >> 1
}

// genCodes gives every element of nonzero length its code, canonically.
func genCodes(tree []ctData, maxCode int, blCount *[maxBits + 1]uint16) {
	var nextCode [maxBits + 1]uint16
	code := uint(0)
	for bits := 1; bits <= maxBits; bits++ {
		code = (code + uint(blCount[bits-1])) << 1
		nextCode[bits] = uint16(code)
	}
	for n := 0; n <= maxCode; n++ {
		l := int(tree[n].len)
		if l == 0 {
			continue
		}
		tree[n].code = uint16(biReverse(uint(nextCode[l]), l))
		nextCode[l]++
	}
}

// trees is the per-block Huffman state of a stream.
type trees struct {
	dynLtree [heapSize]ctData
	dynDtree [2*dCodes + 1]ctData
	blTree   [2*blCodes + 1]ctData
	lDesc    treeDesc
	dDesc    treeDesc
	blDesc   treeDesc

	blCount [maxBits + 1]uint16
	heap    [2*lCodes + 1]int
	heapLen int
	heapMax int
	depth   [2*lCodes + 1]uint8

	// The symbols of the block: a distance (0 for a literal) and a
	// literal or match length - minMatch. zlib's sym_buf, apart.
	symDist [litBufsize]uint16
	symLC   [litBufsize]uint8
	symNext int

	optLen    int
	staticLen int

	bits bitWriter
}

func (t *trees) init() {
	t.lDesc = treeDesc{dyn: t.dynLtree[:], stat: &staticLDesc}
	t.dDesc = treeDesc{dyn: t.dynDtree[:], stat: &staticDDesc}
	t.blDesc = treeDesc{dyn: t.blTree[:], stat: &staticBLDesc}
	t.initBlock()
}

func (t *trees) initBlock() {
	for n := 0; n < lCodes; n++ {
		t.dynLtree[n].freq = 0
	}
	for n := 0; n < dCodes; n++ {
		t.dynDtree[n].freq = 0
	}
	for n := 0; n < blCodes; n++ {
		t.blTree[n].freq = 0
	}
	t.dynLtree[endBlock].freq = 1
	t.optLen, t.staticLen = 0, 0
	t.symNext = 0
}

// tallyLit counts a literal; true when the block must be flushed.
func (t *trees) tallyLit(c byte) bool {
	t.symDist[t.symNext] = 0
	t.symLC[t.symNext] = c
	t.symNext++
	t.dynLtree[c].freq++
	return t.symNext == litBufsize-1
}

// tallyDist counts a match of distance dist and length minMatch+lc.
func (t *trees) tallyDist(dist, lc int) bool {
	t.symDist[t.symNext] = uint16(dist)
	t.symLC[t.symNext] = uint8(lc)
	t.symNext++
	dist--
	t.dynLtree[int(lengthCode[lc])+literals+1].freq++
	t.dynDtree[dCode(dist)].freq++
	return t.symNext == litBufsize-1
}

// smaller is zlib's heap order: by frequency, then by depth.
func smaller(tree []ctData, n, m int, depth *[2*lCodes + 1]uint8) bool {
	return tree[n].freq < tree[m].freq || (tree[n].freq == tree[m].freq && depth[n] <= depth[m])
}

func (t *trees) pqdownheap(tree []ctData, k int) {
	v := t.heap[k]
	j := k << 1
	for j <= t.heapLen {
		if j < t.heapLen && smaller(tree, t.heap[j+1], t.heap[j], &t.depth) {
			j++
		}
		if smaller(tree, v, t.heap[j], &t.depth) {
			break
		}
		t.heap[k] = t.heap[j]
		k = j
		j <<= 1
	}
	t.heap[k] = v
}

func (t *trees) genBitlen(desc *treeDesc) {
	tree := desc.dyn
	maxCode := desc.maxCode
	stree := desc.stat.tree
	extra := desc.stat.extra
	base := desc.stat.extraBase
	maxLength := desc.stat.maxLength
	overflow := 0

	for bits := 0; bits <= maxBits; bits++ {
		t.blCount[bits] = 0
	}
	tree[t.heap[t.heapMax]].len = 0 // root
	h := t.heapMax + 1
	for ; h < heapSize; h++ {
		n := t.heap[h]
		bits := int(tree[tree[n].dad].len) + 1
		if bits > maxLength {
			bits = maxLength
			overflow++
		}
		tree[n].len = uint16(bits)
		if n > maxCode {
			continue // not a leaf
		}
		t.blCount[bits]++
		xbits := 0
		if n >= base {
			xbits = extra[n-base]
		}
		f := int(tree[n].freq)
		t.optLen += f * (bits + xbits)
		if stree != nil {
			t.staticLen += f * (int(stree[n].len) + xbits)
		}
	}
	if overflow == 0 {
		return
	}
	for {
		bits := maxLength - 1
		for t.blCount[bits] == 0 {
			bits--
		}
		t.blCount[bits]--
		t.blCount[bits+1] += 2
		t.blCount[maxLength]--
		overflow -= 2
		if overflow <= 0 {
			break
		}
	}
	for bits := maxLength; bits != 0; bits-- {
		n := int(t.blCount[bits])
		for n != 0 {
			h--
			m := t.heap[h]
			if m > maxCode {
				continue
			}
			if int(tree[m].len) != bits {
				t.optLen += (bits - int(tree[m].len)) * int(tree[m].freq)
				tree[m].len = uint16(bits)
			}
			n--
		}
	}
}

func (t *trees) buildTree(desc *treeDesc) {
	tree := desc.dyn
	stree := desc.stat.tree
	elems := desc.stat.elems
	maxCode := -1

	t.heapLen, t.heapMax = 0, heapSize
	for n := 0; n < elems; n++ {
		if tree[n].freq != 0 {
			t.heapLen++
			t.heap[t.heapLen] = n
			maxCode = n
			t.depth[n] = 0
		} else {
			tree[n].len = 0
		}
	}
	// At least two codes of nonzero frequency.
	for t.heapLen < 2 {
		node := 0
		if maxCode < 2 {
			maxCode++
			node = maxCode
		}
		t.heapLen++
		t.heap[t.heapLen] = node
		tree[node].freq = 1
		t.depth[node] = 0
		t.optLen--
		if stree != nil {
			t.staticLen -= int(stree[node].len)
		}
	}
	desc.maxCode = maxCode

	for n := t.heapLen / 2; n >= 1; n-- {
		t.pqdownheap(tree, n)
	}
	node := elems
	for {
		n := t.heap[1]
		t.heap[1] = t.heap[t.heapLen]
		t.heapLen--
		t.pqdownheap(tree, 1)
		m := t.heap[1]

		t.heapMax--
		t.heap[t.heapMax] = n
		t.heapMax--
		t.heap[t.heapMax] = m

		tree[node].freq = tree[n].freq + tree[m].freq
		d := t.depth[n]
		if t.depth[m] > d {
			d = t.depth[m]
		}
		t.depth[node] = d + 1
		tree[n].dad = uint16(node)
		tree[m].dad = uint16(node)
		t.heap[1] = node
		node++
		t.pqdownheap(tree, 1)
		if t.heapLen < 2 {
			break
		}
	}
	t.heapMax--
	t.heap[t.heapMax] = t.heap[1]

	t.genBitlen(desc)
	genCodes(tree, maxCode, &t.blCount)
}

// scanTree counts the bit-length codes that will describe tree.
func (t *trees) scanTree(tree []ctData, maxCode int) {
	prevlen := -1
	nextlen := int(tree[0].len)
	count := 0
	maxCount, minCount := 7, 4
	if nextlen == 0 {
		maxCount, minCount = 138, 3
	}
	tree[maxCode+1].len = 0xffff // guard
	for n := 0; n <= maxCode; n++ {
		curlen := nextlen
		nextlen = int(tree[n+1].len)
		count++
		if count < maxCount && curlen == nextlen {
			continue
		} else if count < minCount {
			t.blTree[curlen].freq += uint16(count)
		} else if curlen != 0 {
			if curlen != prevlen {
				t.blTree[curlen].freq++
			}
			t.blTree[rep3to6].freq++
		} else if count <= 10 {
			t.blTree[repz3to10].freq++
		} else {
			t.blTree[repz11to138].freq++
		}
		count = 0
		prevlen = curlen
		if nextlen == 0 {
			maxCount, minCount = 138, 3
		} else if curlen == nextlen {
			maxCount, minCount = 6, 3
		} else {
			maxCount, minCount = 7, 4
		}
	}
}

func (t *trees) sendCode(c int, tree []ctData) {
	t.bits.send(uint(tree[c].code), int(tree[c].len))
}

func (t *trees) sendTree(tree []ctData, maxCode int) {
	prevlen := -1
	nextlen := int(tree[0].len)
	count := 0
	maxCount, minCount := 7, 4
	if nextlen == 0 {
		maxCount, minCount = 138, 3
	}
	for n := 0; n <= maxCode; n++ {
		curlen := nextlen
		nextlen = int(tree[n+1].len)
		count++
		if count < maxCount && curlen == nextlen {
			continue
		} else if count < minCount {
			for ; count != 0; count-- {
				t.sendCode(curlen, t.blTree[:])
			}
		} else if curlen != 0 {
			if curlen != prevlen {
				t.sendCode(curlen, t.blTree[:])
				count--
			}
			t.sendCode(rep3to6, t.blTree[:])
			t.bits.send(uint(count-3), 2)
		} else if count <= 10 {
			t.sendCode(repz3to10, t.blTree[:])
			t.bits.send(uint(count-3), 3)
		} else {
			t.sendCode(repz11to138, t.blTree[:])
			t.bits.send(uint(count-11), 7)
		}
		count = 0
		prevlen = curlen
		if nextlen == 0 {
			maxCount, minCount = 138, 3
		} else if curlen == nextlen {
			maxCount, minCount = 6, 3
		} else {
			maxCount, minCount = 7, 4
		}
	}
}

func (t *trees) buildBLTree() int {
	t.scanTree(t.dynLtree[:], t.lDesc.maxCode)
	t.scanTree(t.dynDtree[:], t.dDesc.maxCode)
	t.buildTree(&t.blDesc)
	maxBLIndex := blCodes - 1
	for ; maxBLIndex >= 3; maxBLIndex-- {
		if t.blTree[blOrder[maxBLIndex]].len != 0 {
			break
		}
	}
	t.optLen += 3*(maxBLIndex+1) + 5 + 5 + 4
	return maxBLIndex
}

func (t *trees) sendAllTrees(lcodes, dcodes, blcodes int) {
	t.bits.send(uint(lcodes-257), 5)
	t.bits.send(uint(dcodes-1), 5)
	t.bits.send(uint(blcodes-4), 4)
	for rank := 0; rank < blcodes; rank++ {
		t.bits.send(uint(t.blTree[blOrder[rank]].len), 3)
	}
	t.sendTree(t.dynLtree[:], lcodes-1)
	t.sendTree(t.dynDtree[:], dcodes-1)
}

func (t *trees) storedBlock(buf []byte, last bool) {
	t.bits.send(uint(storedBlock<<1+b2i(last)), 3)
	t.bits.windup()
	n := len(buf)
	t.bits.out = append(t.bits.out, byte(n), byte(n>>8), byte(^n), byte(^n>>8))
	t.bits.out = append(t.bits.out, buf...)
}

// flushBlock writes the block of the symbols tallied so far, choosing the
// smallest of stored, static and dynamic as _tr_flush_block does. buf is
// the block's input when still in the window (nil when it is not), and
// storedLen its length.
func (t *trees) flushBlock(buf []byte, storedLen int, last bool) {
	t.buildTree(&t.lDesc)
	t.buildTree(&t.dDesc)
	maxBLIndex := t.buildBLTree()

	optLenb := (t.optLen + 3 + 7) >> 3
	staticLenb := (t.staticLen + 3 + 7) >> 3
	if staticLenb <= optLenb {
		optLenb = staticLenb
	}
	switch {
	case storedLen+4 <= optLenb && buf != nil:
		t.storedBlock(buf[:storedLen], last)
	case staticLenb == optLenb:
		t.bits.send(uint(staticTrees<<1+b2i(last)), 3)
		t.compressBlock(staticLtree[:], staticDtree[:])
	default:
		t.bits.send(uint(dynTrees<<1+b2i(last)), 3)
		t.sendAllTrees(t.lDesc.maxCode+1, t.dDesc.maxCode+1, maxBLIndex+1)
		t.compressBlock(t.dynLtree[:], t.dynDtree[:])
	}
	t.initBlock()
	if last {
		t.bits.windup()
	}
}

func (t *trees) compressBlock(ltree, dtree []ctData) {
	for i := 0; i < t.symNext; i++ {
		dist := int(t.symDist[i])
		lc := int(t.symLC[i])
		if dist == 0 {
			t.sendCode(lc, ltree)
			continue
		}
		code := int(lengthCode[lc])
		t.sendCode(code+literals+1, ltree)
		if extra := extraLbits[code]; extra != 0 {
			t.bits.send(uint(lc-baseLength[code]), extra)
		}
		dist--
		code = dCode(dist)
		t.sendCode(code, dtree)
		if extra := extraDbits[code]; extra != 0 {
			t.bits.send(uint(dist-baseDist[code]), extra)
		}
	}
	t.sendCode(endBlock, ltree)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// bitWriter packs bits LSB first into out, as zlib's send_bits does.
type bitWriter struct {
	out   []byte
	buf   uint64
	nbits int
}

func (b *bitWriter) send(v uint, n int) {
	b.buf |= uint64(v) << b.nbits
	b.nbits += n
	if b.nbits >= 48 {
		b.out = append(b.out, byte(b.buf), byte(b.buf>>8), byte(b.buf>>16), byte(b.buf>>24), byte(b.buf>>32), byte(b.buf>>40))
		b.buf >>= 48
		b.nbits -= 48
	}
}

// windup writes the bits left, padded with zeros to a byte.
func (b *bitWriter) windup() {
	for b.nbits > 0 {
		b.out = append(b.out, byte(b.buf))
		b.buf >>= 8
		b.nbits -= 8
	}
	b.buf, b.nbits = 0, 0
}
