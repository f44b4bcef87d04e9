/* model_v2.h -- reading the tables of a version 2 dump without a tree.
 *
 * A version 2 dump's big arrays ("strings", "frames", "nodes", "stacks",
 * "live", "events", "holders", "peak_holders", "mappings") are most of its
 * bytes. vm_v2_split finds them at the
 * top level and hands back the rest as a small JSON text for jansson, so
 * that the reader's memory is the model, not a tree of the whole dump;
 * vm_v2_load_* read the big arrays straight from the text into struct
 * vm_dump, with the checks model.c makes of a version 1 dump. */
#ifndef VT_MODEL_V2_H
#define VT_MODEL_V2_H

#include <stddef.h>

#include <jansson.h>

#include "model.h"

enum { V2_STRINGS, V2_FRAMES, V2_NODES, V2_STACKS, V2_LIVE, V2_EVENTS, V2_HOLDERS, V2_PEAK_HOLDERS, V2_MAPPINGS,
       V2_NARRAYS };

struct vm_v2_spans {
    const char *at[V2_NARRAYS];   /* each big array's text, NULL when absent */
    size_t len[V2_NARRAYS];
    int mapped;                   /* the text is a read-only file mapping */
    const char *duplicate;        /* the second copy of a big array's key, as
                                     written (duplicate_len bytes, quoted); NULL
                                     when there is none */
    size_t duplicate_len;
    int duplicate_line, duplicate_column; /* where it ends, as jansson counts */
    /* The failures' holder lists ("holders", "device_holders" of each of
     * "ooms"), cut out of the small document too: each stands there as
     * null, and is found here by its failure's place and its key
     * (vm_v2_oom_span), never by what the document says (a dump's own
     * {"v2span": 1} was taken for another failure's list). A list of every
     * stack that holds memory, for each of the first 64 failures, was a
     * tree of them all in jansson: 7.8 times the dump's size. In the
     * order cut (by failure); malloc'd: vm_v2_spans_free. */
    struct vm_v2_span { const char *at; size_t len, oom; int device; } *oom;
    size_t noom, oom_cap;
};

/* Let go of what vm_v2_split allocated in sp. */
void vm_v2_spans_free(struct vm_v2_spans *sp);

/* The text of failure i's holder list (device 0: "holders", 1:
 * "device_holders") that vm_v2_split cut out: 1 with *at, *len; 0 when
 * it cut none. */
int vm_v2_oom_span(const struct vm_v2_spans *sp, size_t i, int device, const char **at, size_t *len);

/* Give back the whole pages of [from, to) of a mapped dump's text once
 * read, so that the reader's memory is the model, not the file too; they
 * are read from the file again if touched. Nothing when not mapped. */
void vm_v2_release(const struct vm_v2_spans *sp, const char *from, const char *to);

/* When buf is a version 2 dump (a top-level "version" of 2), its big
 * arrays' spans into *sp and the rest, a malloc'd JSON object, into *small
 * (*nsmall bytes): returns 1 (with sp->duplicate set when a big array's
 * key is there twice: the dump is to be refused). 0 when it is not (read it whole, as version
 * 1), -1 when memory ran out. */
int vm_v2_split(const char *buf, size_t len, int mapped, struct vm_v2_spans *sp, char **small, size_t *nsmall);

/* The strings, frames, nodes and stacks into d (d->stacks, d->nstacks,
 * d->v2). Returns 0, or -1 with the reason in err. */
int vm_v2_load_stacks(const struct vm_v2_spans *sp, struct vm_dump *d, char *err, size_t errsize);

/* The live allocations and the events (after vm_v2_load_stacks); root is
 * the small document (its "event_types", "event_kinds", "nevents" and
 * "events_dropped"). Returns 0, or -1 with the reason in err. */
int vm_v2_load_live_events(const struct vm_v2_spans *sp, json_t *root, struct vm_dump *d, char *err,
                           size_t errsize);

/* A version 2 holder list, flat (stack, bytes, count) triples: from the
 * text (json NULL: the span at `at`, `len` bytes) or a jansson array.
 * Returns the calloc'd holders (*n of them), or NULL with the reason in
 * err (nothing kept). */
struct vm_holder *vm_v2_holders(const char *at, size_t len, json_t *json, size_t nstacks, size_t *n, char *err,
                                size_t errsize);

/* vm_load_buffer of model.c, with vm_load_with's flags and VM_LOAD_MAPPED:
 * buf is a read-only file mapping whose pages may be given back once read
 * (model_file.c). */
#define VM_LOAD_MAPPED 1u
int vm_load_text(const char *buf, size_t len, unsigned flags, const char *name, struct vm_dump *d, char *err,
                 size_t errsize);

/* Free what vm_v2_load_stacks kept (d->v2). */
void vm_v2_free(void *tables);

#endif
