/*
 * test_modelbin.c - model.bin and llm.c checkpoints: conversion, loading,
 * validation of damaged files, and the `gpt convert` / `gpt inspect` CLI.
 *
 * What is compared with what:
 *   - a model.bin written from a safetensors checkpoint, and an llm.c file,
 *     give bit-identical weights and logits (memcmp) to the safetensors load,
 *     which test_forward checks against transformers; the .bin's last logits
 *     are also checked against transformers' own (tests/fixtures, 1e-4 as in
 *     test_forward) and its greedy ids, through the CLI, against theirs;
 *   - the tokenizer stored in a .bin encodes the public reference texts to
 *     tiktoken's ids (public_refs.json "tokenizer");
 *   - F16/BF16 sources convert to exactly the values of their widened load;
 *   - damaged files (truncated at many offsets, flipped magic, wrong version,
 *     out-of-range offsets, bad dtypes, huge counts) fail with a message
 *     naming the file, never a crash (run under ASan by `make asan`).
 *
 * Needs $CKPT_DIR (build/ckpt) from tests/make_checkpoints.sh, $GPT
 * (build/gpt) and $BUILD/tests/gen_checkpoint. Temporary files go to a
 * mkdtemp directory under /tmp, removed at the end.
 */
#include <cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "run_gpt.h"
#include "base/fileio.h"
#include "forward.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "model/model.h"
#include "model/modelbin.h"
#include "model/tokenizer.h"

static char tmpdir[256];

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

static const char *tmp(const char *name) { return path_in(tmpdir, name); }

static int write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (unsigned char)(v >> (8 * k));
}

static void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = v << 8 | p[k];
    return v;
}

// No OUT.tmp-XXXXXX left behind in tmpdir.
static int no_temp_files(void) {
    DIR *d = opendir(tmpdir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp-")) found = 1;
    closedir(d);
    return !found;
}

// ---------------------------------------------------------------------------
// equivalence

static int same_weights(const Model *a, const Model *b, const char *what) {
    if (memcmp(&a->config, &b->config, sizeof a->config) != 0) {
        CHECK(0, "%s: configurations differ", what);
        return 0;
    }
    size_t nt = gpt2_n_tensors(&a->config);
    for (size_t i = 0; i < nt; i++) {
        // every stored byte (Q8: quants and scales)
        size_t n = model_tensor_bytes(a, i);
        TensorRef ta = model_tensor(a, i), tb = model_tensor(b, i);
        if (ta.dtype != tb.dtype || n != model_tensor_bytes(b, i) || memcmp(ta.data, tb.data, n) != 0) {
            char name[96];
            gpt2_tensor_name(&a->config, i, name, sizeof name);
            CHECK(0, "%s: tensor %s differs", what, name);
            return 0;
        }
    }
    return 1;
}

// All-position logits of each prompt: memcmp between the two models.
// With vs_transformers, prompt 0's last logits are also checked against
// transformers' (float32 weights only).
static void same_logits(const Model *a, const Model *b, const cJSON *refs, const char *ref_name, int n_prompts,
                        const char *what, int vs_transformers) {
    const GPT2Config *c = &a->config;
    size_t V = (size_t)c->vocab_size;
    ForwardState fa = {0}, fb = {0};
    KVCache ka = {0}, kb = {0};
    GptError err = {{0}};
    if (forward_state_init(&fa, c, 64, 64, 64, NULL, &err) || forward_state_init(&fb, c, 64, 64, 64, NULL, &err) ||
        kvcache_init(&ka, c, DTYPE_F32, 64, &err) || kvcache_init(&kb, c, DTYPE_F32, 64, &err)) {
        CHECK(0, "%s: %s", what, err.msg);
        goto done;
    }
    const cJSON *cases = cJSON_GetObjectItem(cJSON_GetObjectItem(refs, "models"), ref_name);
    for (int p = 0; p < n_prompts && p < cJSON_GetArraySize(cases); p++) {
        const cJSON *ids_j = cJSON_GetObjectItem(cJSON_GetArrayItem(cases, p), "ids");
        int32_t ids[64];
        size_t n = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, ids_j) if (n < 64) ids[n++] = (int32_t)it->valuedouble;
        kvcache_reset(&ka);
        kvcache_reset(&kb);
        SeqInput sa = {.tokens = ids, .n_tokens = n, .cache = &ka, .want = LOGITS_ALL};
        SeqInput sb = {.tokens = ids, .n_tokens = n, .cache = &kb, .want = LOGITS_ALL};
        if (gpt2_forward(a, &fa, &sa, 1, &err) || gpt2_forward(b, &fb, &sb, 1, &err)) {
            CHECK(0, "%s prompt %d: %s", what, p, err.msg);
            continue;
        }
        const float *la = fa.logits + sa.logits_row * V, *lb = fb.logits + sb.logits_row * V;
        size_t first = 0;
        while (first < n * V && la[first] == lb[first]) first++;
        CHECK(memcmp(la, lb, n * V * sizeof(float)) == 0,
              "%s prompt %d: logits differ (first at row %zu id %zu: %.9g vs %.9g)", what, p, first / V, first % V,
              first < n * V ? (double)la[first] : 0.0, first < n * V ? (double)lb[first] : 0.0);
        if (p == 0 && vs_transformers) {
            // and, independently, against transformers' last logits of prompt 0
            char path[256];
            snprintf(path, sizeof path, "tests/fixtures/public_last_logits_%s.f32", ref_name);
            char *ref = NULL;
            size_t len = 0;
            if (file_read_all(path, &ref, &len, &err) == 0 && len >= V * 4) {
                double worst = 0;
                for (size_t i = 0; i < V; i++) {
                    float want;
                    memcpy(&want, ref + 4 * i, 4);
                    worst = fmax(worst, fabs((double)lb[(n - 1) * V + i] - want));
                }
                double tol = V * (size_t)c->n_embd > 10000000 ? 1e-3 : 1e-4;  // test_forward's tolerances
                CHECK(worst <= tol, "%s: last logits differ from transformers' by %g (tolerance %g)", what, worst, tol);
            } else {
                CHECK(0, "%s: %s", path, err.msg);
            }
            free(ref);
        }
    }
done:
    forward_state_free(&fa);
    forward_state_free(&fb);
    kvcache_free(&ka);
    kvcache_free(&kb);
}

