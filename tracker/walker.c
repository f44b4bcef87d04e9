/* walker.c -- the frame walker: cached CFI rules, and the replay of the last walk.
 *
 * An allocation's stack is walked from the call frame information
 * (.eh_frame) of each return address, as libunwind's fast path does, but
 * with what each address needs boiled down to one 8-byte rule (cfi.c),
 * computed once from the .eh_frame the loader mapped and kept in a table
 * that threads read without a lock. A frame then costs a table probe and
 * one or two loads from the stack; a frame met at the same depth last time
 * costs no probe, and a stack walked the time before is checked, not
 * walked (see struct walk_cache).
 *
 * The walker handles the rules compilers emit for ordinary x86-64 code:
 * the CFA is rsp or rbp plus a constant, the return address sits just
 * below the CFA, rbp is either unchanged or saved at a constant offset. A
 * frame it cannot walk that way (a signal frame, a CFA expression, code
 * with no CFI, a stack other than the thread's own) makes it return -1,
 * and stack.c hands the whole capture to libunwind; so the walker is never
 * the only judge of a stack it does not understand. */
#define _GNU_SOURCE
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cfi.h"
#include "walker.h"

#define VT_NO_ASAN __attribute__((no_sanitize("address")))

uintptr_t vt_self_lo, vt_self_hi;

/* ---- the rule table ----------------------------------------------------- */

/* One entry of the rule table: a code address and its rule. */
struct rule_entry {
    uintptr_t ip; /* 0: empty; written last, with release order */
    uint64_t rule;
};

#define TABLE_BITS 16
#define TABLE_SIZE (1u << TABLE_BITS)
#define PROBES 32

/* The table, mapped once. A dlclose empties it (a library loaded later
 * could reuse the addresses) by dropping its pages, and bumps `generation`
 * so that threads drop what they remember too. */
static struct rule_entry *table;
static size_t table_used;
static uint64_t generation;
static pthread_mutex_t rule_lock = PTHREAD_MUTEX_INITIALIZER;

static inline uint32_t entry_of(uintptr_t ip) {
    return (uint32_t)(((uint64_t)ip * 0x9e3779b97f4a7c15ull) >> (64 - TABLE_BITS));
}

static inline int lookup(const struct rule_entry *t, uintptr_t ip, struct vt_rule *out) {
    uint32_t i = entry_of(ip);
    for (int p = 0; p < PROBES; p++, i = (i + 1) & (TABLE_SIZE - 1)) {
        uintptr_t k = __atomic_load_n(&t[i].ip, __ATOMIC_ACQUIRE);
        if (k == ip) {
            uint64_t r = __atomic_load_n(&t[i].rule, __ATOMIC_ACQUIRE);
            /* Still the same entry? (A dlclose may have emptied it, and a
             * new rule taken it, between the two loads.) */
            if (__atomic_load_n(&t[i].ip, __ATOMIC_RELAXED) != ip) return 0;
            memcpy(out, &r, sizeof r);
            return 1;
        }
        if (k == 0) return 0;
    }
    return 0;
}

/* Rule lock held. A full probe run leaves the rule uncached. */
static void store(struct rule_entry *t, uintptr_t ip, struct vt_rule r) {
    uint64_t v;
    memcpy(&v, &r, sizeof v);
    uint32_t i = entry_of(ip);
    for (int p = 0; p < PROBES; p++, i = (i + 1) & (TABLE_SIZE - 1)) {
        if (t[i].ip == 0) {
            __atomic_store_n(&t[i].rule, v, __ATOMIC_RELAXED);
            __atomic_store_n(&t[i].ip, ip, __ATOMIC_RELEASE);
            table_used++;
            return;
        }
        if (t[i].ip == ip) return;
    }
}

/* ---- finding a rule ------------------------------------------------------
 *
 * Read inside dl_iterate_phdr, which keeps the object from being unloaded
 * meanwhile: PT_GNU_EH_FRAME gives the .eh_frame_hdr where the loader
 * mapped it. */

