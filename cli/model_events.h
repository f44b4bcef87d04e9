/* model_events.h -- a dump's event history, kept packed.
 *
 * The history is most often a dump's longest list, and the dump packs an
 * event in 6 to 12 bytes where struct vm_event takes 32: a report that
 * kept every event as a struct needed 4 to 5 times the dump for the events
 * alone. The model keeps them packed much as the dump does: each field as
 * the difference from the event before, in variable-length bytes, in
 * blocks of VM_EV_BLOCK events that each decode on their own.
 *
 * Read them in order with a cursor (vm_ev_from, vm_ev_next); read any one
 * with vm_event_at, which decodes the event's whole block into a cache, so
 * that going backward, or to events near the last one read, costs no more
 * than a pass. The cache makes vm_event_at one reader at a time (the CLI
 * reads on one thread). */
#ifndef VT_MODEL_EVENTS_H
#define VT_MODEL_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/records.h"

struct vm_event {
    VT_EVENT_FIELDS(VT_RECORD_FIELD) /* time_ns, address, bytes (common/records.h) */
    uint32_t stack;
    int16_t device;          /* -1 .. 4095 */
    char type;               /* 'a' alloc, 'f' free, 'o' oom */
    uint8_t kind;            /* its kind of memory, named by vm_event_kind */
};

#define VM_EV_BLOCK 32

struct vm_ev_cache;

struct vm_events {
    unsigned char *buf;      /* the packed events, owned */
    size_t len, cap;
    size_t *block;           /* where each block begins in buf, owned */
    size_t n;                /* events kept */
    struct vm_ev_cache *cache; /* vm_event_at's decoded block, owned */
};

/* e added after the others; 0, or -1 when out of memory (ev is kept as it
 * was). */
int vm_events_add(struct vm_events *ev, const struct vm_event *e);

/* The room left over after the last vm_events_add given back. */
void vm_events_done(struct vm_events *ev);

void vm_events_free(struct vm_events *ev);

/* A reading of the events in order, from any one. */
struct vm_ev_cursor {
    const struct vm_events *ev;
    size_t i;                /* the next event's index */
    const unsigned char *p;  /* its bytes */
    uint64_t time_ns, address, bytes, stack; /* the event before it in its block */
};

/* c set to read from event i (the end when i >= ev->n). */
void vm_ev_from(struct vm_ev_cursor *c, const struct vm_events *ev, size_t i);

/* The next event into *e: 1, or 0 at the end. */
int vm_ev_next(struct vm_ev_cursor *c, struct vm_event *e);

/* A reading of the events from the last to the first, with a block of its
 * own (vm_event_at's cache is left alone). */
struct vm_ev_back {
    const struct vm_events *ev;
    size_t i;                /* the event last read; ev->n before the first */
    struct vm_event blk[VM_EV_BLOCK];
};

void vm_ev_back_from_end(struct vm_ev_back *b, const struct vm_events *ev);

/* The event before the last one read into *e: 1, or 0 before the first;
 * b->i is its index. */
int vm_ev_prev(struct vm_ev_back *b, struct vm_event *e);

/* Event i (< ev->n). */
struct vm_event vm_event_at(const struct vm_events *ev, size_t i);

#endif
