/* graphs.c -- CUDA graphs' allocation nodes, from their capture to each
 * launch (graphs.h).
 *
 * Three tables of node lists, keyed by handle: the captures in progress
 * (by stream), the graphs and the executable graphs, under one lock. They
 * are touched only by the graph calls and by allocations on a captured
 * stream. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "../common/warn.h"
#include "../tracker/tracker.h"
#include "graphs.h"

struct node {
    struct vt_alloc a; /* as recorded at the capture: address, bytes, api, stack, device, kind */
    int freed;         /* the graph frees it */
    int foreign;       /* a free node of another graph's allocation: a.address only */
};

struct nodes {
    void *key;
    struct node *v;
    size_t n, cap;
    UT_hash_handle hh;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nodes *captures, *graphs, *execs;

static struct nodes *get(struct nodes **table, void *key, int make) {
    struct nodes *s;
    HASH_FIND_PTR(*table, &key, s);
    if (!s && make && (s = calloc(1, sizeof *s))) {
        s->key = key;
        HASH_ADD_PTR(*table, key, s);
    }
    return s;
}

static void drop(struct nodes **table, struct nodes *s) {
    HASH_DEL(*table, s);
    free(s->v);
    free(s);
}

static int append(struct nodes *s, const struct node *x) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        struct node *m = realloc(s->v, cap * sizeof *m);
        if (!m) return 0;
        s->v = m;
        s->cap = cap;
    }
    s->v[s->n++] = *x;
    return 1;
}

void vt_graph_capture_begins(void *stream) {
    pthread_mutex_lock(&lock);
    struct nodes *s = get(&captures, stream, 0);
    if (s) drop(&captures, s);
    pthread_mutex_unlock(&lock);
}

/* Append node x to the list of `key` in `table`. */
static void add(struct nodes **table, void *key, const struct node *x) {
    pthread_mutex_lock(&lock);
    struct nodes *s = get(table, key, 1);
    if (!s || !append(s, x)) vt_records_lost("a CUDA graph's memory node");
    pthread_mutex_unlock(&lock);
}

/* An allocation node as recorded (graph memory, and stream-ordered memory
 * on the host, are known by device address). */
static int recorded(uint64_t address, struct node *x) {
    *x = (struct node){.freed = 0};
    return vt_tracker_find(VT_SPACE_DEVICE, address, &x->a);
}

void vt_graph_node(void *stream, uint64_t address) {
    struct node x;
    if (recorded(address, &x)) add(&captures, stream, &x);
}

void vt_graph_node_added(void *graph, uint64_t address) {
    struct node x;
    if (recorded(address, &x)) add(&graphs, graph, &x);
}

/* The allocation node at `address` in s, not freed by it, or NULL. Lock held. */
static struct node *own_node(struct nodes *s, uint64_t address) {
    for (size_t i = 0; s && i < s->n; i++)
        if (s->v[i].a.address == address && !s->v[i].freed && !s->v[i].foreign) return &s->v[i];
    return NULL;
}

void vt_graph_node_freed(void *stream, uint64_t address) {
    pthread_mutex_lock(&lock);
    struct node *x = own_node(get(&captures, stream, 0), address);
    if (x) x->freed = 1;
    pthread_mutex_unlock(&lock);
}

int vt_graph_capture_holds(void *stream, uint64_t address) {
    pthread_mutex_lock(&lock);
    int held = own_node(get(&captures, stream, 0), address) != NULL;
    pthread_mutex_unlock(&lock);
    return held;
}

void vt_graph_capture_frees(void *stream, uint64_t address) {
    add(&captures, stream, &(struct node){.a.address = address, .foreign = 1});
}

/* The record at `address` freed (a free node's work). */
static void free_record(const struct vt_alloc *a) {
    struct vt_free f = vt_tracker_free_begin(vt_kind_space(a->kind), a->address);
    vt_tracker_free_end(&f, 1);
}

