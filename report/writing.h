/* writing.h -- the outputs' writes seen from outside: how many bytes they
 * have written so far, and the point after which they write nothing.
 *
 * The exit waits for a dump another thread is writing (an on-request or
 * named dump, a failure's post-mortem) while it goes on; the bytes written
 * are one sign that it does (its thread's CPU time the other). Where the
 * exit gives up waiting (a reader that stalled, a writing still going
 * after 30 s), the C library's exit flushes every open stream, the
 * writer's among them, from the exit's thread and without the streams'
 * locks; the writer's own thread may be inside a write to it meanwhile
 * (waiting on a stalled reader: a flush that waited the same way held the
 * exit up to VT_FILE_WAIT_MS). So once vt_writing_abandon is called, each
 * output's write function returns at once, an error, touching nothing of
 * its stream's; a writer already waiting inside one goes on waiting,
 * until the process ends. */
#ifndef VT_WRITING_H
#define VT_WRITING_H

#include <stdint.h>
#include <sys/types.h>

/* n more bytes written by an output (each write(2) that took some). */
void vt_writing_count(uint64_t n);

/* The bytes written by every output so far. */
uint64_t vt_writing_bytes(void);

/* From now on no output writes anything (vt_writing_abandoned). */
void vt_writing_abandon(void);

/* 1 once vt_writing_abandon was called: the caller writes nothing. */
int vt_writing_abandoned(void);

/* A stream's write function's answer then: -1, errno EPIPE. */
ssize_t vt_writing_refused(void);

/* In a forked child: its outputs write again. */
void vt_writing_reset_child(void);

#endif
