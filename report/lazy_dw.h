/* lazy_dw.h -- whether libdw, loaded at its first use (lazy_dw.c), is
 * there. */
#ifndef VT_LAZY_DW_H
#define VT_LAZY_DW_H

/* NULL once libdw is loaded; else why the last try to load it failed (the
 * loader's words: "libdw.so.1: cannot open shared object file: Too many
 * open files"), or that none was made. Valid until the next try. */
const char *vt_dw_unloaded_why(void) __attribute__((visibility("hidden")));

#endif
