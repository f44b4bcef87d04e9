/* torch.h -- PyTorch's own view of its memory, handed in by the Python
 * companion (python/vramtrace_torch/), kept for the dumps and reports.
 *
 * The companion calls vt_torch_submit (exported by interpose/api.c, which
 * sets the library up first, through ctypes; vt_torch_take below) with one
 * record of text: lines ended by '\n', fields separated by '\t', numbers
 * in decimal (u64), a text field at most VT_TORCH_TEXT bytes and holding no
 * tab or newline:
 *
 *   vramtrace-torch 1 REASON OOM_DEVICE REQUEST STEPS [RAISED_ALLOCATED [ROUNDED]]
 *   D DEVICE ALLOCATED RESERVED LARGEST_FREE FREE TOTAL
 *     PARAMETER BUFFER GRADIENT OPTIMIZER_STATE ACTIVATION OTHER SETTINGS
 *   T DEVICE BYTES BLOCK SEGMENT DTYPE CATEGORY SHAPE NAME HOLDER
 *   F DEVICE ADDRESS SIZE
 *
 * An F line is a segment of PyTorch's cache that holds no tensor (its
 * allocated_size 0: empty_cache() gives it back), at most
 * VT_TORCH_FREE_SEGS a device;
 * REASON is oom, exit or signal; OOM_DEVICE is -1 unless REASON is oom;
 * REQUEST 0 is the request of the OOM record the record belongs to;
 * RAISED_ALLOCATED (0 or left out: not known) is what PyTorch's error
 * says it had allocated on OOM_DEVICE when it refused (cudaMallocAsync's
 * "Currently allocated", to its two decimals): that backend's error
 * reaches the companion only after the failing operation has freed what
 * it had made, and this figure alone is of the refusal;
 * ROUNDED (0 or left out: exact) is 1 where REQUEST is the figure of
 * that error's text ("Requested : 1.07 GiB", two decimals of its unit),
 * not the bytes asked, which nothing PyTorch keeps gives;
 * FREE and TOTAL may be "-" (unknown); CATEGORY is one of the six names of
 * vt_torch_categories; each T or F line belongs to the D line of its
 * device, which comes before it. A record that breaks any of this, or any limit
 * below, is refused whole: nothing of it is kept, and the library never
 * reads past `len` bytes.
 *
 * An "oom" record belongs to the failure its thread's failed CUDA call
 * made (PyTorch's observer runs after the failed CUDA calls, on the same
 * thread), or, where another thread's is open on its device, to the
 * latest out-of-memory failure the tracker recorded at or before its
 * arrival on its device; the last of up to VT_TORCH_OOMS such records
 * are kept. An "exit" or "signal" record is the top-level PyTorch state of
 * the next dump of that reason. */
#ifndef VT_TORCH_H
#define VT_TORCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../tracker/tracker.h"
#include "findings.h"
#include "growth.h"
#include "symbolize.h"

#define VT_TORCH_TEXT 200
#define VT_TORCH_DEVICES 64
#define VT_TORCH_TENSORS 64      /* per device */
#define VT_TORCH_FREE_SEGS 4096  /* per device */
#define VT_TORCH_OOMS 64
#define VT_TORCH_MAX_LEN (4u << 20)
#define VT_TORCH_NCAT 6

enum { VT_TORCH_OOM, VT_TORCH_EXIT, VT_TORCH_SIGNAL };

extern const char *const vt_torch_categories[VT_TORCH_NCAT];

struct vt_torch_tensor {
    int device, category;
    uint64_t bytes, block, segment;
    char dtype[32], shape[VT_TORCH_TEXT + 1], name[VT_TORCH_TEXT + 1], holder[VT_TORCH_TEXT + 1];
};

struct vt_torch_device {
    int device, have_mem;
    uint64_t allocated, reserved, largest_free, free, total;
    uint64_t cat[VT_TORCH_NCAT];
    char settings[VT_TORCH_TEXT + 1];
    struct vt_torch_tensor *tensors;
    size_t ntensors;
    struct vt_torch_seg { uint64_t address, size; } *free_segs; /* F lines, by address */
    size_t nfree_segs;
};

struct vt_torch_record {
    int reason, oom_device;
    uint64_t oom_seq;   /* an "oom" record's failure (its number) where its thread's own; 0: by time */
    uint64_t request, steps, time_ns;
    uint64_t raised_allocated; /* PyTorch's allocated bytes when it refused, its error's (0: not known) */
    int request_rounded;       /* request is its error's two-decimal figure, not the bytes asked */
    struct vt_torch_device *devices;
    size_t ndevices;
};

/* The companion's entry point (see above). Returns 0 when the record was
 * kept, -1 when it was refused. After an "oom" record the listener set by
 * vt_torch_on_oom runs (the OOM dump again, with the record). */
int vt_torch_take(const char *text, size_t len);

