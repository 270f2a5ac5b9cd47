/* line_edit.c - see line_edit.h. */
#include "line_edit.h"

#include <errno.h>
#include <histedit.h>
#include <langinfo.h>
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <wchar.h>

#include "base/utf8.h"

struct LineEdit {
    EditLine *el;
    HistoryW *history;
    int (*wait)(void);
    wchar_t prompt[16];
    unsigned char pending[4];  // bytes read and not yet a character
    size_t n_pending;
    int stop;                  // why getc gave no character: 0 the end of stdin, -2 a signal, -4 an error
};

static struct termios cooked;          // the terminal's modes at line_edit_open
static volatile sig_atomic_t have_cooked;

void line_edit_restore_terminal(void) {
    if (have_cooked) tcsetattr(STDIN_FILENO, TCSANOW, &cooked);
}

// libedit's read of one character (EL_GETCFN): 1, 0 at the end of stdin,
// -1 when the wait saw a signal or the read failed.
static int getc_utf8(EditLine *el, wchar_t *wc) {
    LineEdit *le = NULL;
    el_get(el, EL_CLIENTDATA, &le);
    for (;;) {
        if (le->n_pending) {
            int32_t cp;
            size_t len = utf8_decode(le->pending, le->n_pending, &cp);
            if (cp != UTF8_INCOMPLETE) {
                size_t used = cp >= 0 ? len : 1;  // an invalid byte alone: what follows may begin a character
                *wc = cp >= 0 ? (wchar_t)cp : (wchar_t)(0xDC00 + le->pending[0]);
                memmove(le->pending, le->pending + used, le->n_pending - used);
                le->n_pending -= used;
                return 1;
            }
        }
        if (le->wait() != 0) {
            le->stop = -2;
            errno = EINTR;
            return -1;
        }
        ssize_t got = read(STDIN_FILENO, le->pending + le->n_pending, 1);
        if (got < 0) {
            le->stop = errno == EINTR ? -2 : -4;
            return -1;
        }
        if (got == 0) {  // the terminal hung up: what is left, byte by byte
            if (!le->n_pending) return 0;
            *wc = (wchar_t)(0xDC00 + le->pending[0]);
            memmove(le->pending, le->pending + 1, --le->n_pending);
            return 1;
        }
        le->n_pending++;
    }
}

static wchar_t *prompt_of(EditLine *el) {
    LineEdit *le = NULL;
    el_get(el, EL_CLIENTDATA, &le);
    return le->prompt;
}

static int utf8_locale(const char *name) {
    return setlocale(LC_CTYPE, name) && !strcmp(nl_langinfo(CODESET), "UTF-8");
}

LineEdit *line_edit_open(const char *prompt, int (*wait)(void)) {
    const char *term = getenv("TERM");
    if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO) || !term || !*term || !strcmp(term, "dumb")) return NULL;
    if (!utf8_locale("") && !utf8_locale("C.UTF-8")) {
        setlocale(LC_CTYPE, "C");
        return NULL;
    }
    if (tcgetattr(STDIN_FILENO, &cooked) != 0) return NULL;
    have_cooked = 1;
    LineEdit *le = calloc(1, sizeof *le);
    if (!le) return NULL;
    le->wait = wait;
    mbstowcs(le->prompt, prompt, sizeof le->prompt / sizeof *le->prompt - 1);
    le->el = el_init("gpt", stdin, stderr, stderr);
    le->history = history_winit();
    if (!le->el || !le->history) {
        line_edit_close(le);
        return NULL;
    }
    HistEventW ev;
    history_w(le->history, &ev, H_SETSIZE, 1000);
    history_w(le->history, &ev, H_SETUNIQUE, 1);
    el_wset(le->el, EL_CLIENTDATA, le);
    el_wset(le->el, EL_EDITOR, L"emacs");
    el_wset(le->el, EL_PROMPT, prompt_of);
    el_wset(le->el, EL_HIST, history_w, le->history);
    el_wset(le->el, EL_GETCFN, getc_utf8);
    return le;
}

void line_edit_close(LineEdit *le) {
    if (!le) return;
    if (le->el) el_end(le->el);
    if (le->history) history_wend(le->history);
    free(le);
}

// cp as UTF-8 into b (4 bytes): its length; U+DC80 + byte is that byte.
static size_t utf8_encode(uint32_t cp, unsigned char *b) {
    if (cp >= 0xDC80 && cp <= 0xDCFF) return b[0] = (unsigned char)(cp - 0xDC00), 1;
    if (cp < 0x80) return b[0] = (unsigned char)cp, 1;
    if (cp < 0x800) return b[0] = (unsigned char)(0xC0 | cp >> 6), b[1] = (unsigned char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | cp >> 12);
        b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | cp >> 18);
    b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    b[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

long line_edit_read(LineEdit *le, char *line, size_t max) {
    int n = 0;
    le->stop = 0;
    const wchar_t *w = el_wgets(le->el, &n);
    if (!w) return le->stop ? le->stop : -1;
    if (n && w[n - 1] == L'\n') n--;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        unsigned char b[4];
        size_t k = utf8_encode((uint32_t)w[i], b);
        if (len + k > max) return -3;
        memcpy(line + len, b, k);
        len += k;
    }
    line[len] = '\0';
    if (n) {
        wchar_t *entry = wcsdup(w);
        HistEventW ev;
        if (entry) {
            entry[n] = L'\0';
            history_w(le->history, &ev, H_ENTER, entry);
            free(entry);
        }
    }
    return (long)len;
}