// The stored tokenizer encodes the public texts to tiktoken's ids.
static void check_tokenizer(Tokenizer *t, const cJSON *refs, const char *what) {
    const cJSON *cases = cJSON_GetObjectItem(refs, "tokenizer"), *c;
    int n_cases = 0, bad = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        for (int special = 0; special < 2; special++) {
            const cJSON *want = cJSON_GetObjectItem(c, special ? "ids_special" : "ids_text");
            if (!want) continue;
            int32_t *ids = NULL;
            size_t n = 0;
            GptError err = {{0}};
            int ok = tokenizer_encode(t, text, strlen(text), special, &ids, &n, &err) == 0 &&
                     n == (size_t)cJSON_GetArraySize(want);
            for (size_t i = 0; ok && i < n; i++)
                if (ids[i] != cJSON_GetArrayItem(want, (int)i)->valueint) ok = 0;
            if (!ok && bad++ < 3) CHECK(0, "%s: '%.40s' (special %d) encodes differently from tiktoken", what, text, special);
            free(ids);
        }
        n_cases++;
    }
    CHECK(n_cases >= 30 && bad == 0, "%s: %d of %d tokenizer cases differ", what, bad, n_cases);
}

// Converts `src` (loaded with model_load) to a .bin and checks everything.
static void test_convert(const char *src, const char *ref_name, int n_prompts, const cJSON *refs,
                         Tokenizer *shipped) {
    GptError err = {{0}};
    Model a, b;
    if (model_load(&a, src, &err) != 0) {
        CHECK(0, "load %s: %s", src, err.msg);
        return;
    }
    const char *out = tmp("converted.bin");
    size_t bytes = 0;
    CHECK(modelbin_write(&a, shipped, out, &bytes, &err) == 0, "write %s: %s", out, err.msg);
    CHECK(no_temp_files(), "%s: a temporary file was left behind", out);
    if (model_load(&b, out, &err) != 0) {
        CHECK(0, "load %s: %s", out, err.msg);
        model_free(&a);
        return;
    }
    CHECK(!strcmp(b.source_kind, "model.bin"), "source_kind %s", b.source_kind);
    CHECK(b.owned == NULL && b.map.data != NULL && b.map.size == bytes, "%s: weights must be the mapping", out);
    // read in place: its pages are brought in in the background (fileio.h);
    // a source is prefetched exactly when it too is read whole in place
    // (an llm.c file), not when any tensor was converted out of it
    CHECK(b.map.prefetch != NULL, "%s: weights in place but no prefetch of the mapping", out);
    CHECK((a.map.prefetch != NULL) == (a.map.data != NULL && a.owned == NULL), "%s: prefetch %d, mapping %d, owned %d",
          src, a.map.prefetch != NULL, a.map.data != NULL, a.owned != NULL);
    CHECK((const unsigned char *)b.weights.wte.data >= b.map.data &&
              (const unsigned char *)b.weights.lnf_b < b.map.data + b.map.size,
          "%s: weights do not point into the mapping", out);
    CHECK((uintptr_t)b.weights.wte.data % 64 == 0 && (uintptr_t)b.weights.layers[0].fc_w.data % 64 == 0,
          "%s: tensors not 64-byte aligned", out);
    CHECK(b.n_params == a.n_params && b.weight_bytes == a.weight_bytes, "n_params %zu vs %zu", b.n_params,
          a.n_params);
    if (same_weights(&a, &b, src) && ref_name) same_logits(&a, &b, refs, ref_name, n_prompts, src, 1);
    CHECK(b.tokenizer != NULL, "%s: no stored tokenizer", out);
    if (b.tokenizer) {
        check_tokenizer(b.tokenizer, refs, out);
        size_t n = tokenizer_vocab_size(shipped), bad = 0;
        CHECK(tokenizer_vocab_size(b.tokenizer) == n && tokenizer_n_merges(b.tokenizer) == tokenizer_n_merges(shipped),
              "stored tokenizer sizes differ");
        for (size_t i = 0; i < n; i++)
            if (strcmp(tokenizer_token_string(b.tokenizer, (int32_t)i), tokenizer_token_string(shipped, (int32_t)i)))
                bad++;
        for (size_t r = 0; r < tokenizer_n_merges(shipped); r++) {
            int32_t x, y, u, v;
            tokenizer_merge_pair(shipped, r, &x, &y);
            tokenizer_merge_pair(b.tokenizer, r, &u, &v);
            if (x != u || y != v) bad++;
        }
        CHECK(bad == 0, "stored tokenizer: %zu token strings or merges differ from the shipped files", bad);
    }
    model_free(&b);
    model_free(&a);
    unlink(out);
}

