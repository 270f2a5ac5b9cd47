/*
 * line_edit.h - gpt chat's lines on a terminal, edited with libedit: the
 * arrow keys move in the line and through the lines typed before it in the
 * session (a history kept in memory only), and libedit draws the prompt.
 *
 * Its reads are the caller's wait (a function that returns 0 when stdin
 * can be read without waiting, nonzero when a signal came first) and then
 * one byte: so a Ctrl-C at the prompt is met as without line editing. The
 * bytes are decoded from UTF-8 whatever the locale; a byte that no valid
 * character holds is carried as U+DC80 + byte (Python's "surrogateescape")
 * and given back as that byte: the line read is the bytes typed.
 *
 * A separate file: libedit's histedit.h has a type named Tokenizer too.
 */
#ifndef GPT_LINE_EDIT_H
#define GPT_LINE_EDIT_H

#include <stddef.h>

typedef struct LineEdit LineEdit;

// Line editing on stdin, the prompt on stderr, when both are terminals,
// TERM names one that is not "dumb" and the locale's characters can be
// UTF-8 (the user's locale, else C.UTF-8: libedit shows and inserts what
// the locale says is printable; LC_CTYPE is set so). NULL otherwise: the
// terminal's own line discipline edits the lines.
LineEdit *line_edit_open(const char *prompt, int (*wait)(void));
void line_edit_close(LineEdit *le);
// The terminal's modes as line_edit_open found them (libedit's are raw
// while a line is read), for a signal that ends the process then:
// async-signal-safe; nothing before line_edit_open.
void line_edit_restore_terminal(void);

// One line into line (without its newline, NUL-terminated, at most max
// bytes): its length; -1 at the end of stdin (Ctrl-D on an empty line), -2
// when the wait saw a signal, -3 when the line is longer than max, -4 on a
// read error (errno set).
long line_edit_read(LineEdit *le, char *line, size_t max);

#endif
