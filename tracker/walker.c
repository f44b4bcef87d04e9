/* walker.c -- the frame walker: a shadow of the last walk, checked, resumed
 * where the stack changed and rejoined where it is the same again.
 *
 * An allocation's stack is walked from the call frame information of each
 * return address, boiled down to one 8-byte rule per address (cfi.c, kept
 * in the table of rules.c). A walk is a function of where it starts (pc,
 * rsp, rbp) and of the stack words it reads, so each thread keeps a shadow
 * of its last walk: for every frame, the walk's state entering it (pc, rsp,
 * rbp and where that rbp was read), its rule, and the words its step read.
 * A new capture from the same start checks those words, innermost first:
 *
 *   - all the same: the same frames (a loop that allocates from one place
 *     pays only this check);
 *   - the first step whose words changed is frame f: frames 0..f-1 are the
 *     same, and the walk resumes at f from the state the shadow recorded;
 *   - wherever the new walk enters a frame at the same rsp and pc (and rbp,
 *     if the rest of the last walk used it) as a frame j of the last walk,
 *     and no word that last walk read from frame j on has changed, the rest
 *     is the last walk's from j: it is copied, not walked.
 *
 * So a stack that differs from the last one in a few frames costs those
 * frames. A frame the walker cannot follow (a signal frame, a CFA
 * expression, code with no CFI, a stack other than the thread's own) makes
 * it return -1, and stack.c hands the whole capture to libunwind; so the
 * walker is never the only judge of a stack it does not understand. */
#define _GNU_SOURCE
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"
#include "tblock.h"
#include "walker.h"

#define VT_NO_ASAN __attribute__((no_sanitize("address")))

uintptr_t vt_self_lo, vt_self_hi;

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
    if (walk) vt_rules_init();
}

void vt_walker_forget(void) { vt_rules_forget(); }

/* ---- the shadow ---------------------------------------------------------- */

#define CACHE_FRAMES (VT_STACK_MAX + 32)

/* One frame of a walk: the state entering it, and what its step (to the
 * caller) read. */
struct sframe {
    uintptr_t ip, sp, bp;     /* the walk's pc, rsp and rbp entering the frame */
    struct vt_rule rule;      /* with VT_RULE_BP_SAVED, the step read the caller's rbp at CFA + bp_off */
    int32_t bp_from;          /* the frame whose step read `bp`; -1: the rbp the walk started with */
    uint8_t odd;              /* the saved rbp is used and checked apart (not just below the return address) */
};

/* What one frame's step read: the 16 bytes below its CFA, of which the
 * mask says which words count: the return address always, the saved rbp
 * just below it only once a later frame's CFA used it (code without frame
 * pointers keeps anything in rbp, a loop counter say, which must not spoil
 * every check). val[0] holds the caller's rbp the step read wherever it lay
 * (see save_at); the mask counts it only when it lay just below the return
 * address, and a step that read no rbp leaves it as it was, uncounted. */
struct step {
    uintptr_t val[2] __attribute__((aligned(16))); /* the saved rbp, the return address */
    uintptr_t mask[2];
    uintptr_t win; /* where they were read: CFA - 16 */
};

/* A walk: nf frames entered, ns of them stepped from. `ended`: the stack's
 * end was reached; otherwise f[nf] is the state where the caps (max frames
 * returned, CACHE_FRAMES walked) stopped the walk. Its first nmine frames
 * are this library's (walked through, not returned); every frame after
 * them is returned (see nout). */
struct shadow {
    int valid, max, n, nf, ns, ended, nodd, nmine;
    int need0, bp0k; /* whether the walk used the rbp it started with, decided at frame bp0k (see start_bp_use) */
    uint64_t serial; /* vt_stack_serial after this walk */
    struct step st[CACHE_FRAMES];
    struct sframe f[CACHE_FRAMES + 1];
    uintptr_t out[VT_STACK_MAX];
};

/* Whether frame k of walk s is this library's, and how many frames that
 * walk returned before it. */
static inline int mine_at(const struct shadow *s, int k) { return k < s->nmine; }
static inline int nout(const struct shadow *s, int k) { return k > s->nmine ? k - s->nmine : 0; }

