/* dlsym_x86_64.S -- vramtrace's dlsym.
 *
 * Asks vt_dlsym_filter whether it answers this look-up itself. If not, it
 * jumps to the real dlsym with the stack exactly as the caller left it, so
 * the real dlsym sees the caller's return address: RTLD_NEXT and RTLD_DEFAULT
 * then resolve relative to the caller's object, as without vramtrace. */
    .text
    .globl  dlsym
    .type   dlsym, @function
dlsym:
    .cfi_startproc
    pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp
    .cfi_adjust_cfa_offset 8
    call    vt_dlsym_filter
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    cmpq    $-1, %rax
    je      1f
    ret
1:
    jmp     *vt_real_dlsym(%rip)
    .cfi_endproc
    .size   dlsym, .-dlsym

    .section .note.GNU-stack,"",@progbits
