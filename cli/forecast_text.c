/* forecast_text.c -- the dump's forecast in vramtrace report's text
 * (forecast_text.h). The line is the library's, made once where the
 * forecast was made; it is printed as it is, never recomputed here. */
#include <jansson.h>

#include "forecast_text.h"
#include "reporters.h"

void vr_text_forecast(FILE *f, const struct vm_dump *d) {
    const char *line = d->json ? json_string_value(json_object_get((const json_t *)d->json, "forecast")) : NULL;
    if (!line || !line[0]) return;
    fputs("forecast: ", f);
    vr_put_safe(f, line);
    fputc('\n', f);
}