/* This thread's rules by return address: a small direct-mapped cache in
 * front of the shared table, indexed by the address's low bits (a hit is
 * one mask and one compare, where the table's probe is a hash, two atomic
 * loads of the key and one of the rule). Emptied when
 * the table's generation moves on (code was unloaded), like the shared
 * table itself, so a rule never outlives the code it was read from. */
#define RULE_CACHE_BITS 9
#define RULE_CACHE_SIZE (1u << RULE_CACHE_BITS)

struct rule_slot {
    uintptr_t ip; /* 0: empty */
    struct vt_rule rule;
};

static inline uint32_t rule_slot_of(uintptr_t ip) { return (uint32_t)ip & (RULE_CACHE_SIZE - 1); }

/* What this thread's walks remember: the rules of the return addresses
 * seen (so that a frame seen before needs no table probe); the last walk's
 * shadow, and a second one the next walk is built in. `busy` is set while
 * a walk runs: a signal handler's capture inside it must not touch the
 * shadows. */
struct walk_cache {
    uint64_t generation; /* of the rule table the rules came from */
    struct rule_slot rules[RULE_CACHE_SIZE];
    struct shadow *cur, *next;
    volatile int busy;
    struct shadow sh[2];
};

/* This thread's stack, learnt once: the walker reads only inside it. */
static __thread uintptr_t stack_lo __attribute__((tls_model("initial-exec")));
static __thread uintptr_t stack_hi __attribute__((tls_model("initial-exec")));
static __thread struct walk_cache *walk_cache __attribute__((tls_model("initial-exec")));
__thread struct vt_stack_counts vt_walk_counts __attribute__((tls_model("initial-exec")));

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

/* The caches, from mappings of vramtrace's (tblock.h): not from the
 * thread's malloc arena, on whose lock 256 threads' first calls queued. */
static struct vt_tblock_kind caches = VT_TBLOCK_KIND(sizeof(struct walk_cache), 256, NULL);

void vt_walker_fork_prepare(void) {
    vt_rules_fork_prepare();
    vt_tblock_lock(&caches);
}
void vt_walker_fork_done(void) {
    vt_tblock_unlock(&caches);
    vt_rules_fork_done();
}

/* At the thread's exit, its cache back for the next thread. A later key's
 * destructor (the program's, its key made after this one) that allocates
 * finds no cache and takes one, which the C library's next round of
 * destructors gives back: it runs them again while a key is set. */
static void cache_free(void *m) {
    walk_cache = NULL;
    vt_tblock_give(&caches, m);
}
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
        /* Not zeroed whole: that wrote all 16 pages of its 63 KB in the
         * thread's first call, and a page's first write is a page fault,
         * which with 256 threads starting took most of a first call's time
         * (docs/performance.md). The shadows' counts are zeroed, the rules
         * emptied at the first walk (by a generation no table has), and a
         * frame's or step's words are written before they are read: a
         * thread walking 30 frames writes 6 of its pages. A cache another
         * thread left is made ready the same way. */
        struct walk_cache *m = vt_tblock_take(&caches);
        if (!m) return NULL;
        m->generation = UINT64_MAX;
        m->busy = 0;
        m->cur = &m->sh[0];
        m->next = &m->sh[1];
        for (int k = 0; k < 2; k++) memset(&m->sh[k], 0, offsetof(struct shadow, st));
        pthread_setspecific(cache_key, m);
        walk_cache = m;
    }
    return walk_cache;
}

/* Where step k read the caller's rbp (its rule has VT_RULE_BP_SAVED). */
static inline const uintptr_t *save_at(const struct shadow *s, int k) {
    return (const uintptr_t *)(s->st[k].win + 16 + (uintptr_t)(intptr_t)s->f[k].rule.bp_off);
}

/* Whether the words step k read (and the walk used) have changed; `plain`:
 * the shadow has no odd frame. */
VT_NO_ASAN static inline uintptr_t step_diff_as(const struct shadow *s, int k, int plain) {
    const uintptr_t *w = (const uintptr_t *)s->st[k].win;
    uintptr_t d = ((w[0] ^ s->st[k].val[0]) & s->st[k].mask[0]) | (w[1] ^ s->st[k].val[1]);
    if (!plain && s->f[k].odd) d |= *save_at(s, k) ^ s->st[k].val[0];
    return d;
}