struct find {
    uintptr_t pc;
    struct vt_rule r;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct find *f = data;
    const ElfW(Phdr) *eh = NULL;
    int inside = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_EH_FRAME) eh = ph;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
            if (f->pc >= lo && f->pc - lo < ph->p_memsz) inside = 1;
        }
    }
    if (!inside) return 0;
    if (eh) {
        const uint8_t *fde = vt_cfi_find_fde((const uint8_t *)(info->dlpi_addr + eh->p_vaddr), f->pc);
        if (fde) f->r = vt_cfi_rule(fde, f->pc);
    }
    return 1;
}

/* The rule for code address `pc` (a return address minus one). Rule lock
 * held. */
static struct vt_rule compute(uintptr_t pc) {
    struct find f = {pc, {0, 0, VT_RULE_OTHER, 1}};
    dl_iterate_phdr(find_object, &f);
    return f.r;
}

__attribute__((noinline)) static struct vt_rule slow_rule(uintptr_t pc) {
    struct vt_rule r = {0, 0, VT_RULE_OTHER, 1};
    pthread_mutex_lock(&rule_lock);
    struct rule_entry *t = table;
    if (t && !lookup(t, pc, &r)) {
        r = compute(pc);
        store(t, pc, r);
    }
    pthread_mutex_unlock(&rule_lock);
    return r;
}

void vt_walker_forget(void) {
    pthread_mutex_lock(&rule_lock);
    if (table && table_used) {
        /* Private anonymous pages read as zeros once dropped: an empty
         * table, without a new mapping or a write to every entry. A reader
         * that meets an entry as it goes sees the entry change and misses. */
        madvise(table, TABLE_SIZE * sizeof(struct rule_entry), MADV_DONTNEED);
        table_used = 0;
    }
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rule_lock);
}

void vt_walker_fork_prepare(void) { pthread_mutex_lock(&rule_lock); }
void vt_walker_fork_done(void) { pthread_mutex_unlock(&rule_lock); }

static int find_self(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uintptr_t probe = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        uintptr_t hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            vt_self_lo = lo;
            vt_self_hi = hi;
            return 1;
        }
    }
    return 0;
}

void vt_walker_init(int walk) {
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&vt_walker_init);
    pthread_mutex_lock(&rule_lock);
    if (!table && walk) {
        void *m = mmap(NULL, TABLE_SIZE * sizeof(struct rule_entry), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m != MAP_FAILED) __atomic_store_n(&table, (struct rule_entry *)m, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&rule_lock);
}

/* ---- capture ----------------------------------------------------------- */

/* This thread's stack, learnt once: the walker reads only inside it. */
static __thread uintptr_t stack_lo __attribute__((tls_model("initial-exec")));
static __thread uintptr_t stack_hi __attribute__((tls_model("initial-exec")));

/* What this thread's walks remember. By depth: the return address last
 * seen there and its rule, so that a frame seen before needs no table
 * probe. And the last walk as a replay: where it started (pc, stack
 * pointer and, if the walk used it, rbp), every stack word it read and
 * what it found there, and the frames it returned. The walk is a function
 * of its start and of the words it reads, so a walk that starts in the same
 * state and finds the same words at the same places would return the same
 * frames: checking that is a run of independent loads and compares. A
 * loop that allocates from one place pays only that. The replay says only
 * that the frames are the same (VT_STACK_SAME, or a copy of them); which
 * stack id they are is the tracker's memo (tracker/intern.c). */
#define CACHE_FRAMES (VT_STACK_MAX + 32)
struct walk_cache {
    uint64_t generation;      /* of the rule table the rules came from */
    uintptr_t ip[CACHE_FRAMES];
    struct vt_rule rule[CACHE_FRAMES];
    /* the replay; valid when nout >= 0 */
    uintptr_t start_ip, start_sp, start_bp;
    int need_bp, max, nout, nreads;
    struct { uint32_t off; uint32_t pad; uintptr_t val; } read[2 * CACHE_FRAMES]; /* off: from start_sp */
    /* The same words for the replay: adjacent ones in pairs (a saved rbp
     * and the return address above it, in code with frame pointers), the
     * rest single. */
    int npairs, nsingles;
    uint32_t pair_off[CACHE_FRAMES];
    uint32_t single_off[2 * CACHE_FRAMES];
    uintptr_t single_val[2 * CACHE_FRAMES];
    uintptr_t pair_val[CACHE_FRAMES][2] __attribute__((aligned(16)));
    uintptr_t out[VT_STACK_MAX];
};
static __thread struct walk_cache *walk_cache __attribute__((tls_model("initial-exec")));
__thread struct vt_stack_counts vt_walk_counts __attribute__((tls_model("initial-exec")));

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *m) { free(m); }
static void cache_key_make(void) { pthread_key_create(&cache_key, cache_free); }

