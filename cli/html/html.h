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

#include <stdio.h>

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

#endif