VT_NO_ASAN static inline uintptr_t step_diff(const struct shadow *s, int k) { return step_diff_as(s, k, 0); }

#if defined(__x86_64__)
/* What step k changed, in one 16-byte load and compare (the shadow has no
 * odd frame): nonzero where it changed. */
#define STEP_DIFF(s, k)                                                                           \
    _mm_and_si128(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(s)->st[k].win),                   \
                                _mm_load_si128((const __m128i *)(s)->st[k].val)),                    \
                  _mm_load_si128((const __m128i *)(s)->st[k].mask))

static inline int nonzero(__m128i d) {
    return _mm_movemask_epi8(_mm_cmpeq_epi8(d, _mm_setzero_si128())) != 0xffff;
}

/* a | b | c | d, folded into a in this order: an SSE2 or writes over one
 * of its operands, and the compiler, left to pair them, copies the ones a
 * caller keeps (one copy every four steps of every check). */
static inline __m128i fold(__m128i a, __m128i b, __m128i c, __m128i d) {
    a = _mm_or_si128(a, b);
    __asm__("" : "+x"(a));
    a = _mm_or_si128(a, c);
    __asm__("" : "+x"(a));
    return _mm_or_si128(a, d);
}
#endif

/* The first step whose words changed; s->ns when none did. Four steps at a
 * time (the step among four that changed is found from the differences
 * already made, not read again), then one by one. */
VT_NO_ASAN static int first_diff(const struct shadow *s) {
    int k = 0;
    if (!s->nodd) {
#if defined(__x86_64__)
        for (; k + 4 <= s->ns; k += 4) {
            /* Folded into d3, so that d0..d2 are kept as they are. */
            __m128i d0 = STEP_DIFF(s, k), d1 = STEP_DIFF(s, k + 1);
            __m128i d2 = STEP_DIFF(s, k + 2), d3 = STEP_DIFF(s, k + 3);
            if (nonzero(fold(d3, d2, d1, d0)))
                return k + (nonzero(d0) ? 0 : nonzero(d1) ? 1 : nonzero(d2) ? 2 : 3);
        }
#endif
        for (; k < s->ns; k++)
            if (step_diff_as(s, k, 1)) return k;
        return s->ns;
    }
    for (; k < s->ns; k++)
        if (step_diff(s, k)) return k;
    return s->ns;
}

/* The first step after `after` from which on no step's words changed,
 * looked for from the outermost in. */
VT_NO_ASAN static int clean_from(const struct shadow *s, int after) {
    int k = s->ns;
    if (!s->nodd) {
#if defined(__x86_64__)
        for (; k - 4 > after; k -= 4) {
            /* Folded into d0, so that d1..d3 are kept as they are. */
            __m128i d0 = STEP_DIFF(s, k - 4), d1 = STEP_DIFF(s, k - 3);
            __m128i d2 = STEP_DIFF(s, k - 2), d3 = STEP_DIFF(s, k - 1);
            if (nonzero(fold(d0, d1, d2, d3)))
                return k - (nonzero(d3) ? 0 : nonzero(d2) ? 1 : nonzero(d1) ? 2 : 3);
        }
#endif
        while (k - 1 > after && !step_diff_as(s, k - 1, 1)) k--;
        return k;
    }
    while (k - 1 > after && !step_diff(s, k - 1)) k--;
    return k;
}

/* Whether the walk from frame j on used the rbp it entered frame j with. */
static int needs_bp(const struct shadow *s, int j) {
    for (; j < s->nf; j++) {
        if (s->f[j].rule.flags & VT_RULE_CFA_BP) return 1;
        if (s->f[j].rule.flags & VT_RULE_BP_SAVED) return 0;
    }
    return !s->ended; /* a walk cut by the caps: what follows is not known */
}

/* Whether the walk used the rbp it started with: a frame up to the first
 * that saved rbp took its CFA from rbp. The first frame that uses or saves
 * rbp decides it (s->bp0k; s->nf when none does), so a walk that resumed
 * past that frame keeps the last walk's answer. */
