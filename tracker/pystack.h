/* pystack.h -- the calling thread's Python frames, read without the GIL.
 *
 * Inside a CUDA hook the thread has usually released the GIL (ctypes,
 * PyTorch ops), and taking it could deadlock; so nothing here calls into
 * Python beyond pure reads (PyGILState_GetThisThreadState, a TLS look-up,
 * and on 3.10 PyCode_Addr2Line). The thread's own frame chain is read
 * directly, with the layout of the running CPython (3.10, 3.11 and 3.12
 * from tables checked against their headers; 3.13 from _Py_DebugOffsets).
 * Any other version, a debug or free-threaded build, or a failed check
 * leaves stacks native-only, with one warning.
 *
 * Python frames travel inside the ordinary stacks as tagged values (bit 63
 * set: never a user-space address): a code-object id and a line. Code
 * objects are interned, their names copied once; lines are cached per
 * (code, instruction). */
#ifndef VT_PYSTACK_H
#define VT_PYSTACK_H

#include <stdint.h>

#define VT_PYFRAME_TAG (1ull << 63)
/* Set, with the tag, on a frame borrowed from another thread (below). */
#define VT_PYFRAME_BORROWED (1ull << 62)

/* A stack deeper than a stack holds (a library recursing hundreds of
 * Python frames below the user's call) keeps its innermost frames and its
 * outermost VT_CUT_OUTER, and between them one frame that stands for the
 * frames left out: a Python frame value of a function id no code has
 * (every id bit set), its line field how many were left out (at most
 * 0xffffff). Dropping the outermost frames instead lost the user's own
 * line under the library's, and with it the call site. Reports name it
 * VT_CUT_NAME in VT_CUT_FILE (common/frame.h); it is never a call site. */
#define VT_CUT_OUTER 32
#define VT_PYFRAME_CUT (VT_PYFRAME_TAG | 0x3fffffffff000000ull)

/* Find the interpreter's symbols with `lookup` (dlsym on RTLD_DEFAULT,
 * done by the caller so that this file calls no dl function itself).
 * Safe to call more than once; does nothing when disabled. */
void vt_pystack_init(void *(*lookup)(const char *), int enabled);

/* Splice this thread's Python frames into a native stack (innermost
 * first): each native frame that runs the eval loop is replaced by the
 * Python frames it runs. Writes at most `max` frames to out and returns
 * how many; without Python frames it copies native unchanged. When more
 * than `max` frames make the stack, the innermost and the outermost are
 * kept with a cut frame (VT_PYFRAME_CUT) between them: where the Python
 * read left one, that one stands for more (the innermost Python frames
 * beside it go), so that the read's outermost Python frames and the native
 * frames outside them stay; else the outermost VT_CUT_OUTER Python frames
 * (a quarter of max, for a max under 4 * VT_CUT_OUTER) and the native
 * frames outside them follow it, so that native frames outermost (the
 * interpreter's start-up) do not take the place of the user's own. The
 * innermost frames keep at least as many places: past that, the
 * outermost frames that fit stay.
 *
 * A thread with no Python frames of its own (PyTorch's autograd threads,
 * which run backward() for a Python thread that waits) borrows the frames
 * of the Python thread it works for, appended outermost and marked
 * VT_PYFRAME_BORROWED: of the main interpreter's threads, those whose
 * innermost Python frame is in a torch/autograd/ file (PyTorch's
 * _engine_run_backward, which torch.autograd.backward and
 * Tensor.backward() call and which waits with the GIL released) and which
 * do not hold the GIL. When exactly one thread qualifies its frames are
 * borrowed; when none, or more than one (two backward passes at once:
 * which one this work is for is unknown), nothing is. A thread whose
 * outermost Python frame is PyTorch's own (a file in a "/torch/" folder:
 * PyTorch called into Python from C++, as checkpoint's unpack hook
 * recomputing a block on an autograd thread) keeps its frames and gets
 * the waiting thread's after them, by the same rule. Another thread's
 * chain may change or be freed while it is read: every byte of it is read
 * through process_vm_readv on this process, which fails instead of
 * faulting, every pointer is checked, and the walk is bounded. */
int vt_pystack_merge(const uintptr_t *native, int n, uintptr_t *out, int max);

/* vt_pystack_merge in its two steps, for a caller that keeps what it read
 * (pystack_id.c's memo): this thread's Python frames as read at one
 * capture, innermost first, cut into groups (ends[g]: the index of group
 * g's outermost frame; each group the frames one native eval-loop call
 * runs), or borrowed from another thread; then the splice into a native
 * stack. vt_pystack_read returns pf->n; with `trail`, it also keeps
 * there what vt_pystack_same compares. A thread with more than
 * VT_PY_MAX_FRAMES Python frames gets its innermost VT_PY_MAX_FRAMES -
 * VT_CUT_OUTER - 1, a cut frame for those left out, and its outermost
 * VT_CUT_OUTER (the frames past the first VT_PY_MAX_FRAMES are walked,
 * up to VT_PY_WALK_MAX frames in all, and only the last VT_CUT_OUTER
 * looked up); the frames cut and the outer ones join the group of the
 * innermost frame kept last, and such a read leaves no trail. */
