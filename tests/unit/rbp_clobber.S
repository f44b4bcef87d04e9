/* rbp_clobber.S -- long rbp_clobber(long (*f)(void), long v): calls f with
 * rbp set to v, as code built without frame pointers may leave any value
 * (a loop counter) in rbp. Its CFI is exact, so an unwinder walks through
 * it; a stack walk that read the garbage rbp would see it change. */
    .text
    .globl rbp_clobber
    .type rbp_clobber, @function
rbp_clobber:
    .cfi_startproc
    push %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    mov %rsi, %rbp
    call *%rdi
    pop %rbp
    .cfi_def_cfa_offset 8
    ret
    .cfi_endproc
    .size rbp_clobber, .-rbp_clobber
    .section .note.GNU-stack,"",@progbits