static void start_bp_use(struct shadow *s) {
    int k = 0;
    while (k < s->nf && !(s->f[k].rule.flags & (VT_RULE_CFA_BP | VT_RULE_BP_SAVED))) k++;
    s->bp0k = k;
    s->need0 = k < s->nf && (s->f[k].rule.flags & VT_RULE_CFA_BP);
}

/* A later frame's CFA used the rbp step k read: from now on a check of
 * step k checks that word too. Returns 1 when frame k became odd (its
 * saved rbp is not just below its return address, and is checked apart). */
static inline int mark_used(struct shadow *s, int k) {
    if (s->st[k].mask[0] || s->f[k].odd) return 0;
    if (s->f[k].rule.bp_off == -16) {
        s->st[k].mask[0] = ~(uintptr_t)0;
        return 0;
    }
    s->f[k].odd = 1;
    return 1;
}

/* The rbp frame i enters with, read again from where the walk read it (an
 * rbp the walk had not used is not checked, so it may have changed), and
 * written into the frames that carry it (all of which carry the same one,
 * so they are rewritten only when it changed). */
VT_NO_ASAN static inline __attribute__((always_inline)) uintptr_t refresh_bp(struct shadow *s, int i,
                                                                           uintptr_t start_bp) {
    int k = s->f[i].bp_from;
    uintptr_t bp = start_bp;
    if (k >= 0) {
        bp = *save_at(s, k);
        s->st[k].val[0] = bp;
    }
    if (s->f[i].bp != bp)
        for (int j = k + 1; j <= i; j++) s->f[j].bp = bp;
    return bp;
}

/* Frames from..to-1 (and their steps up to `steps`) of the walk being
 * made, from the scratch shadow `s` into the shadow `o`; `odd`: whether
 * any of them was made odd. A few frames, copied record by record (a
 * library memcpy of a few hundred bytes costs more than the copy). */
__attribute__((optimize("no-tree-loop-distribute-patterns")))
static void put_scratch(struct shadow *o, const struct shadow *s, int from, int to, int steps, int odd) {
    if (to <= from) return;
    for (int k = from; k < to; k++) o->f[k] = s->f[k];
    for (int k = from; k < steps; k++) o->st[k] = s->st[k];
    if (odd)
        for (int k = from; k < to; k++) o->nodd += o->f[k].odd;
}

/* The odd frames among o's frames from..to-1 are dropped. */
static void drop_odd(struct shadow *o, int from, int to) {
    if (o->nodd)
        for (int k = from; k < to; k++) o->nodd -= o->f[k].odd;
}

/* The frames of o from i, up to the first that saved rbp (up to o's frame
 * `end`), enter with the rbp `bp` this walk read at `bp_from`; the frames
 * taken from o's frame j on read it from j on. Returns the first frame
 * after them. */
static inline int take_bp(struct shadow *o, int i, int end, int j, int bp_from, uintptr_t bp) {
    int k = i;
    for (; k <= end && o->f[k].bp_from < j; k++) {
        o->f[k].bp_from = bp_from;
        o->f[k].bp = bp;
        if (k < end && (o->f[k].rule.flags & VT_RULE_CFA_BP) && bp_from >= 0) o->nodd += mark_used(o, bp_from);
    }
    return k;
}

/* The new walk, at frame i (rbp `bp` from `bp_from`, *n frames returned
 * into `out`, which is o->out, its frames below `from` already in o, those
 * from `from` on in the scratch shadow `s`), has met the last walk `o` at
 * o's frame j: o becomes the new walk, its frames 0..from-1, the scratch
 * frames from..i-1, and its own frames from j on moved to i,
 * as far as this walk's caps allow. Returns the index of the first frame
 * not taken, and in *stopped whether the caps stopped the taking. */
