/* trampoline_x86_64.S -- wrappers for a second library's definition.
 *
 * When two loaded libraries define the same hooked name (two drivers loaded
 * RTLD_LOCAL), the wrapper handed out for the second one is trampoline k of
 * this table (resolve.c's trampoline_for): it stores vt_tramp_target[k],
 * that library's function, in the calling thread's vt_redirect, and jumps
 * to the wrapper vt_tramp_wrapper[k] with every argument register and the
 * stack untouched. The wrapper's look-up of its real function
 * (vt_real_slow, for a shared hook) takes vt_redirect and clears it, so the
 * wrapper records the call and calls that library's function. Each
 * trampoline is 32 bytes; r10 and r11 are scratch at a call. */
    .text
    .p2align 5
    .globl  vt_trampolines
    .hidden vt_trampolines
    .type   vt_trampolines, @function
vt_trampolines:
    .set    k, 0
    .rept   64
    .p2align 5
    movq    vt_tramp_target+8*k(%rip), %r11
    movq    vt_redirect@gottpoff(%rip), %r10
    movq    %r11, %fs:(%r10)
    jmp     *vt_tramp_wrapper+8*k(%rip)
    .set    k, k+1
    .endr
    .size   vt_trampolines, .-vt_trampolines

    .section .note.GNU-stack,"",@progbits
