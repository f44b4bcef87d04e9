/* graphs.c -- CUDA graphs' memory nodes, from their making to each launch
 * (graphs.h).
 *
 * Two tables of node lists keyed by handle, the graphs (and captures whose
 * graph the driver cannot name, by stream) and the executable graphs, and
 * a table of the allocation nodes' addresses (how many lists hold each),
 * under one lock. They are touched only by the graph calls and by
 * stream-ordered calls on a captured stream. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include <cuda.h>

#include "../common/warn.h"
#include "graphs.h"

struct node {
    struct vt_alloc a; /* as made: address, bytes, api, stack, device, kind */
    int freed;         /* the graph frees it */
    int foreign;       /* a free node of another graph's allocation: a.address only */
};

struct nodes {
    void *key;
    struct node *v;
    size_t n, cap;
    int auto_free; /* an exec instantiated with AUTO_FREE_ON_LAUNCH */
    UT_hash_handle hh;
};

struct addr {
    uint64_t address;
    unsigned refs; /* allocation nodes of this address in the lists */
    UT_hash_handle hh;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nodes *graphs, *execs;
static struct addr *addrs;

static struct nodes *get(struct nodes **table, void *key, int make) {
    struct nodes *s;
    HASH_FIND_PTR(*table, &key, s);
    if (!s && make && (s = calloc(1, sizeof *s))) {
        s->key = key;
        HASH_ADD_PTR(*table, key, s);
    }
    return s;
}

/* The address table's count of x, up or down. Lock held. */
static void count(const struct node *x, int up) {
    if (x->foreign) return;
    struct addr *e;
    HASH_FIND(hh, addrs, &x->a.address, sizeof x->a.address, e);
    if (up && !e && (e = calloc(1, sizeof *e))) {
        e->address = x->a.address;
        HASH_ADD(hh, addrs, address, sizeof e->address, e);
    }
    if (!e) return;
    if (up) e->refs++;
    else if (--e->refs == 0) {
        HASH_DEL(addrs, e);
        free(e);
    }
}

static void drop(struct nodes **table, struct nodes *s) {
    for (size_t i = 0; i < s->n; i++) count(&s->v[i], 0);
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
    count(x, 1);
    return 1;
}

/* Append node x to the list of `key` in `table`. Lock held. */
static void add(struct nodes **table, void *key, const struct node *x) {
    struct nodes *s = get(table, key, 1);
    if (!s || !append(s, x)) vt_records_lost("a CUDA graph's memory node");
}

void vt_graph_node_add(void *graph, const struct vt_alloc *a) {
    pthread_mutex_lock(&lock);
    add(&graphs, graph, &(struct node){.a = *a});
    pthread_mutex_unlock(&lock);
}

void vt_graph_free_node(void *graph, uint64_t address) {
    pthread_mutex_lock(&lock);
    struct nodes *s = get(&graphs, graph, 0);
    struct node *own = NULL;
    for (size_t i = 0; s && i < s->n && !own; i++)
        if (s->v[i].a.address == address && !s->v[i].freed && !s->v[i].foreign) own = &s->v[i];
    if (own) own->freed = 1;
    else add(&graphs, graph, &(struct node){.a.address = address, .foreign = 1});
    pthread_mutex_unlock(&lock);
}

int vt_graph_allocation(uint64_t address) {
    pthread_mutex_lock(&lock);
    struct addr *e;
    HASH_FIND(hh, addrs, &address, sizeof address, e);
    pthread_mutex_unlock(&lock);
    struct vt_alloc a;
    return e != NULL || (vt_tracker_find(VT_SPACE_DEVICE, address, &a) && a.kind == VT_KIND_GRAPH);
}

void vt_graph_capture_begins(void *stream) {
    pthread_mutex_lock(&lock);
    struct nodes *s = get(&graphs, stream, 0);
    if (s) drop(&graphs, s);
    pthread_mutex_unlock(&lock);
}

/* The nodes of list `from` appended to `into`'s, `from` dropped. Lock held. */
static void merge(void *from, void *into) {
    struct nodes *c = get(&graphs, from, 0), *g = c ? get(&graphs, into, 1) : NULL;
    for (size_t i = 0; g && i < c->n; i++)
        if (!append(g, &c->v[i])) vt_records_lost("a CUDA graph's memory node");
    if (c) drop(&graphs, c);
}

void vt_graph_capture_ended(void *key, void *graph, int ok) {
    pthread_mutex_lock(&lock);
    if (!ok) {
        struct nodes *s = get(&graphs, key, 0);
        if (s) drop(&graphs, s);
    } else if (key != graph) {
        merge(key, graph);
    }
    pthread_mutex_unlock(&lock);
}

void vt_graph_moved(void *child, void *parent) {
    pthread_mutex_lock(&lock);
    merge(child, parent);
    pthread_mutex_unlock(&lock);
}

void vt_graph_instantiated(void *graph, void *exec, unsigned long long flags) {
    pthread_mutex_lock(&lock);
    struct nodes *g = get(&graphs, graph, 0), *e = get(&execs, exec, 0);
    if (e) drop(&execs, e); /* a handle the driver handed out again */
    if (g && (e = get(&execs, exec, 1))) {
        e->auto_free = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
        for (size_t i = 0; i < g->n; i++)
            if (!append(e, &g->v[i])) vt_records_lost("a CUDA graph's memory node");
    }
    pthread_mutex_unlock(&lock);
}

/* Whether `address` holds a record, and which. */
static int recorded(uint64_t address, struct vt_alloc *a) {
    return vt_tracker_find(VT_SPACE_DEVICE, address, a);
}

/* A copy of exec's list (*auto_free its flag), or NULL. */
static struct node *copy_of(void *exec, size_t *n, int *auto_free) {
    pthread_mutex_lock(&lock);
    struct nodes *e = get(&execs, exec, 0);
    struct node *v = e && e->n ? malloc(e->n * sizeof *v) : NULL;
    *n = v ? e->n : 0;
    *auto_free = e ? e->auto_free : 0;
    if (v) memcpy(v, e->v, *n * sizeof *v);
    pthread_mutex_unlock(&lock);
    return v;
}

/* Allocation node x is allocated by this launch: its memory is not in use,
 * or the launch frees it first. */
static int allocates(const struct node *x, int auto_free) {
    return !x->foreign && (auto_free || !recorded(x->a.address, NULL));
}

int vt_graph_launch_needs(void *exec, int net, uint64_t need[VT_MAX_DEVICES]) {
    size_t n;
    int auto_free;
    struct node *v = copy_of(exec, &n, &auto_free);
    memset(need, 0, VT_MAX_DEVICES * sizeof *need);
    for (size_t i = 0; i < n; i++)
        if (allocates(&v[i], auto_free && !net) && v[i].a.device >= 0 && v[i].a.device < VT_MAX_DEVICES)
            need[v[i].a.device] += v[i].a.bytes;
    free(v);
    return n > 0;
}

void vt_graph_made(void *graph) {
    pthread_mutex_lock(&lock);
    struct nodes *s = get(&graphs, graph, 0);
    if (s) drop(&graphs, s);
    pthread_mutex_unlock(&lock);
}

int vt_graph_known(void *graph) {
    pthread_mutex_lock(&lock);
    int known = get(&graphs, graph, 0) != NULL;
    pthread_mutex_unlock(&lock);
    return known;
}

static void free_record(const struct vt_alloc *a) {
    struct vt_free f = vt_tracker_free_begin(vt_kind_space(a->kind), a->address);
    vt_tracker_free_end(&f, 1);
}

void vt_graph_launched(void *exec, void (*record)(const struct vt_alloc *a)) {
    size_t n;
    int auto_free;
    struct node *v = copy_of(exec, &n, &auto_free);
    struct vt_alloc held;
    /* Every allocation first (what the graph takes at most), then what it
     * frees of its own, then what it frees of other graphs'. */
    for (size_t i = 0; i < n; i++) {
        if (v[i].foreign) continue;
        int in_use = recorded(v[i].a.address, &held);
        if (in_use && !auto_free) continue; /* the last launch's, still held */
        if (in_use) free_record(&held);
        record(&v[i].a);
    }
    for (size_t i = 0; i < n; i++)
        if (v[i].freed) free_record(&v[i].a);
    for (size_t i = 0; i < n; i++)
        if (v[i].foreign && recorded(v[i].a.address, &held)) free_record(&held);
    free(v);
}

void vt_graph_dropped(void *key) {
    pthread_mutex_lock(&lock);
    struct nodes *s = get(&graphs, key, 0);
    if (s) drop(&graphs, s);
    if ((s = get(&execs, key, 0))) drop(&execs, s);
    pthread_mutex_unlock(&lock);
}

void vt_graphs_fork_prepare(void) { pthread_mutex_lock(&lock); }

void vt_graphs_fork_parent(void) { pthread_mutex_unlock(&lock); }

void vt_graphs_reset_child(void) {
    struct nodes *s, *t;
    HASH_ITER(hh, graphs, s, t) drop(&graphs, s);
    HASH_ITER(hh, execs, s, t) drop(&execs, s);
    struct addr *e, *f;
    HASH_ITER(hh, addrs, e, f) {
        HASH_DEL(addrs, e);
        free(e);
    }
}