/* What vt_torch_take calls after an "oom" record, with no lock held:
 * set at start (interpose/init.c) to vt_output_torch_oom. */
void vt_torch_on_oom(void (*listener)(void));

/* What vt_torch_take calls first for an "oom" record that no failed CUDA
 * call of the same thread came before (since its last successful
 * allocation): PyTorch refused the request itself (a memory fraction, its
 * own limit), so the record makes the OOM: `device`, the request in bytes
 * (0: not known), and the record's RAISED_ALLOCATED (0: the record came
 * at the refusal, as the caching allocator's observer sends it) and
 * ROUNDED (the request is its error's two-decimal figure).
 * Registered by the library's set-up. */
void vt_torch_on_unseen_oom(void (*fn)(int device, uint64_t request, uint64_t raised_allocated, int rounded));

/* The companion's function that submits a "signal" record, called by
 * vt_torch_refresh; NULL takes it away (the companion does at exit). */
void vt_torch_set_refresh(void (*fn)(void)) __attribute__((visibility("default")));

/* Before an on-demand dump: ask the companion, if there is one, for the
 * current state. Called with no lock of vramtrace's held. From then on the
 * "signal" record (vt_torch_top) is only one that arrived after this call:
 * a companion that sends none (the interpreter exiting) leaves the dump
 * without PyTorch's part, not with the record of an earlier dump. */
void vt_torch_refresh(void);

/* Parse one record into r (owned by the caller: vt_torch_record_free).
 * Returns 0, or -1 (r then holds nothing). */
int vt_torch_parse(const char *text, size_t len, struct vt_torch_record *r);
void vt_torch_record_free(struct vt_torch_record *r);

/* The dump's "torch" arrays: the top-level one for a dump of `reason`
 * ("exit", "signal"; nothing for "oom"), written as ,"torch":[...] after
 * the caller's last field, and the one of s->ooms[i]. Stacks are those of
 * s's live allocation at each tensor's segment. A device's "growth" is the
 * first of the n growing sites g (those of the whole run, or the one of
 * the failure's growing_site finding) whose holder is on that device
 * (vt_torch_name_growth), else null. */
void vt_torch_write_top(FILE *f, const struct vt_snapshot *s, const char *reason, const struct vt_growth *g,
                        size_t n);
void vt_torch_write_oom(FILE *f, const struct vt_snapshot *s, size_t i, const struct vt_growth *g, size_t n);

/* The report's lines: the breakdown of the latest OOM's record, and of the
 * top-level record for `reason`, with the growing site of g as the dump's
 * "growth" says. Nothing when there is none. */
void vt_torch_print_oom(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                        const struct vt_growth *g, size_t n);

/* After the record's breakdown at an OOM: the findings of fs that come
 * from the record (from_record: fragmented_cache, memory_fraction,
 * evaluation_keeps_graph, kept_exception, one_site_dominates of a fragmented cache's
 * segments), which the post-mortem, written before the record came,
 * could not say. */
void vt_torch_print_oom_findings(FILE *f, const struct vt_finding *fs, int n);
void vt_torch_print_top(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym, const char *reason,
                        const struct vt_growth *g, size_t n);

/* Name the holder of each of the n growing sites g (torch_growth.c): of
 * the tensors record r lists whose block lies in a live allocation of the
 * site (its segment, as the tracker recorded it), the Python object that
 * holds the most bytes ("history", a list of the program's), with its
 * bytes and device; "" where none does or r is NULL. With `cache`, also
 * each site's cache_bytes: the bytes of its live allocations that r lists
 * as segments holding no tensor (F lines: the same address and size),
 * when no allocation or free came after the record. The _oom form takes the record of
 * s->ooms[i] (no cache bound: PyTorch empties its cache before it raises),
 * the _top form the newest exit or on-demand record; both take the
 * records' lock. */
void vt_torch_name_growth(const struct vt_snapshot *s, const struct vt_symbols *sym, const struct vt_torch_record *r,
                          struct vt_growth *g, size_t n, int cache);
void vt_torch_name_growth_oom(const struct vt_snapshot *s, const struct vt_symbols *sym, size_t i,
                              struct vt_growth *g, size_t n);
void vt_torch_name_growth_top(const struct vt_snapshot *s, const struct vt_symbols *sym, struct vt_growth *g,
                              size_t n);

/* PyTorch's cache on the failing device, as the record of s->ooms[i]
 * measured it: 1 with *out set, 0 when no record of it came. */
