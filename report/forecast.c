/* forecast.c -- sustained growth and the time to fill a device
 * (forecast.h). */
#include <string.h>

#include "forecast.h"

#define VT_STEP_RISES_MAX 256

void vt_forecast_init(struct vt_forecast *f, long horizon_s) {
    memset(f, 0, sizeof *f);
    f->horizon_ns = (uint64_t)horizon_s * 1000000000ull;
    f->window_ns = f->horizon_ns / 30;
    if (f->window_ns < 1000000000ull) f->window_ns = 1000000000ull;
}

/* The rate over the completed windows, when the floor rose in each: the
 * median window's rise, so that a load in one window (a model read in
 * before a slow leak) is not taken for the leak's rate (it made a leak of
 * 1 MiB a minute fill a device "in 5 seconds"). */
static int64_t sustained(const struct vt_forecast *f) {
    if (f->nfloors < VT_FORECAST_RISES + 1) return 0;
    uint64_t rise[VT_FORECAST_RISES];
    for (int i = 1; i <= VT_FORECAST_RISES; i++) {
        if (f->floors[i] <= f->floors[i - 1]) return 0;
        uint64_t r = f->floors[i] - f->floors[i - 1];
        int j = i - 1;
        for (; j > 0 && rise[j - 1] > r; j--) rise[j] = rise[j - 1];
        rise[j] = r;
    }
    double per_ns = (double)rise[VT_FORECAST_RISES / 2] / (double)f->window_ns;
    return (int64_t)(per_ns * 60e9);
}

int vt_forecast_sample(struct vt_forecast *f, uint64_t now_ns, uint64_t live, uint64_t capacity) {
    int done = 0;
    if (!f->in_window) {
        f->in_window = 1;
        f->win_start = now_ns;
        f->win_floor = live;
    } else if (now_ns - f->win_start >= f->window_ns) {
        if (f->nfloors == VT_FORECAST_RISES + 1) {
            memmove(f->floors, f->floors + 1, VT_FORECAST_RISES * sizeof *f->floors);
            f->nfloors--;
        }
        f->floors[f->nfloors++] = f->win_floor;
        f->growth_per_min = sustained(f);
        f->win_start = now_ns;
        f->win_floor = live;
        done = 1;
    } else if (live < f->win_floor) {
        f->win_floor = live;
    }
    f->full = 0;
    f->full_in_ns = 0;
    if (f->growth_per_min > 0 && capacity > 0 && f->horizon_ns > 0) {
        double ns = live >= capacity ? 0 : (double)(capacity - live) / (double)f->growth_per_min * 60e9;
        if (ns <= (double)f->horizon_ns) {
            f->full = 1;
            f->full_in_ns = (uint64_t)ns;
        }
    }
    return done;
}

/* Where growth over live_at[0..n) is sustained: the newest stretch in
 * which the live bytes never fell, from the boundary before its first
 * rise, holding at least VT_FORECAST_RISES rises, the last of them no longer ago (in boundaries) than twice the
 * stretch's boundaries per rise, and above the peak of every earlier
 * stretch of as many rises. A leak that a caching allocator absorbs
 * into its segments rises every few steps, not at each; a loop whose
 * steps end where they began never rises; a warm-up's rises stop; a
 * cycle that returns to its floor (a buffer emptied every N steps) rises
 * again only to where it was before. Returns the stretch's first index,
 * or -1; *last_rise the index of its last rise. */
static int sustained_from(const uint64_t *live_at, int n, int *last_rise) {
    int first = n - 1, rises = 0;
    *last_rise = -1;
    while (first > 0 && live_at[first - 1] <= live_at[first]) {
        if (live_at[first - 1] < live_at[first]) {
            rises++;
            if (*last_rise < 0) *last_rise = first;
        }
        first--;
    }
    if (rises < VT_FORECAST_RISES) return -1;
    /* An earlier stretch of as many rises reached as much before it fell:
     * a bounded cycle, not growth (a sawtooth of 9 rises in 10 steps was
     * told "full in 56 steps" in every cycle). A fall from a level that no
     * such stretch reached (a cache emptied once, a load let go) is not a
     * cycle: the growth after it counts from the fall. */
    for (int i = 1, run = 0; i < first; i++) {
        if (live_at[i] < live_at[i - 1]) run = 0;
        else if (live_at[i] > live_at[i - 1]) run++;
        if (run >= VT_FORECAST_RISES && live_at[i] >= live_at[n - 1]) return -1;
    }
    /* From the boundary before its first rise: a flat stretch before a
     * leak began would dilute its rate. */
    while (first < n - 1 && live_at[first + 1] == live_at[first]) first++;
    int span = n - 1 - first, since = n - 1 - *last_rise;
    if ((int64_t)since * rises > 2 * (int64_t)span) return -1;
    return first;
}

/* The growth over live_at[0..n), which never falls: its rises, each load
 * among them (a rise more than VT_FORECAST_LOAD times the median rise)
 * counted as the median rise, its step's own growth. One large allocation early in a run (a buffer, optimizer state
 * made at the first step) set the rate: a leak of 64 KiB a step read as
 * 100 MiB a step, and the device full "in 3 steps". */
static uint64_t growth_of(const uint64_t *live_at, int n, uint64_t *median_rise) {
    uint64_t rise[VT_STEP_RISES_MAX];
    int m = 0;
    for (int i = 1; i < n && m < VT_STEP_RISES_MAX; i++) {
        if (live_at[i] == live_at[i - 1]) continue;
        uint64_t r = live_at[i] - live_at[i - 1];
        int j = m++;
        for (; j > 0 && rise[j - 1] > r; j--) rise[j] = rise[j - 1];
        rise[j] = r;
    }
    if (m == 0) return 0;
    uint64_t median = rise[m / 2], sum = 0;
    *median_rise = median;
    for (int i = 0; i < m; i++)
        sum += rise[i] <= median * VT_FORECAST_LOAD ? rise[i] : median;
    return sum;
}

void vt_forecast_steps(struct vt_step_forecast *out, const uint64_t *step, const uint64_t *time_ns,
                       const uint64_t *live_at, int n, uint64_t live, uint64_t capacity, uint64_t horizon_ns) {
    memset(out, 0, sizeof *out);
    int last = -1, first = sustained_from(live_at, n, &last);
    if (first < 0) return;
    /* The rate is the rises after the first over the steps from the first
     * rise to the last: one whole period of growth per rise, whether it
     * rises at every step or every few, and steps after the last rise (a
     * warm-up's growth stopped) do not dilute it to a rate the program
     * never had (+13.09 MiB a step for +16 while the forecast still held,
     * and that figure kept in the dump). */
    int rise1 = first + 1;
    uint64_t steps = step[last] - step[rise1];
    if (steps == 0) return;
    out->growth_per_step = (int64_t)(growth_of(live_at + rise1, last - rise1 + 1, &out->median_rise) / steps);
    out->from_step = step[first];
    if (out->growth_per_step <= 0 || capacity == 0 || horizon_ns == 0) return;
    uint64_t g = (uint64_t)out->growth_per_step;
    uint64_t left = live >= capacity ? 0 : (capacity - live + g - 1) / g;
    double per_step = (double)(time_ns[n - 1] - time_ns[first]) / (double)(step[n - 1] - step[first]);
    double ns = (double)left * per_step;
    if (ns > (double)horizon_ns) return;
    out->full = 1;
    out->full_in_steps = left;
    out->full_in_ns = (uint64_t)ns;
}
