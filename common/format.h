/* format.h -- small text helpers shared by the report writers. */
#ifndef VT_FORMAT_H
#define VT_FORMAT_H

#include <stdint.h>
#include <stdio.h>

/* "1.50 GiB", "512 B": a byte count for people, in the unit its figure
 * has once rounded to two decimals (1048575 bytes are "1.00 MiB", never
 * "1024.00 KiB"); PiB is the largest ("16384.00 PiB" for 2^64 - 1).
 * Writes into buf. */
const char *vt_fmt_bytes(uint64_t bytes, char *buf, size_t size);

/* "+3.00 GiB over 6 allocations in 0.100 s, 512.00 MiB per allocation":
 * how a growing call site's figures read, in the library's reports and in
 * the CLI's alike (unit is singular: "allocation"; units == 1 reads "over
 * 1 allocation"). In the program's own steps (unit "step") the rate comes
 * first: "+512.00 MiB per step over the last 6 steps (+3.00 GiB in 0.100
 * s)", and where those are the newest of more steps than the boundaries
 * kept (run_steps, the run's steps; 0 otherwise) "over the last 4095 of
 * the run's 6044 steps". Per second (unit "second", units the
 * allocations, per_unit bytes a second): "+3.00 GiB over 6 allocations in
 * 0.100 s, 30.00 GiB per second". Writes into buf and returns it. */
const char *vt_fmt_growth(uint64_t rise, uint64_t units, const char *unit, uint64_t span_ns,
                          uint64_t per_unit, uint64_t run_steps, char *buf, size_t size);

/* Appends ", held by `HOLDER`" to the text in buf (cut to size) when
 * holder is neither NULL nor "": what holds a growing site's memory, said
 * after its rate in every report. Returns buf. */
char *vt_fmt_held(const char *holder, char *buf, size_t size);

/* Appends "; figures of the history kept (events from 0.468 s; before
 * them, only its allocations still live)" to the text in buf (cut to
 * size) when history_from_ns is not 0: a growing site whose older events
 * the ring overwrote, said last in every report. Returns buf. */
char *vt_fmt_kept(uint64_t history_from_ns, char *buf, size_t size);

/* part as a percent of whole, with `decimals` digits after the point (0
 * or 1) and "%": rounded to the nearest, except that it never reads as all
 * of whole unless part is all of it (99.5% of the tracked memory is "99%",
 * not "100%"), nor as none of it unless part is 0 ("<0.1%" for 0.04%).
 * "0%" when whole is 0. Writes into buf and returns it. */
const char *vt_fmt_pct(uint64_t part, uint64_t whole, int decimals, char *buf, size_t size);

/* "3 calls passed through unrecorded (...)": the one sentence for a dump's
 * totals.missed, in the library's reports and the CLI's text alike. NULL
 * when missed is 0 (nothing is said then). Writes into buf. */
const char *vt_fmt_missed(uint64_t missed, char *buf, size_t size);

/* A time since the start in a table's column of 9 characters: "12.122s"
 * (milliseconds) up to 9999.999 s, then whole seconds ("259212s", three
 * days), then hours ("27778h"). Writes into buf and returns it. */
const char *vt_fmt_secs_cell(uint64_t ns, char *buf, size_t size);

/* How a signal ended the process, the one phrase for the library's exit
 * report and the CLI's: "ended by SIGTERM from pid 4242 (slurmstepd)",
 * "ended by SIGINT it sent itself" (from_pid == own_pid), "ended by
 * SIGTERM" (from_pid 0: the sender unknown). `from`: the sender's command
 * name, NULL or "" when unknown, already made safe to print by the caller.
 * Writes into buf and returns it. */
const char *vt_fmt_ended_by(const char *signal, long from_pid, long own_pid, const char *from, char *buf,
                            size_t size);

/* The heading of an out-of-memory failure's numbered findings, the
 * post-mortem's and `vramtrace report`'s. */
#define VT_FINDINGS_HEADING "what the numbers say, most likely first:"

/* The lines the library's post-mortem and the CLI's text report share,
 * each written by one function. `prefix` begins every line ("vramtrace: "
 * in the library, "" in the CLI); `put` writes a text taken from a dump or
 * a binary (the CLI passes one that makes control characters visible;
 * NULL: as it is).
 *
 * A finding: "PREFIX  N. FINDING" and "PREFIX     next: NEXT". */
void vt_put_finding(FILE *f, const char *prefix, int number, const char *finding, const char *next,
                    void (*put)(FILE *, const char *));

/* A growing call site: "PREFIX  SITE: FIRST -> END, RATE", the byte counts
 * for people, the site and the rate (vt_fmt_growth's text, or "over N
 * allocations" where there is no rate) as given. */
void vt_put_growth(FILE *f, const char *prefix, const char *site, uint64_t first_bytes, uint64_t end_bytes,
                   const char *rate);

/* One process of the list of others on a GPU: " pid N (NAME) USED", with
 * ", " before it unless it is the first, no "(NAME)" when name is NULL or
 * "", "?" for the bytes when used_known is 0. Writes into buf. */
const char *vt_fmt_proc(int first, int pid, const char *name, int used_known, uint64_t used_bytes,
                        char *buf, size_t size);

/* Write s as a JSON string literal (quotes included); NULL becomes null.
 * Control characters are escaped and a byte that is not UTF-8 becomes the
 * text \xNN, so any name taken from a binary yields valid JSON. */
void vt_json_string(FILE *f, const char *s);

/* A text that snprintf cut to fit size bytes ends at a whole UTF-8
 * character: a character the cut split is taken off, so that the text
 * stays valid UTF-8 for the JSON, HTML and pickle writers. Returns buf. */
const char *vt_utf8_whole(char *buf, size_t size);

/* A name of `max` bytes or more cut in place to max - 1, "..." its last
 * three, at a UTF-8 character's boundary (the one rule for a name too long,
 * the library's Python names and the CLI's names read from a dump alike).
 * Returns s. */
char *vt_clamp_name(char *s, size_t max);

/* src into buf of `size` bytes; where it does not fit, its start and its
 * end with "..." between, each cut at a UTF-8 character's boundary (a
 * call site's function and its file:line both kept). Returns buf. */
const char *vt_cut_middle(char *buf, size_t size, const char *src);

#endif