VT_NO_ASAN static int splice(struct shadow *o, const struct shadow *s, int from, int i, int j, uintptr_t *out,
                             int *n, int max, int bp_from, uintptr_t bp, int odd, int mine, int nmine,
                             int *stopped) {
    int dn = *n - nout(o, j), di = i - j, end = o->nf;
    if (di == 0 && dn == 0 && max == o->max) {
        /* The common rejoin: the frames taken stay where they are and
         * return what they returned, all of them. */
        *stopped = 0;
        *n = o->n;
        if (!mine) o->nmine = nmine;
        drop_odd(o, from, j);
        put_scratch(o, s, from, i, i, odd);
        take_bp(o, i, end, j, bp_from, bp);
        if (!o->ended) o->ns = end;
        return end;
    }
    if (max != o->max || dn > 0 || di > 0)
        for (end = j; end < o->nf; end++)
            if (nout(o, end) + dn >= max || end + di >= CACHE_FRAMES) break;
    *stopped = end < o->nf;
    int cnt = end - j, steps = (end < o->ns ? end : o->ns) - j;
    int nend = (end < o->nf ? nout(o, end) : o->n) + dn;
    /* The frames taken return what they returned, dn places on; the new
     * walk wrote its frames over o->out below *n, so when it returned more
     * frames than the last (dn > 0) the ones it wrote over are read again
     * from the frames' pcs (a frame past this library's returns its pc). */
    if (dn < 0) {
        memmove(out + *n, out + nout(o, j), (size_t)(nend - *n) * sizeof *out);
    } else if (dn > 0) {
        int at = *n;
        for (int k = j; k < end; k++)
            if (!mine_at(o, k)) out[at++] = o->f[k].ip;
    }
    *n = nend;
    /* This walk's frames of this library: those it found, or, when it
     * meets the last walk still among them, as many more as the last walk
     * found from j on (each frame taken then returns what it returned, dn
     * places on). */
    o->nmine = mine ? o->nmine + di : nmine;
    drop_odd(o, from, j);
    drop_odd(o, end, o->nf);
    if (di) {
        memmove(&o->f[i], &o->f[j], (size_t)(cnt + 1) * sizeof o->f[0]);
        memmove(&o->st[i], &o->st[j], (size_t)steps * sizeof o->st[0]);
    }
    put_scratch(o, s, from, i, i, odd);
    /* The frames up to the first that saved rbp enter with this walk's rbp;
     * those after, with an rbp read from the frames taken. */
    int k = take_bp(o, i, i + cnt, j, bp_from, bp);
    if (di)
        for (; k <= i + cnt; k++) o->f[k].bp_from += di;
    if (!*stopped && o->ended) {
        o->ns = i + (o->ns - j);
    } else {
        o->ns = i + cnt;
        o->ended = 0;
    }
    o->nf = i + cnt;
    return i + cnt;
}

/* The walk proper (see the top of the file); `ip`, `sp`, `bp`: the
 * caller's state. The last walk's shadow `o` becomes this walk's: frames
 * taken from it stay in place, and the frames walked are written over its
 * frames that cannot be met again, or else made in the scratch shadow and
 * copied in. */