void vt_graph_free_added(void *graph, uint64_t address) {
    pthread_mutex_lock(&lock);
    struct node *x = own_node(get(&graphs, graph, 0), address), mine = {.freed = 0};
    if (x) {
        x->freed = 1;
        mine = *x;
    }
    pthread_mutex_unlock(&lock);
    if (x) free_record(&mine.a);
    else add(&graphs, graph, &(struct node){.a.address = address, .foreign = 1});
}

void vt_graph_moved(void *child, void *parent) {
    pthread_mutex_lock(&lock);
    struct nodes *c = get(&graphs, child, 0), *g = c ? get(&graphs, parent, 1) : NULL;
    for (size_t i = 0; g && i < c->n; i++)
        if (!append(g, &c->v[i])) vt_records_lost("a CUDA graph's memory node");
    if (c) drop(&graphs, c);
    pthread_mutex_unlock(&lock);
}

void vt_graph_captured(void *stream, void *graph) {
    pthread_mutex_lock(&lock);
    struct nodes *c = get(&captures, stream, 0);
    if (c) {
        /* A capture into an existing graph (cuStreamBeginCaptureToGraph)
         * adds to its nodes. */
        struct nodes *g = get(&graphs, graph, 0);
        if (g) {
            for (size_t i = 0; i < c->n; i++)
                if (!append(g, &c->v[i])) vt_records_lost("a CUDA graph's allocation node");
            drop(&captures, c);
        } else {
            HASH_DEL(captures, c);
            c->key = graph;
            HASH_ADD_PTR(graphs, key, c);
        }
    }
    pthread_mutex_unlock(&lock);
}

void vt_graph_instantiated(void *graph, void *exec) {
    pthread_mutex_lock(&lock);
    struct nodes *g = get(&graphs, graph, 0), *e = g ? get(&execs, exec, 1) : NULL;
    if (e) {
        e->n = 0;
        for (size_t i = 0; i < g->n; i++)
            if (!append(e, &g->v[i])) vt_records_lost("a CUDA graph's allocation node");
    }
    pthread_mutex_unlock(&lock);
}

void vt_graph_launched(void *exec) {
    pthread_mutex_lock(&lock);
    struct nodes *e = get(&execs, exec, 0);
    struct node *v = e && e->n ? malloc(e->n * sizeof *v) : NULL;
    size_t n = v ? e->n : 0;
    if (v) memcpy(v, e->v, n * sizeof *v);
    pthread_mutex_unlock(&lock);
    for (size_t i = 0; i < n; i++) {
        const struct vt_alloc *a = &v[i].a;
        struct node held;
        if (v[i].foreign) {
            if (recorded(a->address, &held)) free_record(&held.a);
            continue;
        }
        if (!v[i].freed && recorded(a->address, &held)) continue; /* still held */
        vt_tracker_alloc_at(a->address, a->bytes, a->kind, a->device, a->api, a->stack);
        if (v[i].freed) free_record(a);
    }
    free(v);
}

uint64_t vt_graph_launch_need(void *exec, int *device) {
    uint64_t need[VT_MAX_DEVICES] = {0}, most = 0;
    pthread_mutex_lock(&lock);
    struct nodes *e = get(&execs, exec, 0);
    for (size_t i = 0; e && i < e->n; i++) {
        const struct node *x = &e->v[i];
        if (!x->foreign && x->a.device >= 0 && x->a.device < VT_MAX_DEVICES) need[x->a.device] += x->a.bytes;
    }
    pthread_mutex_unlock(&lock);
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        if (need[d] > most) {
            most = need[d];
            *device = d;
        }
    return most;
}

void vt_graph_dropped(void *key) {
    pthread_mutex_lock(&lock);
    struct nodes *s = get(&graphs, key, 0);
    if (s) drop(&graphs, s);
    if ((s = get(&execs, key, 0))) drop(&execs, s);
    pthread_mutex_unlock(&lock);
}

void vt_graphs_reset_child(void) { pthread_mutex_init(&lock, NULL); }
