/*
 * convert.c - `gpt convert SRC OUT.bin` (any model file -> one model.bin)
 * and `gpt inspect FILE` (what a model file holds). The work is in the
 * library: loader.h reads, modelbin.h writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "clock.h"
#include "cli.h"
#include "kvcache.h"
#include "loader.h"
#include "modelbin.h"

static const char *convert_usage =
    "usage: gpt convert SRC OUT.bin [--dtype T] [--tokenizer PATH]\n"
    "  SRC: a Hugging Face GPT-2 directory or model.safetensors (F32, F16 or BF16),\n"
    "       an llm.c checkpoint (gpt2_124M.bin, version 3), or a model.bin\n"
    "  --dtype T         the weight matrices in f32, f16, bf16 or q8 (int8 in blocks of\n"
    "                    32 with an f16 scale); norms, biases and wpe stay f32\n"
    "                    (default: as SRC stores them)\n"
    "  --tokenizer PATH  vocab.json + merges.txt directory or tokenizer.json (default:\n"
    "                    the one beside SRC, else the shipped GPT-2 files)\n"
    "Writes one file holding the configuration, the tokenizer and the weights.\n";

static const char *inspect_usage =
    "usage: gpt inspect FILE\n"
    "  FILE: a model.bin, a Hugging Face directory or model.safetensors, or an llm.c checkpoint\n"
    "Prints the configuration, the tensors (dtype, shape, file offset) and the KV-cache cost.\n";

int run_convert(int argc, char **argv) {
    const char *pos[2] = {NULL, NULL};
    int n_pos = 0;
    const char *tokenizer_path = NULL;
    int dtype = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(convert_usage, stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--tokenizer")) {
            if (i + 1 >= argc) return usage_error("convert", "%s needs a value", a);
            tokenizer_path = argv[++i];
        } else if (!strncmp(a, "--tokenizer=", 12)) {
            tokenizer_path = a + 12;
        } else if (!strcmp(a, "--dtype") || !strncmp(a, "--dtype=", 8)) {
            const char *v = a[7] == '=' ? a + 8 : i + 1 < argc ? argv[++i] : NULL;
            if (!v) return usage_error("convert", "--dtype needs a value");
            if ((dtype = dtype_from_name(v)) < 0)
                return usage_error("convert", "--dtype %s: must be f32, f16, bf16 or q8", v);
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("convert", "unknown option '%s'", a);
        } else if (n_pos < 2) {
            pos[n_pos++] = a;
        } else {
            return usage_error("convert", "unexpected argument '%s'", a);
        }
    }
    if (n_pos < 2) return usage_error("convert", "needs SRC and OUT.bin");
    double t0 = now_seconds();
    Model m;
    GptError err = {{0}};
    WeightOptions wo = {.matrix_dtype = dtype};
    if (model_load_with(&m, pos[0], &wo, &err) != 0) return report_error(&err);
    int owned = 0, rc = EXIT_RUNTIME;
    size_t bytes = 0;
    Tokenizer *tok = open_tokenizer(tokenizer_path, &m, pos[0], &owned, &err);
    if (!tok || modelbin_write(&m, tok, pos[1], &bytes, &err) != 0) {
        report_error(&err);
    } else {
        const GPT2Config *c = &m.config;
        fprintf(stderr, "gpt: wrote %s: %zu params (%d layers, %d heads, %d channels, context %d, vocab %d), "
                        "matrices %s, %zu bytes, from %s %s in %.2f s\n",
                pos[1], m.n_params, c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->vocab_size,
                dtype_name(m.weights.wte.dtype), bytes, m.source_kind, pos[0], now_seconds() - t0);
        rc = EXIT_OK;
    }
    if (owned) tokenizer_free(tok);
    model_free(&m);
    return rc;
}

int run_inspect(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(inspect_usage, stdout);
            return EXIT_OK;
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("inspect", "unknown option '%s'", a);
        } else if (!path) {
            path = a;
        } else {
            return usage_error("inspect", "unexpected argument '%s'", a);
        }
    }
    if (!path) return usage_error("inspect", "needs a FILE");
    ModelInfo info;
    GptError err = {{0}};
    if (model_inspect(path, &info, &err) != 0) return report_error(&err);
    const GPT2Config *c = &info.config;
    size_t HS = (size_t)(c->n_embd / c->n_head);
    size_t per_token = kvcache_bytes_per_token(c, DTYPE_F32);
    printf("file:        %s\n", info.file);
    if (info.version)
        printf("format:      %s version %u, %llu bytes\n", info.kind, info.version, (unsigned long long)info.file_bytes);
    else
        printf("format:      %s, %llu bytes\n", info.kind, (unsigned long long)info.file_bytes);
    printf("config:      n_layer %d, n_head %d, n_embd %d, n_ctx %d, vocab_size %d, layer_norm_epsilon %g\n",
           c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->vocab_size, (double)c->ln_eps);
    printf("parameters:  %zu; %zu bytes as loaded, %zu bytes read per decoded token\n", info.n_params,
           info.weight_bytes, info.decode_bytes);
    if (info.n_tokens)
        printf("tokenizer:   %zu tokens, %zu merges, stored in the file\n", info.n_tokens, info.n_merges);
    else
        printf("tokenizer:   not in the file (--tokenizer, the files beside it, or the shipped GPT-2 files)\n");
    printf("kv cache:    %zu bytes per token (2 x %d layers x %d heads x %zu dims x 4 bytes), "
           "%zu bytes for the full context of %d; half that with --kv-type f16\n",
           per_token, c->n_layer, c->n_head, HS, per_token * (size_t)c->n_ctx, c->n_ctx);
    printf("tensors:     %zu, data from byte %zu\n", info.n_tensors, info.data_offset);
    printf("  %-28s %-5s %-24s %12s %12s\n", "name", "dtype", "shape (HF order)", "offset", "bytes");
    for (size_t i = 0; i < info.n_tensors; i++) {
        const TensorInfo *t = &info.tensors[i];
        char shape[128];
        shape_string(shape, sizeof shape, t->dims, t->ndim, ", ");
        if (t->transposed) strncat(shape, " (out,in)", sizeof shape - strlen(shape) - 1);
        printf("  %-28s %-5s %-24s %12llu %12llu\n", t->name, t->dtype, shape, (unsigned long long)t->offset,
               (unsigned long long)t->nbytes);
    }
    model_info_free(&info);
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_RUNTIME;
}
