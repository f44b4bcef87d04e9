/* t_plug2.S -- int plug_alloc(size_t n): cuMemAlloc of n bytes, from a
 * frame of 88 bytes. t_plug1.S and t_plug2.S are the same code but for the
 * frame size, so the call returns to the same offset in either, with other
 * unwind rules there: loaded one after the other at one address, a stack
 * walk that kept plugin 1's rules would misread plugin 2's frames. */
    .text
    .globl plug_alloc
    .type plug_alloc, @function
plug_alloc:
    .cfi_startproc
    sub $88, %rsp
    .cfi_def_cfa_offset 96
    mov %rdi, %rsi
    lea 8(%rsp), %rdi
    call cuMemAlloc_v2@PLT
    add $88, %rsp
    .cfi_def_cfa_offset 8
    ret
    .cfi_endproc
    .size plug_alloc, .-plug_alloc
    .section .note.GNU-stack,"",@progbits
