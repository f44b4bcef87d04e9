/* refset.h -- distinct texts kept by reference, not copied.
 *
 * A writer that gives each distinct text one number (a pickle's memo, a
 * page's table of names) needs to know whether it met a text before. A
 * set of copies holds every distinct text once more beside the model it
 * was made from: a frame's label or "function file:line" is as long as its
 * names, and 60,000 Python functions of 300-character names and paths
 * made three to four such copies, twice the dump. Here a member is its
 * text's 64-bit hash and a number (`ref`) the set's owner remakes the
 * text from when two hashes match; 16 bytes a member and 4 to 8 a slot. */
#ifndef VT_REFSET_H
#define VT_REFSET_H

#include <stddef.h>
#include <stdint.h>

/* Writes the text of ref into buf (size bytes) and returns its length,
 * SIZE_MAX where it cannot (it then matches no text); the same text each
 * time it is asked for the same ref. */
typedef size_t vr_remake_fn(void *ctx, uint64_t ref, char *buf, size_t size);

struct vr_refset {
    uint32_t *slot;          /* member + 1, 0 empty; at most three quarters used */
    size_t nslots;
    uint64_t *hash, *ref;    /* per member, in the order added */
    size_t n, cap;
    vr_remake_fn *remake;
    void *ctx;
    char *buf;               /* what a member's text is remade into */
    size_t max;              /* the longest text: buf's size less one */
};

/* An empty set whose texts are at most max bytes long. */
void vr_refset_init(struct vr_refset *s, vr_remake_fn *remake, void *ctx, size_t max);

/* The member that reads text[0..len) (len <= max), added as ref when
 * there is none (*added says which; added may be NULL). Members are
 * numbered from 0 in the order added. UINT32_MAX when memory ran out. */
uint32_t vr_refset_add(struct vr_refset *s, const char *text, size_t len, uint64_t ref, int *added);

/* The ref member m was added with. */
static inline uint64_t vr_refset_ref(const struct vr_refset *s, uint32_t m) { return s->ref[m]; }

void vr_refset_free(struct vr_refset *s);

#endif