// A version-1 model.bin, as gpt 0.1 wrote it (float32 matrices in Hugging
// Face's (in, out) order, the u64 at 120 of each entry reserved), still
// loads, and gives the logits of the safetensors it came from. It is made
// here from a version-3 file by transposing its matrices back. A version-2
// file (version 3 less the header's flags, n_inner and activation, then
// reserved and zero) loads too.
static void test_version1(const cJSON *refs, Tokenizer *shipped) {
    GptError err = {{0}};
    Model a, b;
    if (model_load(&a, ckpt("tiny"), &err) != 0) {
        CHECK(0, "%s", err.msg);
        return;
    }
    const char *v2 = tmp("v2.bin"), *v1 = tmp("v1.bin"), *old2 = tmp("old2.bin");
    char *data = NULL;
    size_t len = 0;
    if (modelbin_write(&a, shipped, v2, NULL, &err) != 0 || file_read_all(v2, &data, &len, &err) != 0) {
        CHECK(0, "%s", err.msg);
        model_free(&a);
        return;
    }
    unsigned char *f = (unsigned char *)data;
    put32(f + 8, 2);
    put32(f + 52, 0);  // flags, n_inner, activation: version 3's, reserved before
    put64(f + 120, 0);
    write_file(old2, data, len);
    if (model_load(&b, old2, &err) != 0) {
        CHECK(0, "version 2: %s", err.msg);
    } else {
        if (same_weights(&a, &b, "version 2")) same_logits(&a, &b, refs, "tiny", 2, "version 2", 1);
        model_free(&b);
    }
    unlink(old2);
    uint64_t table = get64(f + 88), data_off = get64(f + 96);
    uint32_t n_tensors = (uint32_t)(f[48] | f[49] << 8 | f[50] << 16 | (uint32_t)f[51] << 24);
    put32(f + 8, 1);
    int transposed = 0;
    for (uint32_t i = 0; i < n_tensors; i++) {
        unsigned char *e = f + table + 128 * (size_t)i;
        if (e[120] == 1) {
            uint64_t n_in = get64(e + 72), n_out = get64(e + 80);  // HF dims: (in, out)
            float *w = (float *)(void *)(f + data_off + get64(e + 104)), *t = malloc(n_in * n_out * 4);
            for (uint64_t j = 0; j < n_out; j++)
                for (uint64_t k = 0; k < n_in; k++) t[k * n_out + j] = w[j * n_in + k];
            memcpy(w, t, n_in * n_out * 4);
            free(t);
            transposed++;
        }
        put64(e + 120, 0);
    }
    CHECK(transposed == 4 * a.config.n_layer, "%d matrices were stored transposed, want %d", transposed,
          4 * a.config.n_layer);
    write_file(v1, data, len);
    free(data);
    if (model_load(&b, v1, &err) != 0) {
        CHECK(0, "version 1: %s", err.msg);
    } else {
        CHECK(b.owned != NULL, "version 1: its (in, out) matrices must be transposed on load");
        if (same_weights(&a, &b, "version 1")) same_logits(&a, &b, refs, "tiny", 2, "version 1", 1);
        model_free(&b);
    }
    model_free(&a);
    unlink(v1);
    unlink(v2);
}