/* This thread's stack bounds and walk cache, on its first capture. */
__attribute__((noinline)) static struct walk_cache *thread_setup(void) {
    if (!stack_hi) {
        pthread_attr_t a;
        void *addr = NULL;
        size_t size = 0;
        if (pthread_getattr_np(pthread_self(), &a) != 0) return NULL;
        int ok = pthread_attr_getstack(&a, &addr, &size) == 0 && size > 0;
        pthread_attr_destroy(&a);
        if (!ok) return NULL;
        stack_lo = (uintptr_t)addr;
        stack_hi = (uintptr_t)addr + size;
    }
    if (!walk_cache) {
        pthread_once(&cache_once, cache_key_make);
        struct walk_cache *m = calloc(1, sizeof *m);
        if (!m) return NULL;
        m->nout = -1;
        pthread_setspecific(cache_key, m);
        walk_cache = m;
    }
    return walk_cache;
}

/* Whether any word the last walk read has changed: one 16-byte load and
 * compare for a pair of adjacent words, one 8-byte for the others. */
VT_NO_ASAN static uintptr_t replay_diff(const struct walk_cache *m, const char *base) {
    uintptr_t diff = 0;
#if defined(__x86_64__)
#define PAIR_DIFF(k)                                                            \
    _mm_xor_si128(_mm_loadu_si128((const __m128i *)(base + m->pair_off[k])),   \
                  _mm_load_si128((const __m128i *)m->pair_val[k]))
    /* Four at a time into two accumulators, so that the ORs do not form
     * one chain. */
    __m128i acc = _mm_setzero_si128(), acc2 = _mm_setzero_si128();
    int k = 0;
    for (; k + 4 <= m->npairs; k += 4) {
        acc = _mm_or_si128(acc, _mm_or_si128(PAIR_DIFF(k), PAIR_DIFF(k + 1)));
        acc2 = _mm_or_si128(acc2, _mm_or_si128(PAIR_DIFF(k + 2), PAIR_DIFF(k + 3)));
    }
    for (; k < m->npairs; k++) acc = _mm_or_si128(acc, PAIR_DIFF(k));
#undef PAIR_DIFF
    acc = _mm_or_si128(acc, acc2);
    diff = _mm_movemask_epi8(_mm_cmpeq_epi8(acc, _mm_setzero_si128())) != 0xffff;
#else
    for (int k = 0; k < m->npairs; k++)
        diff |= (*(const uintptr_t *)(base + m->pair_off[k]) ^ m->pair_val[k][0]) |
                (*(const uintptr_t *)(base + m->pair_off[k] + 8) ^ m->pair_val[k][1]);
#endif
    for (int k = 0; k < m->nsingles; k++) diff |= *(const uintptr_t *)(base + m->single_off[k]) ^ m->single_val[k];
    return diff;
}

