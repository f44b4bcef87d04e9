/* canload.h -- whether this process can load a library after its start.
 *
 * A CUDA library comes into a process at its start (linked) or later, by
 * dlopen. A process none of whose objects at start imports dlopen,
 * dlmopen, dlsym or dlvsym can load none later (the C library's own loads,
 * of its name services and character sets, aside): /bin/true, most shell
 * tools, the many processes an LD_PRELOAD reaches on its way to the one
 * that uses a GPU. What only a process that may touch a GPU needs done at
 * its start (the descriptor table grown while it has one thread,
 * common/fdkeep.h) is skipped in the others. Internal to interpose/. */
#ifndef VT_CANLOAD_H
#define VT_CANLOAD_H

/* 1 when an object of the link map (this library aside) imports one of
 * those four names, or its symbols cannot be read (any doubt answers yes);
 * else 0. At the start, before the program's first instruction: nothing
 * has been loaded since. */
int vt_start_can_load(void) __attribute__((visibility("hidden")));

#endif
