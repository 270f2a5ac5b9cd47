/*
 * fuzz_common.h - what the libFuzzer harnesses of tests/fuzz/ share: a
 * private temporary directory made once per process (the loaders take
 * paths), writing an input into it, and the checks that a loaded model and
 * its inspect listing hold nothing outside the file.
 *
 * A harness that finds a property broken calls fuzz_fail(), which aborts:
 * libFuzzer saves the input as a crash like any sanitizer report.
 */
#ifndef GPT_FUZZ_COMMON_H
#define GPT_FUZZ_COMMON_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/loader.h"
#include "model/model.h"
#include "model/tokenizer.h"

// libFuzzer's entry points.
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

__attribute__((noreturn, format(printf, 1, 2))) static inline void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

static char fuzz_dir_path[512];

// Removes the directory's files and the directory (at exit).
static inline void fuzz_cleanup(void) {
    if (!fuzz_dir_path[0]) return;
    DIR *d = opendir(fuzz_dir_path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(fuzz_dir_path);
    fuzz_dir_path[0] = '\0';
}

// The process's private directory: $TMPDIR (else /tmp)/gpt-fuzz-XXXXXX.
static inline const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp) tmp = "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/gpt-fuzz-XXXXXX", tmp);
        if (!mkdtemp(fuzz_dir_path)) fuzz_fail("mkdtemp %s: %s", fuzz_dir_path, strerror(errno));
        atexit(fuzz_cleanup);
    }
    return fuzz_dir_path;
}

// The path of `name` in the private directory, in buf.
static inline const char *fuzz_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", fuzz_dir(), name);
    return buf;
}

// Writes bytes to the file `name` in the private directory (replacing it);
// returns its path in buf.
static inline const char *fuzz_write(char *buf, size_t n, const char *name, const void *data, size_t len) {
    fuzz_path(buf, n, name);
    int fd = open(buf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) fuzz_fail("%s: %s", buf, strerror(errno));
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w <= 0) fuzz_fail("%s: write: %s", buf, strerror(errno));
        p += w;
        len -= (size_t)w;
    }
    if (close(fd) != 0) fuzz_fail("%s: close: %s", buf, strerror(errno));
    return buf;
}

// Writes a safetensors file `name` from st[0..n) (returns its path in buf).
// An 8-byte length of all 0xFF bytes is filled in: the JSON header runs to
// the first NUL byte, which is dropped, and is padded with spaces to a
// multiple of 8 bytes (as writers do), so that mutations that grow or
// shrink the JSON still meet a matching length.
static inline const char *fuzz_write_safetensors(char *buf, size_t buf_n, const char *name, const uint8_t *st,
                                                 size_t n) {
    static const uint8_t AUTO[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    const uint8_t *nul = n >= 8 && !memcmp(st, AUTO, 8) ? memchr(st + 8, 0, n - 8) : NULL;
    if (!nul) return fuzz_write(buf, buf_n, name, st, n);
    size_t json = (size_t)(nul - st) - 8, hlen = (json + 7) / 8 * 8, rest = n - (size_t)(nul + 1 - st);
    uint8_t *out = malloc(8 + hlen + rest);
    if (!out) fuzz_fail("out of memory");
    for (int k = 0; k < 8; k++) out[k] = (uint8_t)((uint64_t)hlen >> (8 * k));
    memcpy(out + 8, st + 8, json);
    memset(out + 8 + json, ' ', hlen - json);
    memcpy(out + 8 + hlen, nul + 1, rest);
    fuzz_write(buf, buf_n, name, out, 8 + hlen + rest);
    free(out);
    return buf;
}

// The first occurrence of needle in hay, or NULL.
static inline const uint8_t *fuzz_find(const uint8_t *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; k <= n && i <= n - k; i++)
        if (!memcmp(hay + i, needle, k)) return hay + i;
    return NULL;
}

// A tokenizer's round trip on a short fixed text and the input's first
// bytes: decode(encode(text)) must give the text back, with and without
// special tokens, and every token's bytes must be readable.
static inline void fuzz_check_tokenizer(Tokenizer *tok, const uint8_t *extra, size_t n_extra) {
    size_t V = tokenizer_vocab_size(tok);
    volatile unsigned sink = 0;
    for (size_t id = 0; id < V; id++) {
        size_t len;
        const unsigned char *b = tokenizer_token_bytes(tok, (int32_t)id, &len);
        if (!b) fuzz_fail("token %zu of %zu has no bytes", id, V);
        for (size_t k = 0; k < len; k++) sink += b[k];
        if (!tokenizer_token_string(tok, (int32_t)id)) fuzz_fail("token %zu has no string", id);
    }
    for (size_t r = 0; r < tokenizer_n_merges(tok); r++) {
        int32_t a, b;
        tokenizer_merge_pair(tok, r, &a, &b);
        if (a < 0 || b < 0 || (size_t)a >= V || (size_t)b >= V) fuzz_fail("merge %zu is (%d, %d)", r, a, b);
    }
    static const char fixed[] = "Hello, world! It's 2024 <|endoftext|> \xC3\xA9t\xC3\xA9  \n\n\xFF";
    char text[sizeof fixed + 64];
    size_t n = sizeof fixed - 1;
    memcpy(text, fixed, n);
    if (n_extra > 64) n_extra = 64;
    if (n_extra) memcpy(text + n, extra, n_extra);
    n += n_extra;
    for (int special = 0; special < 2; special++) {
        GptError err;
        int32_t *ids;
        size_t n_ids;
        if (tokenizer_encode(tok, text, n, special, &ids, &n_ids, &err) != 0) fuzz_fail("encode: %s", err.msg);
        char *out;
        size_t out_len;
        if (tokenizer_decode(tok, ids, n_ids, &out, &out_len, &err) != 0) fuzz_fail("decode: %s", err.msg);
        if (out_len != n || memcmp(out, text, n) != 0)
            fuzz_fail("round trip of %zu bytes gave %zu bytes back (special %d)", n, out_len, special);
        free(out);
        free(ids);
    }
    (void)sink;
}

