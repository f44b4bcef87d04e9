/* t_fakesan_lib.c -- built as libt_fakesan.so with the soname
 * libasan.so.99: what a program that needs it names is a sanitizer's
 * runtime that no folder holds (tests/progs/asan.mk). */
int t_fakesan_answer(void) { return 42; }
