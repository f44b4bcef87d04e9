/* model_events.c -- the packed event history of model_events.h.
 *
 * An event's bytes: a head byte (its type in bits 0-1; its device in bits
 * 2-3: 0 for device 0, 1 for -1, 2 for a varint of the ordinal after the
 * head; its kind in bits 4-7, 15 for a byte of kind after the head), then
 * the time, address, bytes and stack each as the zigzag varint of its
 * difference from the event before in the block (from 0 for a block's
 * first). The longest takes 1 + 1 + 2 + 4 * 10 bytes. */
#include <stdlib.h>
#include <string.h>

#include "model_events.h"
#include "varint.h"

#define MAX_EVENT_BYTES (3 + 5 * VM_VARINT_MAX)

/* One block's events decoded as far as they were asked for: a look-up at
 * random decodes half a block on average, a pass the block once. */
struct vm_ev_cache {
    size_t block;            /* the block + 1; 0 for none */
    size_t filled;           /* its events in ev[], from its first */
    struct vm_ev_cursor at;  /* where the next one is read */
    struct vm_event ev[VM_EV_BLOCK];
};

static const char TYPES[3] = {'a', 'f', 'o'};

static unsigned char *put_delta(unsigned char *p, uint64_t v, uint64_t before) {
    uint64_t d = v - before;
    return vm_varint_put(p, d << 1 ^ (0 - (d >> 63)));
}

static const unsigned char *get_delta(const unsigned char *p, uint64_t *v) {
    uint64_t z;
    p = vm_varint_get(p, &z);
    *v += (z >> 1) ^ (0 - (z & 1));
    return p;
}

/* Room for one more event's bytes; 0, or -1 when out of memory. */
static int grow(struct vm_events *ev) {
    if (ev->len + MAX_EVENT_BYTES <= ev->cap) return 0;
    size_t cap = ev->cap ? 2 * ev->cap : 1 << 16;
    unsigned char *b = realloc(ev->buf, cap);
    if (!b) return -1;
    ev->buf = b;
    ev->cap = cap;
    if (ev->cache) ev->cache->block = 0; /* its cursor pointed into the old bytes */
    return 0;
}

int vm_events_add(struct vm_events *ev, const struct vm_event *e) {
    if (!ev->cache && !(ev->cache = calloc(1, sizeof *ev->cache))) return -1;
    if (grow(ev) != 0) return -1;
    if (ev->n % VM_EV_BLOCK == 0) {
        size_t nb = ev->n / VM_EV_BLOCK;
        /* The block list doubles as the events do: at each power of two. */
        if ((nb & (nb - 1)) == 0) {
            size_t *b = realloc(ev->block, (nb ? 2 * nb : 1) * sizeof *b);
            if (!b) return -1;
            ev->block = b;
        }
        ev->block[nb] = ev->len;
    }
    /* The event before, for the differences (0 at a block's start): the
     * writer keeps no state of its own. */
    struct vm_event before = {0};
    if (ev->n % VM_EV_BLOCK) before = vm_event_at(ev, ev->n - 1);
    unsigned char *p = ev->buf + ev->len, *head = p++;
    int type = e->type == 'a' ? 0 : e->type == 'f' ? 1 : 2;
    int dev = e->device == 0 ? 0 : e->device == -1 ? 1 : 2;
    int kind = e->kind < 15 ? e->kind : 15;
    *head = (unsigned char)(type | dev << 2 | kind << 4);
    if (kind == 15) *p++ = e->kind;
    if (dev == 2) p = vm_varint_put(p, (uint64_t)(int64_t)e->device);
    p = put_delta(p, e->time_ns, before.time_ns);
    p = put_delta(p, e->address, before.address);
    p = put_delta(p, e->bytes, before.bytes);
    p = put_delta(p, e->stack, before.stack);
    ev->len = (size_t)(p - ev->buf);
    ev->n++;
    /* The cache holds this block now, up to the event before (vm_event_at
     * above read it, or the event is the block's first): the event is
     * added to it, and its cursor set after it. */
    struct vm_ev_cache *c = ev->cache;
    c->block = (ev->n - 1) / VM_EV_BLOCK + 1;
    c->filled = (ev->n - 1) % VM_EV_BLOCK + 1;
    c->ev[c->filled - 1] = *e;
    c->at = (struct vm_ev_cursor){.ev = ev, .i = ev->n, .p = ev->buf + ev->len, .time_ns = e->time_ns,
                                  .address = e->address, .bytes = e->bytes, .stack = e->stack};
    return 0;
}

