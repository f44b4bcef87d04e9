/* forecast_text.h -- the dump's forecast (report/forecast.c, the live
 * publisher's line) in vramtrace report's text. */
#ifndef VR_FORECAST_TEXT_H
#define VR_FORECAST_TEXT_H

#include <stdio.h>

#include "model.h"

/* "forecast: LINE" when the dump has a forecast (made printable); nothing
 * when it has none. */
void vr_text_forecast(FILE *f, const struct vm_dump *d);

#endif