/* The walk (walker.h). */
VT_NO_ASAN __attribute__((noinline)) int vt_walk(uintptr_t *out, int max, uint64_t since) {
    const struct rule_entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    if (!t) return -1;
    struct walk_cache *m = walk_cache;
    if (!m && !(m = thread_setup())) return -1;
    uint64_t gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (m->generation != gen) {
        memset(m->ip, 0, sizeof m->ip);
        m->nout = -1;
        m->generation = gen;
    }
    /* This function's frame (it keeps rbp as its frame pointer, since it
     * asks for its frame address): the caller's pc, rsp and rbp. */
    const uintptr_t *fp = __builtin_frame_address(0);
    uintptr_t sp = (uintptr_t)(fp + 2);
    uintptr_t bp = fp[0];
    uintptr_t ip = (uintptr_t)__builtin_return_address(0);
    const uintptr_t hi = stack_hi;
    if (sp <= stack_lo || sp >= hi) return -1; /* on another stack (a signal stack, a coroutine) */

    /* Replay offsets are 32 bits: a stack of 4 GiB or more is not replayed. */
    int replayable = hi - sp < UINT32_MAX;
    if (m->nout >= 0 && ip == m->start_ip && sp == m->start_sp && max == m->max &&
        (!m->need_bp || bp == m->start_bp)) {
        uintptr_t diff = 0;
        const char *base = (const char *)sp;
        diff = replay_diff(m, base);
        if (diff == 0) {
            vt_walk_counts.replays++;
            if (since == vt_walk_counts.walks + vt_walk_counts.fallbacks) return VT_STACK_SAME;
            memcpy(out, m->out, (size_t)m->nout * sizeof *out);
            return m->nout;
        }
    }

    m->nout = -1;
    m->start_ip = ip;
    m->start_sp = sp;
    m->start_bp = bp;
    m->max = max;
    /* A saved rbp the walk reads is a word the replay must check only if the
     * walk then uses it (a CFA rbp-based): most code keeps other values in
     * rbp (a loop counter, say), which would spoil every replay. So the
     * last rbp read stays in the log only once it is used. */
    int need_bp = 0, nr = 0, bp_read = -1, bp_used = 0;
    int n = 0, mine = 1;
    for (int i = 0; n < max && i < CACHE_FRAMES; i++) {
        /* Frames of this library are walked through, not kept. */
        if (mine && (ip < vt_self_lo || ip >= vt_self_hi)) mine = 0;
        if (!mine) out[n++] = ip;
        struct vt_rule r;
        if (__builtin_expect(ip == m->ip[i], 1)) {
            r = m->rule[i];
        } else {
            if (!lookup(t, ip - 1, &r)) r = slow_rule(ip - 1);
            m->ip[i] = ip;
            m->rule[i] = r;
        }
        if (r.flags & (VT_RULE_END | VT_RULE_OTHER)) {
            if (r.flags & VT_RULE_END) break;
            return -1;
        }
        if (r.flags & VT_RULE_CFA_BP) {
            if (bp_read < 0) need_bp = 1; /* the rbp the walk started with */
            else bp_used = 1;
        }
        uintptr_t cfa = ((r.flags & VT_RULE_CFA_BP) ? bp : sp) + (uintptr_t)(intptr_t)r.cfa_off;
        if (cfa < sp + 8 || cfa > hi) return -1;
        if (r.flags & VT_RULE_BP_SAVED) {
            uintptr_t at = cfa + (uintptr_t)(intptr_t)r.bp_off;
            if (at < sp || at + 8 > hi) return -1;
            bp = *(const uintptr_t *)at;
            if (bp_read >= 0 && !bp_used) { /* the one before was never used */
                memmove(&m->read[bp_read], &m->read[bp_read + 1], (size_t)(nr - bp_read - 1) * sizeof m->read[0]);
                nr--;
            }
            bp_read = nr;
            bp_used = 0;
            m->read[nr].off = (uint32_t)(at - m->start_sp);
            m->read[nr++].val = bp;
        }
        ip = ((const uintptr_t *)cfa)[-1];
        m->read[nr].off = (uint32_t)(cfa - 8 - m->start_sp);
        m->read[nr++].val = ip;
        sp = cfa;
        if (ip == 0) break;
    }
    if (bp_read >= 0 && !bp_used) {
        memmove(&m->read[bp_read], &m->read[bp_read + 1], (size_t)(nr - bp_read - 1) * sizeof m->read[0]);
        nr--;
    }
    m->need_bp = need_bp;
    m->nreads = nr;
    /* The log is in stack order: pair up adjacent words. */
    m->npairs = m->nsingles = 0;
    for (int k = 0; k < nr; k++) {
        if (k + 1 < nr && m->read[k + 1].off == m->read[k].off + 8) {
            m->pair_off[m->npairs] = m->read[k].off;
            m->pair_val[m->npairs][0] = m->read[k].val;
            m->pair_val[m->npairs++][1] = m->read[k + 1].val;
            k++;
        } else {
            m->single_off[m->nsingles] = m->read[k].off;
            m->single_val[m->nsingles++] = m->read[k].val;
        }
    }
    memcpy(m->out, out, (size_t)n * sizeof *out);
    m->nout = replayable ? n : -1;
    vt_walk_counts.walks++;
    return n;
}
