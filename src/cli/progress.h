/*
 * progress.h - one line of progress on stderr for long work (--batch over
 * many lines, --score of a long text, gpt convert of a large model),
 * redrawn in place after a carriage return, and cleared when the work ends,
 * so that the terminal is left as it would be without it.
 *
 * It is drawn only when stderr is a terminal, or when the caller forces it
 * (--progress: for a log, or a test reading it through a pipe); never into
 * a file or a pipe otherwise. It is redrawn at most every
 * PROGRESS_INTERVAL seconds, however often it is updated. The caller owns
 * the Progress; nothing is global.
 *
 *     Progress p;
 *     progress_init(&p, o->progress);
 *     for (...) progress_update(&p, "gpt: %zu/%zu lines", done, total);
 *     progress_clear(&p);
 */
#ifndef GPT_PROGRESS_H
#define GPT_PROGRESS_H

#include <stddef.h>

#define PROGRESS_INTERVAL 0.1  // seconds between two drawings of the line

typedef struct {
    int on;          // drawing at all: stderr is a terminal, or forced
    double start;    // when the work started (progress_init)
    double drawn_at; // when the line was last drawn; 0: not since it was cleared
    size_t shown;    // characters of the line on the screen now; 0: none
    size_t columns;  // the terminal's width (the line is cut to fit); 0: no limit
} Progress;

// Starts the clock; the line is drawn if `forced` or stderr is a terminal.
void progress_init(Progress *p, int forced);
// Redraws the line with the text fmt makes (one line, plain ASCII), unless
// it was drawn less than PROGRESS_INTERVAL ago.
void progress_update(Progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Removes the line (spaces over it, the cursor back at its start): before
// anything else is written to the terminal, and at the end. The next
// update draws it again. Idempotent.
void progress_clear(Progress *p);
// Seconds since progress_init.
double progress_elapsed(const Progress *p);
// ", M:SS left" (", H:MM:SS left") into buf, from the fraction of the work
// done so far and the time it took; "" while that fraction says nothing
// (0, or 1 and over). Returns buf.
const char *progress_eta(const Progress *p, double fraction_done, char *buf, size_t cap);

#endif
