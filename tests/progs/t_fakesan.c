/* t_fakesan.c -- a program that needs libasan.so.99 (libt_fakesan.so's
 * soname), which the loader never finds: it does not start, as a
 * sanitizer build whose runtime refuses to start after another preload. */
int t_fakesan_answer(void);

int main(void) { return t_fakesan_answer() == 42 ? 0 : 1; }
