/* forecast.h -- sustained growth of a device's live bytes, and when it
 * fills the device at that rate.
 *
 * Time is cut into windows of horizon/30 (at least a second); a window's
 * figure is its floor, the least live bytes sampled in it. Growth is
 * sustained when the floor rose in each of the last VT_FORECAST_RISES
 * windows: a loop that allocates and frees the same bytes never rises
 * (its floor stays), and a loading phase that stops before that many
 * windows is not growth. The rate is the floor's rise over those windows;
 * the forecast is the time until live bytes reach the capacity at that
 * rate, kept when it is within the horizon. One state per device, fed
 * from the live publisher (report/live.c), a few samples a second. */
#ifndef VT_FORECAST_H
#define VT_FORECAST_H

#include <stdint.h>

#define VT_FORECAST_RISES 5
/* Per step, a rise more than this many times the median rise is a load,
 * not the growth's rate. */
#define VT_FORECAST_LOAD 8

struct vt_forecast {
    uint64_t horizon_ns, window_ns;
    uint64_t win_start, win_floor;   /* the window being sampled */
    int in_window;
    uint64_t floors[VT_FORECAST_RISES + 1]; /* completed windows, oldest first */
    int nfloors;
    int64_t growth_per_min;  /* bytes a minute while sustained, else 0 */
    int full;                /* a forecast is held */
    uint64_t full_in_ns;     /* from the last sample */
};

/* A state for a horizon of `horizon_s` seconds (0: growth is measured,
 * nothing is forecast). */
void vt_forecast_init(struct vt_forecast *f, long horizon_s);

/* One sample at now_ns (monotonic): live bytes, and the capacity they
 * fill (0 when unknown: no forecast). Returns 1 when this sample
 * completed a window (growth_per_min may have changed). */
int vt_forecast_sample(struct vt_forecast *f, uint64_t now_ns, uint64_t live, uint64_t capacity);

/* Growth per step, where the program has steps (tracker/steps.h): from
 * the newest n step boundaries, oldest first (step numbers, times in
 * nanoseconds, a device's live bytes at each). Sustained over the newest
 * stretch in which the live bytes never fell, when it holds at least
 * VT_FORECAST_RISES rises, the last is recent (no longer ago than twice
 * the stretch's boundaries per rise) and the device holds more than any
 * earlier stretch of as many rises reached before it fell: the stretch's rises after its first
 * over the steps from its first rise to its last, each load among them (a
 * rise more than VT_FORECAST_LOAD times the median rise) counted as the
 * median rise: a buffer made once at step 3 is not the leak's rate.
 * A leak a caching allocator absorbs into its segments rises every few
 * steps; a loop whose steps end where they began never rises; a model
 * that loads before its first step, a warm-up whose rises stop, or a
 * cycle that returns to its floor, is not growth.
 * The forecast: the steps until `live` (now) reaches the capacity at that
 * rate, kept when those steps, at the boundaries' time per step, fall
 * within the horizon. */
struct vt_step_forecast {
    int64_t growth_per_step;  /* bytes a step while sustained, else 0 */
    int full;                 /* a forecast is held */
    uint64_t full_in_steps;   /* steps from the newest boundary */
    uint64_t full_in_ns;      /* the same at the time per step */
    uint64_t from_step;       /* the stretch's first boundary (its step number) while sustained */
    uint64_t median_rise;     /* the stretch's median rise between boundaries while sustained */
};
void vt_forecast_steps(struct vt_step_forecast *out, const uint64_t *step, const uint64_t *time_ns,
                       const uint64_t *live_at, int n, uint64_t live, uint64_t capacity, uint64_t horizon_ns);

#endif
