/* dlsym_x86_64.S -- vramtrace's dlsym and dlopen.
 *
 * dlsym asks vt_dlsym_filter(handle, name, caller) whether it answers this
 * look-up itself; `caller` is the caller's return address, so that the
 * filter can resolve RTLD_DEFAULT and RTLD_NEXT against the caller's object.
 * If not, it jumps to the real dlsym with the stack exactly as the caller
 * left it, so the real dlsym sees the caller's return address: RTLD_NEXT and
 * RTLD_DEFAULT then resolve relative to the caller's object, as without
 * vramtrace.
 *
 * dlopen calls vt_dlopen_before() (which also finds the real dlopen), then
 * jumps to the real dlopen the same way: the caller's RPATH, RUNPATH and
 * $ORIGIN still apply. A mode with RTLD_DEEPBIND (8) asks
 * vt_dlopen_deep(file, mode, caller) instead, which returns dlopen's
 * answer, or -1 to have the real dlopen run as the caller's (deepbind.h).
 *
 * vt_dlsym_entry and vt_dlopen_entry name the two under names no other
 * library defines, for deepbind.c. */

/* The two arguments kept across the call into C, the stack aligned to 16. */
    .macro SAVE_ARGS
    pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp
    .cfi_adjust_cfa_offset 8
    .endm
    .macro RESTORE_ARGS
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    .endm

    .text
    .globl  dlsym
    .type   dlsym, @function
    .globl  vt_dlsym_entry
    .hidden vt_dlsym_entry
dlsym:
vt_dlsym_entry:
    .cfi_startproc
    SAVE_ARGS
    movq    24(%rsp), %rdx
    call    vt_dlsym_filter
    RESTORE_ARGS
    cmpq    $-1, %rax
    je      1f
    ret
1:
    jmp     *vt_real_dlsym(%rip)
    .cfi_endproc
    .size   dlsym, .-dlsym

    .globl  dlopen
    .type   dlopen, @function
    .globl  vt_dlopen_entry
    .hidden vt_dlopen_entry
dlopen:
vt_dlopen_entry:
    .cfi_startproc
    testl   $8, %esi
    jnz     2f
    SAVE_ARGS
    call    vt_dlopen_before
    RESTORE_ARGS
    jmp     *vt_real_dlopen(%rip)
2:
    SAVE_ARGS
    movq    24(%rsp), %rdx
    call    vt_dlopen_deep
    RESTORE_ARGS
    cmpq    $-1, %rax
    je      3f
    ret
3:
    jmp     *vt_real_dlopen(%rip)
    .cfi_endproc
    .size   dlopen, .-dlopen

    .section .note.GNU-stack,"",@progbits