// Reads every byte of every weight of a loaded model (so that AddressSanitizer
// sees any tensor that reaches past the file's copy or its own block), and
// checks the stored tokenizer, if any.
static inline void fuzz_check_model(Model *m, const uint8_t *data, size_t size) {
    volatile unsigned sink = 0;
    for (size_t i = 0; i < gpt2_n_tensors(&m->config); i++) {
        TensorRef t = model_tensor(m, i);
        size_t nb = model_tensor_bytes(m, i);
        if (!t.data) fuzz_fail("tensor %zu has no data", i);
        const unsigned char *p = t.data;
        unsigned s = 0;
        for (size_t k = 0; k < nb; k++) s += p[k];
        sink += s;
    }
    if (m->tokenizer) {
        if (tokenizer_vocab_size(m->tokenizer) != (size_t)m->config.vocab_size)
            fuzz_fail("stored tokenizer has %zu tokens, the model %d", tokenizer_vocab_size(m->tokenizer),
                      m->config.vocab_size);
        fuzz_check_tokenizer(m->tokenizer, data, size < 16 ? size : 16);
    }
    (void)sink;
}

// model_inspect: every listed tensor must lie inside the file.
static inline void fuzz_check_inspect(const char *path) {
    ModelInfo info;
    GptError err;
    if (model_inspect(path, &info, &err) != 0) fuzz_fail("inspect failed after a load succeeded: %s", err.msg);
    for (size_t i = 0; i < info.n_tensors; i++) {
        const TensorInfo *t = &info.tensors[i];
        if (t->offset > info.file_bytes || t->nbytes > info.file_bytes - t->offset)
            fuzz_fail("inspect: tensor %s at [%llu, +%llu) is outside the file of %llu bytes", t->name,
                      (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                      (unsigned long long)info.file_bytes);
    }
    model_info_free(&info);
}

// Does a matrix of the loaded model hold a NaN or an infinity (for Q8 and
// Q4: a scale that is one)?
static inline int fuzz_nonfinite_matrix(const Model *m) {
    for (size_t i = 0; i < gpt2_n_tensors(&m->config); i++) {
        TensorSpec s;
        gpt2_tensor_spec(&m->config, i, &s);
        if (s.kind == TENSOR_VECTOR) continue;
        TensorRef t = model_tensor(m, i);
        size_t n_in = s.kind == TENSOR_MATRIX ? s.dims[0] : s.dims[1];
        size_t n_out = s.kind == TENSOR_MATRIX ? s.dims[1] : s.dims[0];
        const unsigned char *p = t.data;
        size_t n = n_in * n_out;
        if (dtype_is_blocked(t.dtype)) {
            Weight w = weight_view(t.dtype, t.data, n_out, n_in);
            p = (const unsigned char *)w.scales;
            n = n_out * (q8_row_quants(n_in) / Q8_BLOCK);
        }
        for (size_t k = 0; k < n; k++) {
            uint32_t u;
            if (t.dtype == DTYPE_F32) {
                memcpy(&u, p + 4 * k, 4);
                if ((u & 0x7F800000u) == 0x7F800000u) return 1;
            } else {
                u = (uint32_t)(p[2 * k] | p[2 * k + 1] << 8);
                if (t.dtype == DTYPE_BF16 ? (u & 0x7F80u) == 0x7F80u : (u & 0x7C00u) == 0x7C00u) return 1;
            }
        }
    }
    return 0;
}

// GPT_FUZZ_VERBOSE=1 in the environment prints why each load failed (to
// check that the seeds load).
static inline int fuzz_verbose(void) {
    static int v = -1;
    if (v < 0) v = getenv("GPT_FUZZ_VERBOSE") && *getenv("GPT_FUZZ_VERBOSE") == '1';
    return v;
}

// A load as stored; if that works, the checks above, inspect, and a second
// load with the matrices converted to a dtype chosen by the input's bytes,
// which must work too unless Q8 or Q4 meets a weight it cannot hold.
static inline void fuzz_load_model(const char *path, const uint8_t *data, size_t size) {
    Model m;
    GptError err = {{0}};
    if (model_load(&m, path, &err) != 0) {
        if (!err.msg[0]) fuzz_fail("model_load failed without a message");
        if (fuzz_verbose()) fprintf(stderr, "load: %s\n", err.msg);
        model_free(&m);
        return;
    }
    if (fuzz_verbose()) fprintf(stderr, "load: ok, %s\n", m.source_kind);
    fuzz_check_model(&m, data, size);
    int nonfinite = fuzz_nonfinite_matrix(&m);
    model_free(&m);
    fuzz_check_inspect(path);
    unsigned sum = 0;
    for (size_t i = 0; i < size; i++) sum += data[i];
    WeightOptions o = {.matrix_dtype = (int)(sum % DTYPE_COUNT)};  // F32, F16, BF16, Q8, Q4, Q6
    err.msg[0] = '\0';
    if (model_load_with(&m, path, &o, &err) != 0) {
        // The one conversion that may be refused: Q8 and Q4 cannot hold a
        // NaN or an infinity (tests/fuzz/crashes/*-q8-nan).
        if (!dtype_is_blocked((DType)o.matrix_dtype) || !nonfinite || !err.msg[0])
            fuzz_fail("converted load (dtype %d) failed: %s", o.matrix_dtype, err.msg);
        model_free(&m);
        return;
    }
    fuzz_check_model(&m, data, size);
    model_free(&m);
}

#endif