VT_NO_ASAN static int walk(struct walk_cache *m, const struct vt_rule_entry *t, uintptr_t *dst, int max,
                           uint64_t since, uintptr_t ip, uintptr_t sp, uintptr_t bp) {
    const uintptr_t hi = stack_hi, start_bp = bp;
    struct shadow *o = m->cur, *s = m->next;
    /* The frames are written into the shadow's own list, where the last
     * walk's frames kept (its prefix, a rejoined rest) already are, and
     * copied out once at the end. */
    uintptr_t *out = o->out;
    int f = 0, c;
    if (!o->valid) {
        o->nf = o->ns = o->n = o->nodd = 0;
        o->ended = 1;
    } else if (ip == o->f[0].ip && sp == o->f[0].sp && (!o->need0 || bp == o->f[0].bp)) {
        f = first_diff(o);
        if (f == o->ns && max == o->max) {
            vt_walk_counts.replays++;
            if (since == o->serial) return VT_STACK_SAME;
            memcpy(dst, o->out, (size_t)o->n * sizeof *dst);
            return o->n;
        }
    }
    int onf = o->valid ? o->nf : 0;
    /* nmine: where this walk's frames of this library end, once `mine`
     * is 0. */
    int n = 0, mine = 1, nmine = 0, bp_from = -1, i = 0, from = 0, odd = 0;
    /* Frames 0..f-1 are the last walk's (and this walk would not stop
     * before f): resume at f. */
    if (f >= o->ns || nout(o, f) >= max) f = 0;
    if (f > 0) {
        i = from = f;
        n = nout(o, f);
        ip = o->f[f].ip;
        sp = o->f[f].sp;
        bp_from = o->f[f].bp_from;
        mine = mine_at(o, f - 1);
        nmine = o->nmine;
        bp = refresh_bp(o, f, start_bp);
        vt_walk_counts.resumes++;
    }
    /* Only the last walk's frames from c on, whose steps read words that
     * have not changed, can be met again: those at rsp csp and above. */
    c = onf ? clean_from(o, f - 1) : 0;
    uintptr_t csp = c < onf ? o->f[c].sp : UINTPTR_MAX;
    /* The new frames below sf are written straight into o: a frame of the
     * last walk that can no longer be met (below c, or passed by the rsp
     * of the new walk) is written over, its odd mark counted out first.
     * From the first new frame whose place in o holds a frame that may
     * still be met on, they are made in the scratch shadow and copied in
     * when the walk is done or rejoins (`scratch` set; sf stays there). */
    int sf = onf ? c : CACHE_FRAMES + 1, scratch = 0;
    if (sf < from) sf = from;
    if (o->nodd)
        for (int k = from; k < sf && k < onf; k++) o->nodd -= o->f[k].odd;
    int j = c, steps = 0; /* the last walk's frames below the new walk's rsp are passed */
    /* F and S: frame i and its step, in o below sf, in s from sf on.
     * bp_mask: the rbp word's mask in the step of this stretch that read
     * rbp just below its return address (what a frame-pointer CFA then
     * uses); NULL when rbp came from elsewhere. */
    struct sframe *F = &o->f[i];
    struct step *S = &o->st[i];
    uintptr_t *bp_mask = NULL;
    for (;;) {
        if (n >= max || i >= CACHE_FRAMES) {
            if (i >= sf) F = &s->f[i];
            F->ip = ip;
            F->sp = sp;
            F->bp = bp;
            F->bp_from = bp_from;
            drop_odd(o, sf, o->nf);
            put_scratch(o, s, sf, i + 1, i, odd);
            o->nf = o->ns = i;
            o->ended = 0;
            if (mine) nmine = i;
            steps += i - from;
            break;
        }
        if (mine && (ip < vt_self_lo || ip >= vt_self_hi)) {
            mine = 0;
            nmine = i;
        }
        if (sp >= csp) {
            while (j < onf && o->f[j].sp < sp) j++;
            if (j < onf && o->f[j].sp == sp && o->f[j].ip == ip && mine_at(o, j) == mine &&
                (bp == o->f[j].bp || !needs_bp(o, j))) {
                /* The last walk from frame j on is this walk's. */
                vt_walk_counts.rejoins++;
                int stopped, was_ended = o->ended;
                steps += i - from;
                i = splice(o, s, sf, i, j, out, &n, max, bp_from, bp, odd, mine, nmine, &stopped);
                nmine = o->nmine;
                if (!stopped && was_ended) break;
                /* This walk's frame limit reached where the frames taken
                 * end: o->f[i] holds the state there, as the last walk
                 * left it (its rbp is read again by a walk that goes on
                 * from it). */
                if (n >= max) break;
                /* Stopped by the caps, here or in the last walk: go on from
                 * the state the last walk had there (the loop's top stops
                 * at once if this walk's caps say so). */
                ip = o->f[i].ip;
                sp = o->f[i].sp;
                bp_from = o->f[i].bp_from;
                bp = refresh_bp(o, i, start_bp);
                mine = mine_at(o, i - 1);
                from = sf = i;
                scratch = 1;
                odd = 0;
                j = onf = 0;
                csp = UINTPTR_MAX;
                F = &s->f[i];
                S = &s->st[i];
                bp_mask = NULL;
                continue;
            }
        }
        if (__builtin_expect(i == sf, 0) && !scratch) {
            if (i < j || i >= onf || o->f[i].sp <= sp) {
                if (o->nodd && i < onf) o->nodd -= o->f[i].odd;
                sf++;
            } else {
                scratch = 1;
                F = &s->f[i];
                S = &s->st[i];
            }
        }
        F->ip = ip;
        F->sp = sp;
        F->bp = bp;
        F->bp_from = bp_from;
        F->odd = 0;
        if (!mine) out[n++] = ip;
        struct vt_rule r;
        struct rule_slot *rs = &m->rules[rule_slot_of(ip)];
        if (__builtin_expect(ip == rs->ip, 1)) {
            r = rs->rule;
        } else {
            if (!vt_rules_lookup(t, ip - 1, &r)) r = vt_rules_compute(ip - 1);
            rs->ip = ip;
            rs->rule = r;
        }
        F->rule = r;
        if (r.flags & (VT_RULE_END | VT_RULE_OTHER)) {
            if (!(r.flags & VT_RULE_END)) return -1;
            drop_odd(o, sf, o->nf);
            put_scratch(o, s, sf, i + 1, i, odd);
            o->nf = i + 1;
            o->ns = i;
            o->ended = 1;
            if (mine) nmine = i + 1;
            steps += i - from;
            break;
        }
        uintptr_t cfa = sp;
        if (r.flags & VT_RULE_CFA_BP) {
            /* The rbp this CFA uses is now a word the checks count
             * (mark_used; written out for the common case, a frame
             * pointer this stretch just read below a return address). */
            if (bp_mask) *bp_mask = ~(uintptr_t)0;
            else if (bp_from >= 0) {
                if (bp_from < sf) o->nodd += mark_used(o, bp_from);
                else odd |= mark_used(s, bp_from);
            }
            cfa = bp;
        }
        cfa += (uintptr_t)(intptr_t)r.cfa_off;
        if (cfa < sp + 8 || cfa > hi) return -1;
        S->win = cfa - 16;
        S->mask[0] = 0;
        S->mask[1] = ~(uintptr_t)0; /* the return address always counts */
        if (r.flags & VT_RULE_BP_SAVED) {
            /* cfi.c keeps bp_off at -8 or below: the word lies below the CFA. */
            const uintptr_t *at = (const uintptr_t *)(cfa + (uintptr_t)(intptr_t)r.bp_off);
            if ((uintptr_t)at < sp) return -1;
            bp = *at;
            S->val[0] = bp;
            bp_mask = r.bp_off == -16 ? &S->mask[0] : NULL;
            bp_from = i;
        }
        ip = ((const uintptr_t *)cfa)[-1];
        S->val[1] = ip;
        sp = cfa;
        i++;
        F++;
        S++;
        if (ip == 0) {
            drop_odd(o, sf, o->nf);
            put_scratch(o, s, sf, i, i, odd);
            o->nf = o->ns = i;
            o->ended = 1;
            if (mine) nmine = i;
            steps += i - from;
            break;
        }
    }
    vt_walk_counts.steps += (uint64_t)steps;
    o->n = n;
    o->nmine = nmine;
    o->max = max;
    if (f <= o->bp0k) start_bp_use(o);
    memcpy(dst, out, (size_t)n * sizeof *dst);
    vt_walk_counts.walks++;
    o->serial = vt_walk_counts.walks + vt_walk_counts.fallbacks;
    o->valid = 1;
    return n;
}