static void test_llmc(const cJSON *refs, Tokenizer *shipped) {
    GptError err = {{0}};
    Model a, b;
    if (model_load(&a, ckpt("tiny"), &err) != 0 || model_load(&b, ckpt("tiny-llmc.bin"), &err) != 0) {
        CHECK(0, "llm.c: %s", err.msg);
        model_free(&a);
        return;
    }
    // llm.c stores matrices one row per output, as gpt holds them: used in
    // place from the mapping (float-aligned: the header is 1024 bytes)
    CHECK(!strcmp(b.source_kind, "llm.c") && b.tokenizer == NULL && !b.owned && b.map.data,
          "llm.c: kind %s, weights in place, no tokenizer", b.source_kind);
    CHECK((const unsigned char *)b.weights.layers[1].qkv_w.data > b.map.data &&
              (uintptr_t)b.weights.layers[1].qkv_w.data % 4 == 0,
          "llm.c: c_attn not in the mapping");
    if (same_weights(&a, &b, "tiny-llmc.bin")) same_logits(&a, &b, refs, "tiny", 3, "tiny-llmc.bin", 1);
    model_free(&a);
    model_free(&b);
    // and its model.bin
    test_convert(ckpt("tiny-llmc.bin"), "tiny", 2, refs, shipped);

    // damaged llm.c files
    char *data;
    size_t len;
    if (file_read_all(ckpt("tiny-llmc.bin"), &data, &len, &err) != 0) {
        CHECK(0, "%s", err.msg);
        return;
    }
    const char *p = tmp("bad-llmc.bin");
    struct {
        size_t size;
        int word, value;
        const char *msg;
    } cases[] = {
        {0, 1, 5, "version 5 (bfloat16)"},  {0, 1, 2, "version 2"},      {2000, -1, 0, "truncated"},
        {1000, -1, 0, "not a GPT-2 checkpoint"}, {0, 4, 0, "n_layer 0"}, {0, 7, 100, "padded vocabulary"},
        {0, 6, 68, "truncated"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned char save[4] = {0};
        if (cases[i].word >= 0) {
            memcpy(save, data + 4 * cases[i].word, 4);
            put32((unsigned char *)data + 4 * cases[i].word, (uint32_t)cases[i].value);
        }
        write_file(p, data, cases[i].size ? cases[i].size : len);
        if (cases[i].word >= 0) memcpy(data + 4 * cases[i].word, save, 4);
        int rc = model_load(&a, p, &err);
        CHECK(rc != 0 && strstr(err.msg, p) && strstr(err.msg, cases[i].msg), "llm.c case %zu: rc %d, '%s', want '%s'",
              i, rc, err.msg, cases[i].msg);
        model_free(&a);
    }
    unlink(p);
    free(data);
}

// F16/BF16 sources: the .bin holds exactly the widened values.
// F16 and BF16 safetensors keep their dtype in a model.bin; and a model
// converted to each dtype at load (`gpt -m SRC --dtype T`) and one written
// from that (`gpt convert SRC OUT --dtype T`) hold the same bytes and give
// the same logits. Q4 is the mix: wte in Q6, the layers' matrices in Q4;
// q4-pure every matrix in Q4, wte too (a model.bin of Q4 tensors alone);
// Q6 every matrix in Q6.
static void test_dtypes(const cJSON *refs, Tokenizer *shipped) {
    const char *names[2] = {"tiny-f16", "tiny-bf16"};
    const DType want[2] = {DTYPE_F16, DTYPE_BF16};
    const char *converted[5] = {"q8", "f16", "q4", "q4-pure", "q6"};
    for (int k = 0; k < 7; k++) {
        GptError err = {{0}};
        Model a, b;
        WeightOptions o = {.matrix_dtype = -1};
        if (k >= 2) CHECK(weight_options_from_name(converted[k - 2], &o) == 0, "%s: not a name", converted[k - 2]);
        const char *src = k < 2 ? ckpt(names[k]) : ckpt("tiny");
        char what[64];
        snprintf(what, sizeof what, "%s as %s", k < 2 ? names[k] : "tiny", k < 2 ? "stored" : converted[k - 2]);
        if (model_load_with(&a, src, &o, &err) != 0) {
            CHECK(0, "%s: %s", what, err.msg);
            continue;
        }
        // (Q4 is a mix: wte and layer 0 in Q6, the last layer's c_fc in Q4;
        // q4-pure has no Q6)
        DType dt = k < 2 ? want[k] : (DType)o.matrix_dtype;
        DType wte_dt = dt == DTYPE_Q4 && !o.q4_pure ? DTYPE_Q6 : dt;
        const Weight *fc = &a.weights.layers[a.config.n_layer - 1].fc_w;
        CHECK(a.weights.wte.dtype == wte_dt && fc->dtype == dt, "%s: wte is %s, the last fc_w %s", what,
              dtype_name(a.weights.wte.dtype), dtype_name(fc->dtype));
        if (o.q4_pure) {
            // every matrix Q4 in the file: what a q4-pure model.bin is
            size_t nt = gpt2_n_tensors(&a.config), q4 = 0;
            for (size_t i = 0; i < nt; i++) q4 += model_tensor(&a, i).dtype == DTYPE_Q4;
            CHECK(q4 == 1 + 4 * (size_t)a.config.n_layer, "%s: %zu Q4 tensors, want wte and 4 per layer", what, q4);
        }
        const char *out = tmp("dtype.bin");
        CHECK(modelbin_write(&a, shipped, out, NULL, &err) == 0, "%s", err.msg);
        if (model_load(&b, out, &err) == 0) {
            CHECK(b.owned == NULL, "%s: a %s model.bin must be used in place", what, dtype_name(dt));
            char dts[32];
            if (o.q4_pure)
                CHECK(!strcmp(model_matrix_dtypes(&b, dts, sizeof dts), "Q4 (every matrix)"),
                      "%s: its model.bin reads back as matrices '%s'", what, dts);
            if (same_weights(&a, &b, what)) same_logits(&a, &b, refs, "tiny", 2, what, 0);
            model_free(&b);
        } else {
            CHECK(0, "%s: %s", what, err.msg);
        }
        model_free(&a);
        unlink(out);
    }
}

// ---------------------------------------------------------------------------
// damaged files

// A GPT-2-style byte tokenizer of 256 + 3 merges + <|endoftext|> = 260 tokens.
static Tokenizer *micro_tokenizer(void) {
    char strs[260][16];
    const char *ptrs[260];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        // GPT-2's bytes_to_unicode: printable Latin-1 stands for itself
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        int cp = printable ? b : 256 + n++;
        if (cp < 0x80) {
            strs[b][0] = (char)cp;
            strs[b][1] = 0;
        } else {
            strs[b][0] = (char)(0xC0 | cp >> 6);
            strs[b][1] = (char)(0x80 | (cp & 0x3F));
            strs[b][2] = 0;
        }
    }
    snprintf(strs[256], 16, "\xC4\xA0t");          // "Ġt"
    snprintf(strs[257], 16, "he");
    snprintf(strs[258], 16, "\xC4\xA0the");        // "Ġthe"
    snprintf(strs[259], 16, "<|endoftext|>");
    for (int i = 0; i < 260; i++) ptrs[i] = strs[i];
    // byte 0x20 is "Ġ" (U+0120), token 32
    const int32_t merges[3][2] = {{32, 't'}, {'h', 'e'}, {256, 257}};
    GptError err = {{0}};
    Tokenizer *t = tokenizer_from_tables(260, ptrs, 3, merges, &err);
    CHECK(t != NULL, "micro tokenizer: %s", err.msg);
    return t;
}

