/* cbplug1.S -- void plug_call(void (*f)(void)): calls f from a frame of
 * 24 bytes. cbplug1.S and cbplug2.S differ only in that size: f returns to
 * the same offset in either, with other unwind rules there. */
    .text
    .globl plug_call
    .type plug_call, @function
plug_call:
    .cfi_startproc
    sub $24, %rsp
    .cfi_def_cfa_offset 32
    call *%rdi
    add $24, %rsp
    .cfi_def_cfa_offset 8
    ret
    .cfi_endproc
    .size plug_call, .-plug_call
    .section .note.GNU-stack,"",@progbits
