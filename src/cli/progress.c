/* progress.c - see progress.h. */
#define _DEFAULT_SOURCE  // TIOCGWINSZ
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/clock.h"

void progress_init(Progress *p, int forced) {
    memset(p, 0, sizeof *p);
    int terminal = isatty(STDERR_FILENO);
    p->on = forced || terminal;
    p->start = now_seconds();
    struct winsize ws;
    if (terminal && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) p->columns = ws.ws_col;
}

// One write for the whole line, so that nothing else lands inside it; a
// failed write to stderr is nothing to report (and nowhere to report it).
static void write_stderr(const char *s, size_t n) {
    while (n) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

void progress_update(Progress *p, const char *fmt, ...) {
    if (!p->on) return;
    double now = now_seconds();
    if (p->drawn_at > 0 && now - p->drawn_at < PROGRESS_INTERVAL) return;
    p->drawn_at = now;
    char line[512];
    line[0] = '\r';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + 1, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
    // On a terminal the line must fit it (a wrapped line cannot be redrawn
    // from its start); spaces cover what is left of a longer previous one.
    if (p->columns && len > p->columns - 1) len = p->columns - 1;
    size_t cover = len;
    while (cover < p->shown && cover + 1 < sizeof line - 1) line[1 + cover++] = ' ';
    write_stderr(line, 1 + cover);
    p->shown = len;
}

void progress_clear(Progress *p) {
    if (!p->on || !p->shown) return;
    char spaces[512];
    size_t n = p->shown < sizeof spaces - 2 ? p->shown : sizeof spaces - 2;
    spaces[0] = '\r';
    memset(spaces + 1, ' ', n);
    spaces[n + 1] = '\r';
    write_stderr(spaces, n + 2);
    p->shown = 0;
    p->drawn_at = 0;
}

double progress_elapsed(const Progress *p) { return now_seconds() - p->start; }

const char *progress_eta(const Progress *p, double fraction_done, char *buf, size_t cap) {
    buf[0] = '\0';
    if (!(fraction_done > 0 && fraction_done < 1)) return buf;
    double left = progress_elapsed(p) * (1 - fraction_done) / fraction_done;
    if (left > 359999) left = 359999;  // 99:59:59
    unsigned s = (unsigned)(left + 0.5);
    if (s >= 3600) snprintf(buf, cap, ", %u:%02u:%02u left", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, cap, ", %u:%02u left", s / 60, s % 60);
    return buf;
}