/* The walk (walker.h). */
VT_NO_ASAN __attribute__((noinline)) int vt_walk(uintptr_t *out, int max, uint64_t since) {
    const struct vt_rule_entry *t = __atomic_load_n(&vt_rules, __ATOMIC_ACQUIRE);
    if (!t) return -1;
    struct walk_cache *m = walk_cache;
    if (!m && !(m = thread_setup())) return -1;
    if (m->busy) return -1;
    uint64_t gen = __atomic_load_n(&vt_rules_generation, __ATOMIC_ACQUIRE);
    if (m->generation != gen) {
        memset(m->rules, 0, sizeof m->rules);
        m->cur->valid = 0;
        m->generation = gen;
    }
    /* This function's frame (it keeps rbp as its frame pointer, since it
     * asks for its frame address): the caller's pc, rsp and rbp. */
    const uintptr_t *fp = __builtin_frame_address(0);
    uintptr_t sp = (uintptr_t)(fp + 2);
    if (sp <= stack_lo || sp >= stack_hi) return -1; /* on another stack (a signal stack, a coroutine) */
    m->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    int n = walk(m, t, out, max, since, (uintptr_t)__builtin_return_address(0), sp, fp[0]);
    /* A walk that failed leaves no shadow: the capture goes to libunwind,
     * and the next one must not replay a walk from before it. */
    if (n == -1) m->cur->valid = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    m->busy = 0;
    return n;
}