#define VT_PY_MAX_FRAMES 256
#define VT_PY_WALK_MAX (1 << 20)
/* Every frame a read walked (shims and frames without code too), as the
 * walk saw it: its code and its instruction with its entry mark in the
 * top byte, two words a frame, room for every frame a walk can meet (its
 * frames and the shims and empty frames it may skip). */
struct vt_pytrail {
    int n; /* frames kept; -1: nothing to compare (see vt_pystack_same) */
    int placed; /* at[] holds places in the merged stack (vt_pystack_splice_placed) */
    int outer;  /* the outermost frame that gives a value */
    uint64_t freed; /* code objects freed before the read (none since: same code) */
    uintptr_t f[2 * (5 * VT_PY_MAX_FRAMES + 1)];
    /* Each frame's value: its index among the frames read, -1 for a frame
     * that gives none (a shim, a frame without code); and, once placed,
     * where each group of the frames read went in the merged stack: frame
     * j of group g at j + shift[g]. */
    int16_t py[5 * VT_PY_MAX_FRAMES + 1];
    int16_t shift[VT_PY_MAX_FRAMES];
};
struct vt_pyframes {
    int n, ngroups, borrowed;
    uintptr_t frames[VT_PY_MAX_FRAMES];
    int16_t ends[VT_PY_MAX_FRAMES];
};
int vt_pystack_read(struct vt_pyframes *pf, struct vt_pytrail *trail);
int vt_pystack_splice(const uintptr_t *native, int n, const struct vt_pyframes *pf, uintptr_t *out, int max);

/* vt_pystack_splice, and the places in `out` of the trail's frames noted
 * in it (trail->placed), for vt_pystack_patch; where the stack is cut or
 * borrowed, nothing is noted. */
int vt_pystack_splice_placed(const uintptr_t *native, int n, const struct vt_pyframes *pf, uintptr_t *out, int max,
                             struct vt_pytrail *trail);

/* The frames `pf` read with `trail` (and, unless NULL, the merged stack
 * `merged` that vt_pystack_splice_placed made of them with `trail`), brought
 * up to this thread's Python frames now, where only some frames' code or
 * instruction changed (the same frames met, each with its entry mark, the
 * chain ending where it ended, no code object freed since): each changed
 * frame's value written at its index in pf and its place in merged, the
 * trail updated. Returns how many changed (0: none), or -1 when the frames
 * cannot be patched so (another depth, a mark, a frame that gives no
 * value, another function outermost, a borrowed or cut read, merged given
 * and not placed): then the trail, pf and merged may be half updated, and
 * the caller reads again (vt_pystack_read with the trail). With merged,
 * the native frames must be those it was spliced with; without, pf is to
 * be spliced again (vt_pystack_splice_placed). */
int vt_pystack_patch(struct vt_pytrail *trail, struct vt_pyframes *pf, uintptr_t *merged);

/* Whether this thread's Python frames are still those a read left in
 * `trail`: the walk from the innermost frame meets as many frames as the
 * read did, each with the same code, instruction and entry mark (3.11's
 * entry flag, 3.12+'s owner), and then the chain's end. What a read makes
 * of a frame (its name and line, where its group ends) depends on those
 * alone, so a read now would give what that read gave, without a look-up
 * of any frame, so long as no code object was freed since (another could
 * then be at its address). Never for a trail of no frames or of borrowed
 * ones (the thread lent from may have moved), nor for a read that stopped
 * before the chain's end (n < 0). */
int vt_pystack_same(const struct vt_pytrail *trail);

static inline int vt_pyframe_is(uintptr_t v) { return (v & VT_PYFRAME_TAG) != 0; }
static inline int vt_pyframe_cut(uintptr_t v) { return (v & ~(VT_PYFRAME_BORROWED | 0xffffffull)) == VT_PYFRAME_CUT; }
/* The number of frames a cut frame stands for. */
static inline unsigned vt_pyframe_cut_count(uintptr_t v) { return (unsigned)(v & 0xffffff); }
static inline int vt_pyframe_borrowed(uintptr_t v) {
    return (v & (VT_PYFRAME_TAG | VT_PYFRAME_BORROWED)) == (VT_PYFRAME_TAG | VT_PYFRAME_BORROWED);
}

/* The Python frames of thread state `tstate` (any thread's), innermost
 * first, as borrowed tagged values; read only through process_vm_readv, so
 * that a chain into unmapped or freed memory ends the walk instead of the
 * process. Returns how many (at most max); 0 when Python frames are off. */
int vt_pystack_foreign(const void *tstate, uintptr_t *out, int max);

/* Names for a tagged frame: qualified function name, file, line. Returns
 * 0, or -1 for a value that is not a known Python frame. */
int vt_pyframe_resolve(uintptr_t v, const char **function, const char **file, int *line);

/* 0x030c01f0 for 3.12.1, or 0 when Python frames are off. */
unsigned long vt_pystack_version(void);

#endif
