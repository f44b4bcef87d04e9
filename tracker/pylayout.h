/* pylayout.h -- what tracker/pystack.c knows of the running CPython, shared
 * with tracker/pyborrow.c (the frames of another thread). Private to
 * tracker/: nothing outside these two files includes it.
 *
 * pystack.c fills vt_pyl and the symbols once, in vt_pystack_init, before
 * it enables Python frames; both files only read them afterwards. */
#ifndef VT_PYLAYOUT_H
#define VT_PYLAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* Where the fields are, for the running version. -1: not in this version. */
struct vt_pylayout {
    int minor;
    int ts_frame;        /* 3.10: tstate->frame; 3.13: tstate->current_frame */
    int ts_cframe;       /* 3.11/3.12: tstate->cframe */
    int cf_current;      /* 3.11/3.12: cframe->current_frame */
    int ts_next;         /* tstate->next: the interpreter's list of threads */
    int interp_threads;  /* interp->threads.head (3.10: interp->tstate_head) */
    int gil_runtime;     /* 3.10/3.11: the GIL's state inside _PyRuntime */
    int gil_interp;      /* 3.12: interp->ceval.gil, a pointer to it */
    int gil_embedded;    /* 3.13: interp->_gil, the main interpreter's own */
    int gil_holder, gil_locked; /* in the GIL's state: last_holder, locked */
    int fr_code, fr_previous, fr_instr, fr_owner, fr_is_entry, fr_lasti;
    int owner_cstack;    /* owner value of C-stack shim frames, or -1 */
    int co_filename, co_name, co_qualname, co_firstlineno, co_linetable, co_code_adaptive;
    int str_state, str_length, str_ascii_size, str_compact_size;
    int bytes_size, bytes_sval;
    int ob_type;
};

/* 3.13's _Py_DebugOffsets, as its pycore_runtime.h declares it. */
struct py313_debug_offsets {
    char cookie[8];
    uint64_t version, free_threaded;
    struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
    struct {
        uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
            gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
            gil_runtime_state_holder;
    } interpreter_state;
    struct {
        uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
            datastack_chunk, status;
    } thread_state;
    struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner; } interpreter_frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
            localsplusnames, localspluskinds, co_code_adaptive;
    } code_object;
    struct { uint64_t size, ob_type; } pyobject;
    struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
    struct { uint64_t size, ob_item, ob_size; } tuple_object;
    struct { uint64_t size, ob_item, ob_size; } list_object;
    struct { uint64_t size, ma_keys, ma_values; } dict_object;
    struct { uint64_t size, ob_fval; } float_object;
    struct { uint64_t size, lv_tag, ob_digit; } long_object;
    struct { uint64_t size, ob_size, ob_sval; } bytes_object;
    struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
    struct { uint64_t size, collecting; } gc;
};

extern struct vt_pylayout vt_pyl;
extern void *vt_py_code_type;   /* &PyCode_Type */
extern void *vt_py_none;        /* &_Py_NoneStruct, or NULL */

/* Copy n bytes at src (an address of this process, possibly unmapped or
 * freed and reused) into dst without ever faulting: process_vm_readv on our
 * own pid. Returns 0 when all n bytes were read, -1 otherwise. */
int vt_py_peek(const void *src, void *dst, size_t n);

/* The tagged value (VT_PYFRAME_TAG, code id, line) of a frame running code
 * object `code` at instruction pointer `ip` (3.10: f_lasti), the code object
 * interned on first sight. With `safe` every byte is read through
 * vt_py_peek (another thread's frame: its objects may be freed under us);
 * otherwise directly (the calling thread's own frames). 0 when `code` is
 * not a code object or the interning tables are full. */
uintptr_t vt_py_code_value(const void *code, uintptr_t ip, int safe);

/* The line of code unit `unit` from a 3.11+ location table p[0..size)
 * (PEP 626/657's format, the same in 3.11, 3.12 and 3.13), the code's first
 * line `line`; 0 for none (pyline.c). */
int vt_py_line_from_table(const uint8_t *p, int64_t size, int line, int unit);

/* The line of byte offset `off` from a 3.10 line table p[0..size) (pairs
 * of byte delta and signed line delta, -128 for none), as
 * PyCode_Addr2Line reads it; 0 for none (pyline.c). */
int vt_py_line_from_310(const uint8_t *p, int64_t size, int line, int off);

/* The str object at s as UTF-8 in buf (size bytes, NUL-terminated),
 * read through vt_py_peek. Returns the length, or -1 when it could not be
 * read (buf is then ""). */
int vt_py_str_peek(const void *s, char *buf, size_t size);

/* Set up borrowing (pyborrow.c): the interpreter's list of threads and the
 * GIL's state, found with `lookup`. Called once by vt_pystack_init after
 * vt_pyl is set; without its symbols borrowing finds nothing. */
void vt_pyborrow_init(void *(*lookup)(const char *), void *(*this_tstate)(void));

/* The Python frames of the one thread that waits in PyTorch's autograd
 * (pystack.h's vt_pystack_merge rule), tagged and marked borrowed,
 * innermost first; 0 frames when no thread, or more than one, qualifies. */
int vt_pyborrow_frames(uintptr_t *out, int max);

#endif
