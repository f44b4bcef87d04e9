/* options_md.c -- the README's options table, printed from the one table. */
#include <stdio.h>

#include "../common/options.h"
#include "cli.h"

/* Every VRAMTRACE_* row of common/options.def, in its order, as the
 * README's markdown table shows it: the heading, then one line per option
 * with its name and default in backticks ("none" where the table has no
 * default) and its meaning as --help gives it. README.md's table is this
 * output, verbatim (a test compares them). */
void vt_options_markdown(FILE *f) {
    fputs("| variable | default | meaning |\n|---|---|---|\n", f);
    for (int i = 0; i < VT_O_COUNT; i++) {
        const struct vt_option_desc *d = &vt_option_table[i];
        if (d->type == VT_OPT_FOREIGN) continue;
        if (d->def[0] == '(')
            fprintf(f, "| `%s` | none | %s |\n", d->name, d->meaning);
        else
            fprintf(f, "| `%s` | `%s` | %s |\n", d->name, d->def, d->meaning);
    }
}