// Loads `data` written to a file; must fail with the path and `want` in the
// message (want NULL: any message).
static void expect_fail(const unsigned char *data, size_t n, const char *want, const char *what) {
    const char *p = tmp("damaged.bin");
    if (write_file(p, data, n) != 0) {
        CHECK(0, "cannot write %s", p);
        return;
    }
    Model m;
    GptError err = {{0}};
    int rc = model_load(&m, p, &err);
    CHECK(rc != 0 && strstr(err.msg, p) && (!want || strstr(err.msg, want)) && !strchr(err.msg, '\n'),
          "%s: rc %d, message '%s', want '%s'", what, rc, err.msg, want ? want : "(any)");
    if (getenv("VERBOSE")) printf("  %s: %s\n", what, err.msg);
    model_free(&m);
}

static void test_damage(void) {
    // 1 layer, 8 channels, 8 positions, 260 tokens: every section is small,
    // so offsets across the file hit the header, tokenizer and table.
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s/tests/gen_checkpoint %s --layers 1 --embd 8 --heads 2 --ctx 8 --vocab 260 --no-tokenizer",
             env_or("BUILD", "build"), tmp("micro"));
    CHECK(system(cmd) == 0, "%s", cmd);
    GptError err = {{0}};
    Model a;
    Tokenizer *t = micro_tokenizer();
    if (!t || model_load(&a, tmp("micro"), &err) != 0) {
        CHECK(0, "micro: %s", err.msg);
        tokenizer_free(t);
        return;
    }
    const char *good_path = tmp("micro.bin");
    CHECK(modelbin_write(&a, t, good_path, NULL, &err) == 0, "%s", err.msg);
    model_free(&a);
    tokenizer_free(t);
    char *raw;
    size_t n;
    if (file_read_all(good_path, &raw, &n, &err) != 0) {
        CHECK(0, "%s", err.msg);
        return;
    }
    unsigned char *good = (unsigned char *)raw, *buf = malloc(n);
    {
        Model m;
        CHECK(model_load(&m, good_path, &err) == 0 && m.tokenizer, "micro.bin: %s", err.msg);
        CHECK(model_sniff(good, n, n) == MODEL_KIND_GPTBIN, "model_sniff does not see a model.bin");
        model_free(&m);
    }
    uint64_t index_off = get64(good + 56), strings_off = get64(good + 64), merges_off = get64(good + 80);
    uint64_t table = get64(good + 88), data_off = get64(good + 96);
    CHECK(data_off % 4096 == 0 && table % 8 == 0 && n > data_off, "micro.bin layout");

    // Truncated at 50 offsets spread over the file, and at the edges of each
    // section; then the same lengths with the header made to agree with them
    // (file_bytes, data_bytes), so that the section and tensor bounds checks
    // are what catches them.
    size_t cuts[80];
    int nc = 0;
    for (int k = 0; k < 50; k++) cuts[nc++] = n * (size_t)k / 50;
    const size_t edges[] = {1, 7, 8, 9, 64, 127, 128, 129, (size_t)index_off + 4, (size_t)strings_off + 3,
                            (size_t)merges_off + 4, (size_t)table + 64, (size_t)table + 200, (size_t)data_off,
                            (size_t)data_off + 100, n - 1};
    for (size_t k = 0; k < sizeof edges / sizeof *edges; k++) cuts[nc++] = edges[k];
    for (int k = 0; k < nc; k++) {
        size_t cut = cuts[k];
        char what[64];
        snprintf(what, sizeof what, "truncated at %zu of %zu", cut, n);
        memcpy(buf, good, cut);
        expect_fail(buf, cut, cut < 8 ? "not a GPT-2 checkpoint" : cut < 128 ? "header" : "truncated?", what);
        if (cut >= 128) {
            put64(buf + 112, cut);
            put64(buf + 104, cut > data_off ? cut - data_off : 0);
            snprintf(what, sizeof what, "truncated at %zu, header agreeing", cut);
            expect_fail(buf, cut, NULL, what);
        }
    }

    // One field at a time.
    struct {
        size_t off;
        int width;  // 4 or 8 bytes, or 1: xor the byte with value
        uint64_t value;
        const char *want;
    } cases[] = {
        {0, 1, 0xFF, "not a GPT-2 checkpoint"},
        {7, 1, 0x01, "not a GPT-2 checkpoint"},
        {8, 4, 4, "version 4"},
        {8, 4, 0, "version 0"},
        {8, 4, 0xFFFFFFFF, "version 4294967295"},
        {12, 4, 64, "header"},
        {16, 4, 0xFFFFFFFF, "n_layer 4294967295 is not a GPT-2 size"},
        {16, 4, 2, "lists 16 tensors; a 2-layer GPT-2 has 28"},
        {20, 4, 3, "not a multiple of n_head"},
        {24, 4, 1u << 30, "n_embd"},
        {32, 4, 261, "tokenizer has 260 tokens"},
        {36, 4, 0x7FC00000, "layer_norm_epsilon"},
        {40, 4, 0xFFFFFFFF, "tokenizer has 4294967295 tokens"},
        {44, 4, 0xFFFFFFFF, "merges"},
        {48, 4, 0xFFFFFFFF, "lists 4294967295 tensors"},
        {52, 4, 8, "flags not zero"},
        {52, 4, MODELBIN_UNTIED_OUTPUT, "lists 16 tensors; a 1-layer GPT-2 has 17"},
        {56, 8, UINT64_MAX - 3, "token index"},
        {56, 8, 2, "token index"},
        {64, 8, 1ull << 40, "token strings"},
        {72, 8, UINT64_MAX, "token strings"},
        {80, 8, data_off, "merges"},
        {80, 8, index_off, "token index and merges overlap"},
        {88, 8, index_off, "token index and tensor table overlap"},
        {88, 8, table + 4, "tensor table"},
        {88, 8, n, "tensor table"},
        {96, 8, data_off + 64, "data region"},
        {96, 8, 0, "data region"},
        {104, 8, UINT64_MAX - 100, "data region"},
        {112, 8, n + 1, "header says"},
        {120, 4, 7, "h.0.mlp.c_fc.weight has shape [8,32] (ndim 2), config implies [8,7]"},
        {120, 4, 0, "n_inner 0 is not an MLP width"},
        {124, 4, ACTIVATION_COUNT, "activation 5 is not one this gpt knows"},
        // tensor table entries (tensor 0 wte, 2 h.0.ln_1.weight, 4 c_attn.weight)
        {table + 0, 1, 'x' ^ 'w', "named 'xte.weight', expected wte.weight"},
        {table + 63, 1, 'A', "NUL-padded"},
        {table + 64, 4, 7, "unknown dtype 7"},
        {table + 128 * 2 + 64, 4, MODELBIN_F16, "dtype F16"},
        {table + 128 * 3 + 64, 4, MODELBIN_BF16, "dtype BF16"},
        {table + 64, 4, 0xFFFFFFFF, "unknown dtype 4294967295"},
        {table + 68, 4, 3, "ndim 3"},
        {table + 68, 4, 0xFFFFFFFF, "config implies [260,8]"},
        {table + 72, 8, 261, "has shape [261,8]"},
        {table + 128 * 4 + 80, 8, 25, "has shape [8,25]"},
        {table + 128 * 4 + 88, 8, 1, "has shape [8,24,1] (ndim 2), config implies [8,24]"},
        {table + 104, 8, n, "outside the data region"},
        {table + 104, 8, UINT64_MAX - 63, "outside the data region"},
        {table + 104, 8, 4, "not 64-byte aligned"},
        {table + 128 + 104, 8, 0, "overlaps"},
        {table + 112, 8, 4, "needs 8320"},
        {table + 112, 8, UINT64_MAX, "bytes"},
        {table + 120, 4, 1, "wte.weight: layout 1; it has only layout 0"},
        {table + 128 * 4 + 120, 4, 2, "h.0.attn.c_attn.weight: layout 2"},
        {table + 124, 4, 1, "reserved field"},
        {table + 128 * 2 + 64, 4, MODELBIN_Q8, "dtype Q8"},
        {table + 128 * 2 + 64, 4, MODELBIN_Q4, "dtype Q4"},
        // tokenizer tables
        {index_off, 4, 1, "token index"},
        {index_off + 4 * 260, 4, 0xFFFFFFFF, "token index"},
        {index_off + 4 * 5, 4, 0xFFFFFFF0, "token 4"},
        {index_off + 4 * 5, 4, 0, "token 4"},
        {strings_off + 2, 1, 0x41, "token 0"},                  // the NUL of token 0 ("!") becomes 'A'
        {strings_off + 0, 1, 0x21 ^ 0xFF, "token 0: string is not valid UTF-8"},
        {merges_off, 4, 260, "merge 0 references token id 260"},
        {merges_off + 4, 4, 0xFFFFFFFF, "merge 0 references token id -1"},
        {merges_off + 16, 4, 'x', "stored tokenizer"},          // "Ġt"+"he" -> "Ġthe" becomes "x"+"he"
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        memcpy(buf, good, n);
        size_t o = cases[k].off;
        if (cases[k].width == 1) buf[o] ^= (unsigned char)cases[k].value;
        else if (cases[k].width == 4) put32(buf + o, (uint32_t)cases[k].value);
        else put64(buf + o, cases[k].value);
        char what[96];
        snprintf(what, sizeof what, "case %zu (byte %zu = %llu)", k, o, (unsigned long long)cases[k].value);
        expect_fail(buf, n, cases[k].want, what);
    }
    free(buf);
    free(raw);
    unlink(tmp("damaged.bin"));
}