struct vt_torch_cache {
    uint64_t allocated, reserved, largest_free, request;
    int expandable;  /* the settings say expandable_segments:True (the state in
                        force: python/vramtrace_torch/collect.py leads with it) */
    int pool;        /* backend:cudaMallocAsync: no blocks known (largest_free 0) */
    int split;       /* max_split_size_mb is set (the settings give a limit) */
    uint64_t activation; /* the bytes of activations saved for backward (0: no graph kept) */
    uint64_t optimizer_state; /* the bytes of optimizers' state on the device */
    int half;        /* a listed tensor of the device is float16 or bfloat16 */
    int fp32_activations; /* listed activations, all of them float32 */
    int eval_grad;   /* every model is in eval mode (training False) while
                        grad mode is on at the failure (eval_with_grad:True
                        in the settings, the companion's) */
    double fraction; /* per_process_memory_fraction, 1 when none was set */
    uint64_t raised_allocated; /* what PyTorch's error says it had allocated when it
                                  refused (the record's RAISED_ALLOCATED; 0: not known),
                                  to two decimals */
    int request_rounded;       /* request is that error's two-decimal figure */
};
int vt_torch_oom_cache(const struct vt_snapshot *s, size_t i, struct vt_torch_cache *out);

/* What kept exceptions' tracebacks hold on the failing device, as the
 * record of s->ooms[i] lists it (torch_kept.c): its tensors held by "the
 * traceback of NAME at FRAME" (or a graph so held), their bytes and
 * count, the first one's exception (NAME) and the largest's name, dtype,
 * shape and frame ("x, float32 [65536, 4096], at step train.py:8").
 * Returns 1 when there is any, 0 when none or no record came. */
struct vt_torch_kept {
    uint64_t bytes, count;
    char exception[VT_TORCH_TEXT + 1];
    char largest[2 * VT_TORCH_TEXT + 64];
};
int vt_torch_oom_kept(const struct vt_snapshot *s, size_t i, struct vt_torch_kept *out);

/* When the record of s->ooms[i] came (0: none has). */
uint64_t vt_torch_oom_time(const struct vt_snapshot *s, size_t i);

/* The first of the n growing sites g whose holder is on device and whose
 * memory is not mostly PyTorch's cache (vt_growth_mostly_cache), or NULL. */
const struct vt_growth *vt_torch_growth_on(const struct vt_growth *g, size_t n, int device);

/* Whether stack moves or makes a PyTorch module's parameters on the device
 * (Module.cuda, .to, .to_empty, ._apply, or a module's constructor, in
 * torch/nn/modules/): the model itself, which no batch size or
 * checkpointing shrinks and which is loaded, not leaked: never a growing
 * site. */
int vt_stack_makes_model(const struct vt_symbols *sym, uint32_t stack);

/* The kept records, for torch_dump.c and torch_print.c, between
 * vt_torch_lock and vt_torch_unlock: the top-level record of a dump of
 * `reason` ("exit", "signal"; NULL for "oom" or when none came), and the
 * record of s->ooms[i] (NULL when none came). */
/* An optimizer step began in this process (the companion's step pre-hook
 * says so, once): vt_torch_stepping is 1 from then on. A program that never
 * steps an optimizer (inference) never has it. */
void vt_torch_step_began(void);
int vt_torch_stepping(void);

void vt_torch_lock(void);
void vt_torch_unlock(void);
const struct vt_torch_record *vt_torch_top(const char *reason);
const struct vt_torch_record *vt_torch_for_oom(const struct vt_snapshot *s, size_t i);

/* The request of "oom" record r, which belongs to s->ooms[i]: its own, or
 * when it says 0 (the companion learnt of the failure from the exception
 * alone, under cudaMallocAsync) that of s->ooms[i], as is the exact size
 * of a failed call where the record's is its error's rounding of it.
 * vt_torch_request_rounded says whether the figure given is rounded. */
uint64_t vt_torch_request(const struct vt_torch_record *r, const struct vt_snapshot *s, size_t i);
int vt_torch_request_rounded(const struct vt_torch_record *r, const struct vt_snapshot *s, size_t i);

/* How far from the bytes a size PyTorch's error gives (its format_size:
 * two decimals of KiB, MiB or GiB) may be, given that figure: half a
 * hundredth of its unit, the larger unit where the figure lies on the
 * boundary ("1.00 GiB" is 1025 MiB as well as 1023.999 MiB). */
uint64_t vt_torch_rounding(uint64_t figure);

/* The stack of s's live device allocation holding each of d's tensors
 * (its block's address, else its segment's) into stack[j], or -1 when none
 * does: the first such allocation in the snapshot's order. One pass over
 * the live list for all of the device's tensors (a spilled list is read
 * from its file once, not once a tensor). */
void vt_torch_tensor_stacks(const struct vt_snapshot *s, const struct vt_torch_device *d,
                            int64_t stack[VT_TORCH_TENSORS]);

/* What PyTorch does not hold on a device: total - free - reserved, when
 * known (returns 0 when free and total are unknown or do not add up). */
int vt_torch_outside(const struct vt_torch_device *d, uint64_t *bytes);

/* After fork, in the child: forget the parent's records. */
void vt_torch_reset_child(void);

#endif
