/* blocks.h -- which blocks of a freshly mapped array were written: a bit a
 * block.
 *
 * A page of an anonymous mapping never written reads as the shared zero
 * page once read, and the first write after that replaces it: a fault that
 * flushes the TLB of every CPU the process runs on (an IPI, for which a
 * virtual machine's vCPU may wait milliseconds while the other is off its
 * CPU). A table that maps its array and lets look-ups in before every
 * block was written (the live table while it grows, the stacks' table, the
 * walker's rule table) keeps these bits: nothing reads a block whose bit
 * is clear (its entries are all empty, so a probe ends there and a put
 * lands there), and the first write to it is a plain first touch.
 *
 * The bit is set after the block's first entry is in place, with release
 * order, and read with acquire order, so that a reader that sees it set
 * also sees the entry: look-ups without a lock may read it. Internal to
 * tracker/. */
#ifndef VT_BLOCKS_H
#define VT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

/* How many words of bits `blocks` blocks take. */
#define VT_BLOCK_WORDS(blocks) (((blocks) + 63) / 64)

/* 1 when block b of `bits` was written. */
static inline int vt_block_written(const uint64_t *bits, size_t b) {
    return (int)((__atomic_load_n(&bits[b / 64], __ATOMIC_ACQUIRE) >> (b % 64)) & 1);
}

/* Block b of `bits` holds its first entry now: look-ups may read it. */
static inline void vt_block_mark(uint64_t *bits, size_t b) {
    __atomic_fetch_or(&bits[b / 64], 1ull << (b % 64), __ATOMIC_RELEASE);
}

#endif