// ---------------------------------------------------------------------------
// the command line

#define RUN(...) run_gpt(tmpdir, NULL, 0, (const char *const[]){__VA_ARGS__, NULL})

// The "tokens" of --json output equal the reference greedy ids.
static int greedy_matches(const char *json, const cJSON *want) {
    cJSON *j = cJSON_Parse(json);
    const cJSON *got = cJSON_GetObjectItem(j, "tokens");
    int ok = got && cJSON_GetArraySize(got) == cJSON_GetArraySize(want);
    for (int i = 0; ok && i < cJSON_GetArraySize(want); i++)
        if (cJSON_GetArrayItem(got, i)->valueint != cJSON_GetArrayItem(want, i)->valueint) ok = 0;
    cJSON_Delete(j);
    return ok;
}

static void test_cli(const cJSON *refs) {
    // usage errors: 2
    const char *bad[][5] = {
        {"convert", NULL},
        {"convert", "a", NULL},
        {"convert", "a", "b", "c"},
        {"convert", "--frob", "a", "b"},
        {"convert", "a", "b", "--tokenizer"},
        {"inspect", NULL},
        {"inspect", "a", "b", NULL},
        {"inspect", "--frob", "a", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        Result r = run_gpt(tmpdir, NULL, 0, bad[i]);
        CHECK(r.rc == 2 && one_line(r.err) && strstr(r.err, "gpt "), "usage case %zu: rc %d, '%s'", i, r.rc, r.err);
        result_free(&r);
    }
    // OUT "-" is not stdout, and no file named "-" is written
    Result r = RUN("convert", ckpt("tiny"), "-");
    CHECK(r.rc == 2 && one_line(r.err) && strstr(r.err, "'-'") && !path_exists("-"),
          "convert to '-': rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    unlink("-");
    r = RUN("convert", "-h");
    CHECK(r.rc == 0 && strstr(r.out, "usage: gpt convert SRC OUT.bin"), "convert -h: rc %d", r.rc);
    result_free(&r);

    // a missing source: 1, naming it, and no output file
    const char *out = tmp("cli.bin");
    r = RUN("convert", "/nonexistent/gpt2", out);
    CHECK(r.rc == 1 && one_line(r.err) && strstr(r.err, "/nonexistent/gpt2") && !path_exists(out),
          "convert of a missing source: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN("convert", ckpt("tiny"), "/nonexistent-dir/x.bin");
    CHECK(r.rc == 1 && one_line(r.err) && strstr(r.err, "/nonexistent-dir/x.bin"), "convert to a missing dir: rc %d, '%s'",
          r.rc, r.err);
    result_free(&r);
    r = RUN("convert", ckpt("tiny"), out, "--tokenizer", "/nonexistent/tok");
    CHECK(r.rc == 1 && one_line(r.err) && strstr(r.err, "/nonexistent/tok") && !path_exists(out),
          "convert with a missing tokenizer: rc %d, '%s'", r.rc, r.err);
    result_free(&r);

    // convert, then run: the same greedy ids as transformers
    r = RUN("convert", ckpt("tiny"), out);
    CHECK(r.rc == 0 && one_line(r.err) && strstr(r.err, "wrote") && path_exists(out) && no_temp_files(),
          "convert tiny: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    const cJSON *cases = cJSON_GetObjectItem(cJSON_GetObjectItem(refs, "models"), "tiny");
    for (int i = 0; i < 3; i++) {
        const cJSON *c = cJSON_GetArrayItem(cases, i);
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        Result a = RUN("-m", out, "-p", text, "-n", "40", "--temp", "0", "--ignore-eos", "--json");
        Result b = RUN("-m", ckpt("tiny"), "-p", text, "-n", "40", "--temp", "0", "--ignore-eos", "--json");
        CHECK(a.rc == 0 && greedy_matches(a.out, cJSON_GetObjectItem(c, "greedy_ids")),
              "-m model.bin prompt %d: rc %d, greedy ids differ from transformers' (%s)", i, a.rc, a.err);
        CHECK(b.rc == 0 && greedy_matches(b.out, cJSON_GetObjectItem(c, "greedy_ids")),
              "-m safetensors prompt %d: rc %d", i, b.rc);
        result_free(&a);
        result_free(&b);
    }
    // the stored tokenizer serves --tokenize; the .bin alone in a directory runs
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/alone && cp %s %s/alone/m.bin", tmpdir, out, tmpdir);
    CHECK(system(cmd) == 0, "%s", cmd);
    r = RUN("-m", tmp("alone/m.bin"), "-p", "Hello, my name is", "-n", "5", "--temp", "0", "--stats");
    CHECK(r.rc == 0 && !strcmp(r.out, " is is is is is") && strstr(r.err, "model.bin"), "alone: rc %d, '%s' '%s'", r.rc,
          r.out, r.err);
    result_free(&r);

    // inspect
    r = RUN("inspect", out);
    CHECK(r.rc == 0 && strstr(r.out, "model.bin version 3") && strstr(r.out, "wte.weight") &&
              strstr(r.out, "[50257, 64]") && strstr(r.out, "[64, 192]") && strstr(r.out, "1024 bytes per token") &&
              strstr(r.out, "50000 merges"),
          "inspect tiny.bin: rc %d, '%.300s' %s", r.rc, r.out, r.err);
    result_free(&r);
    r = RUN("inspect", ckpt("tiny-llmc.bin"));
    CHECK(r.rc == 0 && strstr(r.out, "llm.c version 3") && strstr(r.out, "[50304, 64]") &&
              strstr(r.out, "[2, 192, 64]"),
          "inspect llm.c: rc %d, '%.300s' %s", r.rc, r.out, r.err);
    result_free(&r);
    r = RUN("inspect", ckpt("gpt2-124M-shaped"));
    CHECK(r.rc == 0 && strstr(r.out, "safetensors") && strstr(r.out, "73728") && strstr(r.out, "[768, 2304]") &&
              strstr(r.out, "h.11.attn.bias"),
          "inspect 124M dir: rc %d, '%.300s' %s", r.rc, r.out, r.err);
    result_free(&r);
    r = RUN("inspect", "/nonexistent/m.bin");
    CHECK(r.rc == 1 && one_line(r.err) && strstr(r.err, "/nonexistent/m.bin"), "inspect missing: rc %d", r.rc);
    result_free(&r);

    // a damaged .bin: exit 1 with one line, for -m and inspect
    snprintf(cmd, sizeof cmd, "head -c 5000 %s > %s", out, tmp("cut.bin"));
    CHECK(system(cmd) == 0, "%s", cmd);
    r = RUN("-m", tmp("cut.bin"), "-p", "x");
    CHECK(r.rc == 1 && one_line(r.err) && strstr(r.err, "cut.bin") && strstr(r.err, "truncated"),
          "truncated .bin: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN("inspect", tmp("cut.bin"));
    CHECK(r.rc == 1 && one_line(r.err) && strstr(r.err, "truncated"), "inspect truncated: rc %d, '%s'", r.rc, r.err);
    result_free(&r);

    // the 124M shape: convert into the temp dir, inspect, delete
    const char *big = tmp("gpt2-124M.bin");
    r = RUN("convert", ckpt("gpt2-124M-shaped"), big);
    CHECK(r.rc == 0 && strstr(r.err, "124439808 params"), "convert 124M: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN("inspect", big);
    CHECK(r.rc == 0 && strstr(r.out, "73728 bytes per token") && strstr(r.out, "[768, 3072]") &&
              strstr(r.out, "h.11.mlp.c_proj.weight"),
          "inspect 124M .bin: rc %d, '%.300s'", r.rc, r.out);
    result_free(&r);
    unlink(big);

    // llm.c through the CLI, with the shipped tokenizer
    r = RUN("convert", ckpt("tiny-llmc.bin"), out, "--tokenizer", "models", "--force");
    CHECK(r.rc == 0 && strstr(r.err, "llm.c"), "convert llm.c: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    const cJSON *c0 = cJSON_GetArrayItem(cases, 0);
    r = RUN("-m", ckpt("tiny-llmc.bin"), "-p", cJSON_GetObjectItem(c0, "text")->valuestring, "-n", "40", "--temp", "0",
            "--ignore-eos", "--json");
    CHECK(r.rc == 0 && greedy_matches(r.out, cJSON_GetObjectItem(c0, "greedy_ids")), "-m llm.c: rc %d, %s", r.rc, r.err);
    result_free(&r);

    // scripts/get-gpt2.sh --from a local directory
    snprintf(cmd, sizeof cmd, "GPT=%s sh scripts/get-gpt2.sh --from %s --out %s >%s 2>&1", env_or("GPT", "build/gpt"),
             ckpt("tiny"), tmp("script.bin"), tmp("script.log"));
    int rc = system(cmd);
    CHECK(rc == 0 && path_exists(tmp("script.bin")), "%s: exit %d (see the log)", cmd, rc);
    r = RUN("-m", tmp("script.bin"), "-p", cJSON_GetObjectItem(c0, "text")->valuestring, "-n", "40", "--temp", "0",
            "--ignore-eos", "--json");
    CHECK(r.rc == 0 && greedy_matches(r.out, cJSON_GetObjectItem(c0, "greedy_ids")), "get-gpt2.sh output: rc %d, %s",
          r.rc, r.err);
    result_free(&r);
    snprintf(cmd, sizeof cmd, "GPT=%s sh scripts/get-gpt2.sh --from /nonexistent --out %s >/dev/null 2>&1",
             env_or("GPT", "build/gpt"), tmp("script2.bin"));
    rc = system(cmd);
    CHECK(rc != 0 && !path_exists(tmp("script2.bin")), "get-gpt2.sh --from a missing dir: exit %d", rc);
}

int main(void) {
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "modelbin") != 0) return 1;
    char *text;
    size_t len;
    GptError err = {{0}};
    if (file_read_all("tests/fixtures/public_refs.json", &text, &len, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    cJSON *refs = cJSON_Parse(text);
    free(text);
    Tokenizer *shipped = tokenizer_load("models", &err);
    CHECK(refs && shipped, "fixtures: %s", err.msg);
    if (refs && shipped) {
        test_convert(ckpt("tiny"), "tiny", 4, refs, shipped);
        test_convert(ckpt("tiny-prefix"), "tiny", 1, refs, shipped);
        test_convert(ckpt("gpt2-124M-shaped"), "gpt2-124M-shaped", 2, refs, shipped);
        test_llmc(refs, shipped);
        test_version1(refs, shipped);
        test_dtypes(refs, shipped);
        test_damage();
        test_cli(refs);
    }
    tokenizer_free(shipped);
    cJSON_Delete(refs);
    scratch_dir_remove(tmpdir);
    return check_exit("test_modelbin");
}
