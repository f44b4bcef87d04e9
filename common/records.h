/* records.h -- the fields a record has on both sides, named once.
 *
 * The tracker keeps each record in a struct of its own (tracker/tracker.h:
 * vt_oom, vt_totals, vt_alloc, vt_event, vt_proc) and the CLI
 * reads it back from a dump into another (cli/model.h: vm_oom, ...). The
 * fields that mean the same on both sides, with the same type, are listed
 * here once, as VT_COUNTERS lists a device's counters (counters.h), and
 * each struct expands its list with VT_RECORD_FIELD where they stand. What
 * differs stays in each side's struct: a stack is an id in the process and
 * an index into the dump's "stacks" after reading; a kind is an enum
 * vt_kind in the process and its name after reading; the process packs
 * device and thread into small integers. The dump writes these fields
 * under these names. */
#ifndef VT_COMMON_RECORDS_H
#define VT_COMMON_RECORDS_H

#include <stdint.h>

/* A record's field as a struct member. */
#define VT_RECORD_FIELD(type, name) type name;

/* An out-of-memory failure: its number among the process's failures (1
 * for the first), when (ns since the tracker's start), the bytes asked
 * for, cuMemGetInfo's free and total bytes at the failure (0 when
 * unknown), the tracked live device bytes on that device then, the
 * graphs' and stream-ordered pools' reserved and used bytes, for a
 * refusal PyTorch made itself and vramtrace learnt of only as its error
 * reached Python (cudaMallocAsync's) what PyTorch had allocated when it
 * refused (its error's figure; 0 for any other failure, whose record is
 * of its own moment), the handles the failing request had made before it
 * (taken_bytes in taken_count handles, counted in the live bytes:
 * tracker/handlerun.h), and the API that failed. */
#define VT_OOM_FIELDS(X)        \
    X(uint64_t, number)         \
    X(uint64_t, time_ns)        \
    X(uint64_t, requested)      \
    X(uint64_t, free_bytes)     \
    X(uint64_t, total_bytes)    \
    X(uint64_t, live_bytes)     \
    X(uint64_t, graph_reserved) \
    X(uint64_t, graph_used)     \
    X(uint64_t, pool_reserved)  \
    X(uint64_t, pool_used)      \
    X(uint64_t, raised_allocated) \
    X(uint64_t, taken_bytes)    \
    X(uint64_t, taken_count)    \
    X(const char *, api)

/* The process's totals besides the device counters (VT_COUNTERS, device
 * memory only), all uint64_t: pinned host memory live and at its peak,
 * memory opened through IPC (not owned), frees of pointers never seen, and
 * hooked calls passed through unrecorded (made from a signal handler that
 * interrupted vramtrace's own code). X(name), as VT_COUNTERS. */
#define VT_TOTALS_COUNTERS(X) \
    X(host_live_bytes)        \
    X(host_live_count)        \
    X(host_peak_bytes)        \
    X(imported_live_bytes)    \
    X(imported_live_count)    \
    X(unknown_frees)          \
    X(missed)

/* A live allocation's size, when it was made (ns since the tracker's
 * start) and the API that made it. Its address is not here: in the
 * process it is the table's key (the handle, for memory known by handle),
 * in a dump the address the memory is mapped at where there is one, with
 * the handle beside it. */
#define VT_ALLOC_FIELDS(X)  \
    X(uint64_t, bytes)      \
    X(uint64_t, time_ns)    \
    X(const char *, api)

/* An event of the history: when, the allocation's address (its key, as the
 * tracker has it) and its bytes. */
#define VT_EVENT_FIELDS(X)  \
    X(uint64_t, time_ns)    \
    X(uint64_t, address)    \
    X(uint64_t, bytes)

/* What one call site (stack) holds: allocations and bytes, as the CLI
 * reads them (allocations in 32 bits, as the tracker's vt_holder keeps
 * them: a holder is 16 bytes with its stack's index first). */
#define VT_HOLDER_FIELDS(X) \
    X(uint32_t, count)      \
    X(uint64_t, bytes)

/* Another process on the same GPU, as NVML saw it at an OOM: its pid. Its
 * bytes are not here: the process keeps UINT64_MAX when NVML could not
 * say, a dump read back keeps a flag beside them (used_known). */
#define VT_PROC_FIELDS(X) \
    X(int32_t, pid)

#endif
