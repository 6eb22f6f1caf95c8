package inspect

import "unsafe"

// Blocks hands out values of T carved from blocks that double in size up
// to 4 MB, so that a reader of a 300k-rule dump makes a few dozen
// allocations where it would make one per rule (or per endpoint, per
// chain). The blocks of 4 MB are advised to the kernel as huge pages
// (Linux, adviseHuge): map -o json on 60 MB of rules and objects, as a
// process of its own, spent a third of its time faulting fresh memory in
// one 4 KiB page at a time, and a 2 MiB page is one fault where 512
// were. Blocks
// of 8 MB faulted less still, but the unused end of each kind's last
// block counts as live heap until the command ends, so the collector
// ran later and the peak RSS of map -o json on the 5,000-Service node
// rose by 30 MiB to 254-257 MiB, where 4 MB blocks add 14-20. A value
// carved from a block keeps the whole block alive: use it for what lives
// as long as the model.
//
// The zero value is ready to use.
type Blocks[T any] struct {
	free []T
	next int // the length of the next block, in elements
}

const (
	minBlockBytes = 16 << 10
	maxBlockBytes = 4 << 20
	// hugeBlockBytes is the least block advised as huge pages: one of
	// 4 MB holds at least one whole aligned 2 MiB page wherever it lies.
	hugeBlockBytes = 4 << 20
)

// Take returns n zero values, with length and capacity n (an append
// never writes into the next values). Take(0) is empty, not nil.
func (b *Blocks[T]) Take(n int) []T {
	if n == 0 {
		return []T{}
	}
	if n > len(b.free) {
		if blk := b.grow(n); blk != nil {
			return blk
		}
	}
	s := b.free[:n:n]
	b.free = b.free[n:]
	return s
}

// One returns a pointer to one zero value.
func (b *Blocks[T]) One() *T {
	if len(b.free) == 0 {
		b.grow(1)
	}
	v := &b.free[0]
	b.free = b.free[1:]
	return v
}

// grow starts a new block for n values; a request bigger than the
// largest block gets an allocation of its own, returned (the current
// block stays).
func (b *Blocks[T]) grow(n int) []T {
	var zero T
	size := max(int(unsafe.Sizeof(zero)), 1)
	if n*size > maxBlockBytes/2 {
		return allocBlock[T](n, size)
	}
	if b.next == 0 {
		b.next = max(minBlockBytes/size, 1)
	}
	for b.next < n {
		b.next *= 2
	}
	b.free = allocBlock[T](b.next, size)
	if b.next*size*2 <= maxBlockBytes {
		b.next *= 2
	}
	return nil
}

func allocBlock[T any](n, size int) []T {
	blk := make([]T, n)
	if n*size >= hugeBlockBytes {
		adviseHuge(unsafe.Pointer(unsafe.SliceData(blk)), uintptr(n*size))
	}
	return blk
}

// Text hands out strings copied into blocks of bytes (Blocks[byte]): one
// allocation per 4 MB of text instead of one per string.
type Text struct{ Blocks[byte] }

// String returns b as a string in a block.
func (t *Text) String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	s := t.Take(len(b))
	copy(s, b)
	return unsafe.String(unsafe.SliceData(s), len(s))
}
