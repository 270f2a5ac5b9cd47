/* clock.h - wall time for the speed figures. Header-only. */
#ifndef GPT_CLOCK_H
#define GPT_CLOCK_H

#include <time.h>

// Seconds on the monotonic clock: only differences mean anything.
static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