void vm_events_done(struct vm_events *ev) {
    if (ev->buf && ev->len < ev->cap) {
        unsigned char *b = realloc(ev->buf, ev->len ? ev->len : 1);
        if (b) {
            ev->buf = b;
            ev->cap = ev->len ? ev->len : 1;
            if (ev->cache) ev->cache->block = 0;
        }
    }
}

void vm_events_free(struct vm_events *ev) {
    free(ev->buf);
    free(ev->block);
    free(ev->cache);
    memset(ev, 0, sizeof *ev);
}

void vm_ev_from(struct vm_ev_cursor *c, const struct vm_events *ev, size_t i) {
    *c = (struct vm_ev_cursor){.ev = ev, .i = i < ev->n ? i : ev->n};
    if (c->i == ev->n) return;
    size_t first = i - i % VM_EV_BLOCK;
    c->i = first;
    c->p = ev->buf + ev->block[first / VM_EV_BLOCK];
    struct vm_event skip;
    while (c->i < i) vm_ev_next(c, &skip);
}

int vm_ev_next(struct vm_ev_cursor *c, struct vm_event *e) {
    if (c->i >= c->ev->n) return 0;
    if (c->i % VM_EV_BLOCK == 0) {
        c->p = c->ev->buf + c->ev->block[c->i / VM_EV_BLOCK];
        c->time_ns = c->address = c->bytes = c->stack = 0;
    }
    const unsigned char *p = c->p;
    unsigned head = *p++;
    e->type = TYPES[head & 3];
    unsigned kind = head >> 4;
    e->kind = (uint8_t)(kind == 15 ? *p++ : kind);
    unsigned dev = head >> 2 & 3;
    if (dev == 2) {
        uint64_t o;
        p = vm_varint_get(p, &o);
        e->device = (int16_t)o;
    } else {
        e->device = dev ? -1 : 0;
    }
    p = get_delta(p, &c->time_ns);
    p = get_delta(p, &c->address);
    p = get_delta(p, &c->bytes);
    p = get_delta(p, &c->stack);
    e->time_ns = c->time_ns;
    e->address = c->address;
    e->bytes = c->bytes;
    e->stack = (uint32_t)c->stack;
    c->p = p;
    c->i++;
    return 1;
}

/* Block b's events into out. */
static void read_block(const struct vm_events *ev, size_t b, struct vm_event *out) {
    struct vm_ev_cursor r;
    vm_ev_from(&r, ev, b * VM_EV_BLOCK);
    for (size_t k = 0; k < VM_EV_BLOCK && vm_ev_next(&r, &out[k]); k++) {}
}

struct vm_event vm_event_at(const struct vm_events *ev, size_t i) {
    struct vm_ev_cache *c = ev->cache;
    size_t b = i / VM_EV_BLOCK;
    if (c->block != b + 1) {
        vm_ev_from(&c->at, ev, b * VM_EV_BLOCK);
        c->block = b + 1;
        c->filled = 0;
    }
    while (c->filled <= i % VM_EV_BLOCK) vm_ev_next(&c->at, &c->ev[c->filled++]);
    return c->ev[i % VM_EV_BLOCK];
}

void vm_ev_back_from_end(struct vm_ev_back *b, const struct vm_events *ev) {
    b->ev = ev;
    b->i = ev->n;
}

int vm_ev_prev(struct vm_ev_back *b, struct vm_event *e) {
    if (b->i == 0) return 0;
    /* A new block when the one read last was the block's first, or at the
     * start (the last event may be anywhere in its block). */
    if (b->i == b->ev->n || b->i % VM_EV_BLOCK == 0) read_block(b->ev, (b->i - 1) / VM_EV_BLOCK, b->blk);
    b->i--;
    *e = b->blk[b->i % VM_EV_BLOCK];
    return 1;
}
