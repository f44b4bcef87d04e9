/* html.h -- the pieces of the HTML page that cli/fmt_html.c puts together.
 *
 * The page is one file: its style and script are cli/html/page.css and the
 * cli/html/ script files, embedded into the binary at build time
 * (cli/html/assets.S); the data of each dump is one JSON block that the
 * script reads (cli/html/data.c). Every string from a dump reaches the
 * page either as HTML text through vh_text or inside that JSON through
 * vh_json_string, in its display form (no control characters) and with
 * <, > and & escaped, and the script only ever sets textContent. */
#ifndef VT_HTML_H
#define VT_HTML_H

#include <stdint.h>
#include <stdio.h>

#include "../refset.h"
#include "../reporters.h"

/* The page's style and script, NUL-terminated (build/html/page.css and
 * build/html/page.js as the build made them). */
extern const char vt_html_style[];
extern const char vt_html_script[];

/* s as HTML text or a quoted attribute value: markup characters as
 * entities, control characters in their display form. NULL writes "". */
void vh_text(FILE *f, const char *s);

/* s as a JSON string literal that may stand inside a <script> block: its
 * display form, with ", \, <, > and & escaped. NULL writes "". */
void vh_json_string(FILE *f, const char *s);

/* The data block of dump `index`: <script type="application/json"
 * id="vt-data-INDEX">, with its frames, stacks (as a tree of frames),
 * timeline series and events per device, holders at exit, at the peak and
 * at each OOM, and live allocations. `series` is how many call sites the
 * timeline draws apart (the rest is one "other" series). */
void vh_data(FILE *f, const struct vm_dump *d, size_t index, const struct vr_opts *o, int series);

/* An array of integers being packed (cli/html/pack.c): kind 'u' unsigned,
 * 's' signed, 'd' signed differences from the previous value. */
struct vh_pack {
    uint8_t *bytes;
    size_t n, cap;
    int64_t last;
    char kind;
    int failed;
};

void vh_pack_init(struct vh_pack *p, char kind);
void vh_pack(struct vh_pack *p, int64_t v);

/* ",\"NAME\":" (nothing when name is NULL) and the packed array as one
 * JSON string: its kind letter and the base64 of its varints; empty (and
 * 'u') when memory ran out while packing. Frees the buffer and starts p
 * again, of the same kind. */
void vh_pack_write(FILE *f, const char *name, struct vh_pack *p);

/* The same, p kept as it is. */
void vh_pack_print(FILE *f, const char *name, const struct vh_pack *p);

struct vt_labels;

/* The longest name of the names table, with its NUL. */
#define VH_NAME_MAX 1024

/* The names of one data block (frames, call sites' parts) as entries of a
 * table: each entry is (head, rest, line) over one table of strings, read
 * head + (rest ? " " + rest : "") + (line ? ":" + line : ""), so that a
 * file or function shared by many frames is written once. The table keeps
 * no copy of a name or a string (refset.h): each entry keeps the number
 * its name is remade from by the caller's name_of, each string the entry
 * it is a piece of. */
struct vh_names {
    struct vr_refset strings, whole; /* whole: by each name, the first entry that reads so */
    uint64_t *src;           /* per entry: what name_of remakes its name from */
    uint64_t *triples;
    size_t n, cap;
    vr_remake_fn *name_of;
    void *ctx;
};

/* An empty table whose names name_of remakes (at most VH_NAME_MAX - 1
 * bytes each). */
void vh_names_init(struct vh_names *t, vr_remake_fn *name_of, void *ctx);

/* The entry of name, which name_of remakes from src: a new one when
 * `fresh` (entries 0..n-1 stay the frames even where two frames read
 * alike), else the first entry that reads the same, or a new one; -1 when
 * memory ran out. */
long vh_names_add(struct vh_names *t, const char *name, int fresh, uint64_t src);

/* ",\"strs\":[...],\"names\":PACKED": the strings and each entry's three
 * numbers (head, rest + 1 or 0, line or 0). */
void vh_names_write(FILE *f, struct vh_names *t);
void vh_names_free(struct vh_names *t);

struct vm_torch;

/* PyTorch's figures per device of one "torch" record (the dump's or an
 * OOM's) as a table under an <h4> saying `title`; nothing when t is NULL
 * (cli/html/torch.c). */
void vh_torch_table(FILE *f, const struct vm_torch *t, const char *title);

/* ",\"NAME\":" and record t as the data block holds it: per device its
 * figures, categories and tensors; null when t is NULL. */
void vh_torch_data(FILE *f, const char *name, const struct vm_torch *t);

/* Per stack the one device the history and the live allocations show it
 * on, -1 for several, -2 for none; malloc'd (cli/html/bydevice.c). */
int *vh_stack_devices(const struct vm_dump *d);

/* How many events came before each OOM (an array of d->nooms, malloc'd,
 * NULL when out of memory), or before the peak (the events up to
 * totals.peak_time_ns); SIZE_MAX when the history cannot tell (some event
 * was overwritten, or the OOM has no event of the same time). */
size_t *vh_events_before_ooms(const struct vm_dump *d);
size_t vh_events_before_peak(const struct vm_dump *d);

/* The history replayed for the stacks seen on several devices: per such
 * stack (row) and device, its bytes and count after the first `at` events;
 * bad[row] where one of its events fell outside the listed devices. Asked
 * for moments in any order, it goes on from where it is when the next is
 * later: the OOMs in turn cost one pass over the history in all. */
struct vh_replay {
    const struct vm_dump *d;
    size_t *row;     /* per stack: its row, SIZE_MAX for a stack on one device or none */
    size_t rows, at;
    int64_t *bytes, *counts; /* rows x ndevices */
    char *bad;
};
/* For the stacks dev (vh_stack_devices) marks as several; with dev NULL an
 * empty replay. 0, or -1 when out of memory (then free it, and pass dev as
 * NULL to vh_holders_by_device). */
int vh_replay_init(struct vh_replay *r, const struct vm_dump *d, const int *dev);
void vh_replay_free(struct vh_replay *r);

/* Holders h split by device, as ",\"NAME_dev\":[...],\"NAME_split\":[...]":
 * per holder its device (dev from vh_stack_devices: a stack seen on one
 * device), -2 for a stack on several split by replaying the first `upto`
 * events (r) where that gives back its bytes and count exactly, else -1
 * (not known); then per split holder and device (holder index, device,
 * bytes, count). Both null when !have. */
void vh_holders_by_device(FILE *f, const char *name, struct vh_replay *r, const int *dev, const struct vm_holder *h,
                          size_t n, int have, size_t upto);

#endif
