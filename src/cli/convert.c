/*
 * convert.c - `gpt convert SRC OUT.bin` (any model file -> one model.bin)
 * and `gpt inspect FILE` (what a model file holds). The work is in the
 * library: loader.h reads, modelbin.h writes.
 *
 * convert never destroys what it reads and never leaves half a file: OUT may
 * not be one of the files SRC is made of, must be a new name or (with
 * --force) a regular file, and gets its name only when complete; Ctrl-C
 * leaves nothing behind.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>  // strcasecmp

#include "base/bytes.h"
#include "base/clock.h"
#include "cli.h"
#include "base/fileio.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "model/modelbin.h"
#include "progress.h"

static const char *convert_usage =
    "usage: gpt convert SRC OUT.bin [--dtype T] [--lora PATH[:SCALE]]... [--tokenizer PATH] [--force]\n"
    "  SRC: a Hugging Face GPT-2 directory or model.safetensors (F32, F16 or BF16),\n"
    "       an llm.c checkpoint (gpt2_124M.bin, version 3), a GGUF file of a GPT-2\n"
    "       model (llama.cpp's; docs/model-format.md: the types read), or a model.bin\n"
    "  --dtype T         the weight matrices in f32, f16, bf16, q8 (int8 in blocks of\n"
    "                    32 with an f16 scale), q6 (6-bit, the same blocks), q4\n"
    "                    (4-bit, the same blocks; wte, also the output layer, layer\n"
    "                    0 and every attn.c_proj in q6) or q4-pure (every matrix in\n"
    "                    q4); norms, biases and wpe stay f32 (default: as SRC\n"
    "                    stores them)\n"
    "  --lora PATH       a PEFT LoRA adapter directory or a llama.cpp GGUF LoRA file\n"
    "                    merged into the weights before --dtype's conversion;\n"
    "                    PATH:SCALE multiplies its change by SCALE (default 1);\n"
    "                    repeatable: the adapters add\n"
    "  --tokenizer PATH  vocab.json + merges.txt directory or tokenizer.json (default:\n"
    "                    the one beside SRC, else the shipped GPT-2 files)\n"
    "  --force           replace OUT if it exists (a regular file; it keeps its mode)\n"
    "  --progress        a progress line on stderr even when it is not a terminal (on a\n"
    "                    terminal it is always shown)\n"
    "Writes one file holding the configuration, the tokenizer and the weights. OUT is\n"
    "never one of SRC's files, and has its name only once it is complete. An OUT named\n"
    "for another format (.gguf, .safetensors, .pt, .pth, .ckpt, .onnx, .h5, .json) is\n"
    "refused (exit 2).\n";

static const char *inspect_usage =
    "usage: gpt inspect FILE\n"
    "  FILE: a model.bin, a Hugging Face directory or model.safetensors, an llm.c checkpoint,\n"
    "        or a GGUF file of a GPT-2 model (llama.cpp's)\n"
    "Prints the configuration, the tensors (dtype, shape, file offset) and the KV-cache cost.\n"
    "Shapes are Hugging Face's (a Conv1D matrix [in, out]; \"rows out\" tags a matrix the\n"
    "file stores one row per output, the transpose), an llm.c checkpoint's its own\n"
    "([L, out, in]); the line \"shapes:\" says which.\n";

// The writing's progress, on the Progress line ctx.
static void show_write_progress(void *ctx, size_t done, size_t n_tensors, uint64_t bytes_done, uint64_t data_bytes) {
    Progress *p = ctx;
    char eta[32];
    double fraction = data_bytes ? (double)bytes_done / (double)data_bytes : 0;
    progress_update(p, "gpt convert: %zu/%zu tensors written, %.0f of %.0f MB%s", done, n_tensors, bytes_done / 1e6,
                    data_bytes / 1e6, progress_eta(p, fraction, eta, sizeof eta));
}

// OUT's extension when it names a format that is not model.bin (gpt
// convert writes nothing else), else NULL: a model.bin named out.gguf
// would be taken for a GGUF file by whoever opens it next.
static const char *foreign_extension(const char *out) {
    static const char *const other[] = {"gguf", "safetensors", "pt", "pth", "ckpt", "onnx", "h5", "json"};
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out, *dot = strrchr(base, '.');
    for (size_t i = 0; dot && i < sizeof other / sizeof *other; i++)
        if (!strcasecmp(dot + 1, other[i])) return dot + 1;
    return NULL;
}

// The files SRC may be made of: OUT must be none of them.
enum { MAX_INPUTS = 16 };
static size_t input_files(const char *src, const char *tokenizer_path, char **out) {
    size_t n = 0;
    char *dir = path_is_dir(src) ? path_join(src, NULL) : path_dirname(src);
    static const char *const beside[] = {"model.safetensors", "config.json", "vocab.json", "merges.txt",
                                         "tokenizer.json"};
    out[n++] = path_join(src, NULL);
    for (size_t i = 0; dir && i < sizeof beside / sizeof *beside; i++) out[n++] = path_join(dir, beside[i]);
    if (tokenizer_path) {
        out[n++] = path_join(tokenizer_path, NULL);
        for (size_t i = 2; i < sizeof beside / sizeof *beside; i++) out[n++] = path_join(tokenizer_path, beside[i]);
    }
    free(dir);
    return n;
}

int run_convert(int argc, char **argv) {
    enum { O_TOKENIZER = 256, O_DTYPE, O_FORCE, O_PROGRESS, O_LORA };
    static const struct option longs[] = {{"help", no_argument, 0, 'h'},
                                          {"tokenizer", required_argument, 0, O_TOKENIZER},
                                          {"dtype", required_argument, 0, O_DTYPE},
                                          {"force", no_argument, 0, O_FORCE},
                                          {"progress", no_argument, 0, O_PROGRESS},
                                          {"lora", required_argument, 0, O_LORA},
                                          {0, 0, 0, 0}};
    const char *tokenizer_path = NULL;
    WeightOptions wo = {.matrix_dtype = -1};
    LoraRequest lora[LORA_MAX];
    size_t n_lora = 0;
    int force = 0, forced_progress = 0;
    opterr = 0;
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, ":h", longs, NULL)) != -1;) {
        const char *arg = argv[optind - 1];
        switch (c) {
        case 'h':
            if (out_write(convert_usage, strlen(convert_usage)) || out_flush()) return EXIT_RUNTIME;
            return EXIT_OK;
        case O_TOKENIZER: tokenizer_path = optarg; break;
        case O_FORCE: force = 1; break;
        case O_PROGRESS: forced_progress = 1; break;
        case O_DTYPE:
            if (weight_options_from_name(optarg, &wo) != 0)
                return usage_error("convert", "--dtype %s: must be " WEIGHT_DTYPE_NAMES, optarg);
            break;
        case O_LORA:
            if (lora_option(lora, &n_lora, "--lora", optarg, "convert") != 0) return EXIT_USAGE;
            break;
        case ':': return usage_error("convert", "%s needs a value", arg);
        default: return usage_error("convert", "unknown option '%s'", arg);
        }
    }
    wo.lora = lora;
    wo.n_lora = n_lora;
    if (argc - optind < 2) return usage_error("convert", "needs SRC and OUT.bin");
    if (argc - optind > 2) return usage_error("convert", "unexpected argument '%s'", argv[optind + 2]);
    const char *src = argv[optind], *dst = argv[optind + 1];
    // "-" reads as stdout, but a model.bin is written by name (atomically, beside OUT)
    if (!strcmp(dst, "-")) return usage_error("convert", "OUT '-': a model.bin is written to a file, not to stdout");
    char *inputs[MAX_INPUTS] = {0};
    size_t n_inputs = input_files(src, tokenizer_path, inputs);
    Progress progress;
    progress_init(&progress, forced_progress);
    ModelbinWriteOptions wopt = {.replace = force, .inputs = (const char *const *)inputs, .n_inputs = n_inputs,
                                 .cancel = interrupt_flag(), .progress = show_write_progress,
                                 .progress_ctx = &progress};
    double t0 = now_seconds();
    Model m = {0};
    GptError err = {{0}};
    int owned = 0, rc = EXIT_RUNTIME;
    size_t bytes = 0;
    Tokenizer *tok = NULL;
    // refused before the (long) load, not after it; OUT as one of SRC's
    // files first, the worse mistake
    if (modelbin_check_out(dst, &wopt, &err) != 0) {
        report_error(&err);
        goto done;
    }
    const char *ext = foreign_extension(dst);
    if (ext) {
        rc = usage_error("convert", "%s: a .%s name, but gpt convert writes only a model.bin (name it .bin)", dst, ext);
        goto done;
    }
    catch_interrupts();
    progress_update(&progress, "gpt convert: reading the model%s%s", n_lora ? ", merging the adapters" : "",
                    wo.matrix_dtype >= 0 ? " and converting its matrices" : "");
    int loaded = model_load_with(&m, src, &wo, &err);
    progress_clear(&progress);
    progress_init(&progress, forced_progress);  // the writing's rate and time left from here
    if (loaded != 0) {
        report_error(&err);
        goto done;
    }
    tok = open_tokenizer(tokenizer_path, &m, src, &owned, &err);
    defer_interrupts();  // a signal now cancels the write, which removes what it wrote
    int written = tok ? modelbin_write_with(&m, tok, dst, &wopt, &bytes, &err) : -1;
    progress_clear(&progress);
    if (written != 0) {
        report_error(&err);
        if (was_interrupted()) rc = EXIT_INTERRUPTED;
        goto done;
    }
    const GPT2Config *c = &m.config;
    char dts[32];
    note(0, "wrote %s: %zu params (%d layers, %d heads, %d channels, context %d, vocab %d), "
         "matrices %s, %zu bytes, from %s %s in %.2f s",
         dst, m.n_params, c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->vocab_size,
         model_matrix_dtypes(&m, dts, sizeof dts),
         bytes, m.source_kind, src, now_seconds() - t0);
    rc = EXIT_OK;
done:
    for (size_t i = 0; i < n_inputs; i++) free(inputs[i]);
    if (owned) tokenizer_free(tok);
    model_free(&m);
    return rc;
}

int run_inspect(int argc, char **argv) {
    static const struct option longs[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
        if (c == 'h') {
            if (out_write(inspect_usage, strlen(inspect_usage)) || out_flush()) return EXIT_RUNTIME;
            return EXIT_OK;
        }
        return usage_error("inspect", "unknown option '%s'", argv[optind - 1]);
    }
    if (argc - optind < 1) return usage_error("inspect", "needs a FILE");
    if (argc - optind > 1) return usage_error("inspect", "unexpected argument '%s'", argv[optind + 1]);
    const char *path = argv[optind];
    ModelInfo info;
    GptError err = {{0}};
    if (model_inspect(path, &info, &err) != 0) return report_error(&err);
    const GPT2Config *c = &info.config;
    size_t HS = (size_t)(c->n_embd / c->n_head);
    size_t per_token = kvcache_bytes_per_token(c, DTYPE_F32);
    int bad = out_printf("file:        %s\n", info.file);
    if (info.version)
        bad |= out_printf("format:      %s version %u, %llu bytes\n", info.kind, info.version,
                          (unsigned long long)info.file_bytes);
    else
        bad |= out_printf("format:      %s, %llu bytes\n", info.kind, (unsigned long long)info.file_bytes);
    bad |= out_printf("config:      n_layer %d, n_head %d, n_embd %d, n_ctx %d, vocab_size %d, layer_norm_epsilon %g\n",
                      c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->vocab_size, (double)c->ln_eps);
    // the rest of GPT2Config, as transformers names it (docs/model-format.md, "Configurations")
    bad |= out_printf("             n_inner %zu, activation_function %s, scale_attn_weights %s, "
                      "scale_attn_by_inverse_layer_idx %s, tie_word_embeddings %s\n",
                      gpt2_mlp_width(c), activation_name(c->activation), c->attn_unscaled ? "false" : "true",
                      c->attn_by_layer ? "true" : "false", c->untied_output ? "false" : "true");
    bad |= out_printf("parameters:  %zu; %zu bytes as loaded, %zu bytes read per decoded token\n", info.n_params,
                      info.weight_bytes, info.decode_bytes);
    bad |= out_printf("matrices:    %s (norms, biases and wpe F32)\n", info.matrices);
    if (info.n_tokens)
        bad |= out_printf("tokenizer:   %zu tokens, %zu merges, stored in the file\n", info.n_tokens, info.n_merges);
    else
        bad |= out_printf("tokenizer:   not in the file (--tokenizer, the files beside it, or the shipped GPT-2 files)\n");
    bad |= out_printf("kv cache:    %zu bytes per token (2 x %d layers x %d heads x %zu dims x 4 bytes), "
                      "%zu bytes for the full context of %d; half that with --kv-type f16\n",
                      per_token, c->n_layer, c->n_head, HS, per_token * (size_t)c->n_ctx, c->n_ctx);
    bad |= out_printf("tensors:     %zu, data from byte %zu\n", info.n_tensors, info.data_offset);
    // one convention for every format: the shape as Hugging Face's GPT-2
    // gives it; how the bytes lie is a tag, never a second order of dims
    // (llm.c's tensors are its own, a layer stack each, named its way)
    if (!strcmp(info.kind, "llm.c"))
        bad |= out_printf("shapes:      llm.c's own, every layer in one tensor: a matrix [L, out, in]\n");
    else
        bad |= out_printf("shapes:      Hugging Face's, a Conv1D matrix [in, out]; \"rows out\": stored one row per "
                          "output (the transpose)\n");
    bad |= out_printf("  %-28s %-5s %-24s %12s %12s\n", "name", "dtype", "shape", "offset", "bytes");
    for (size_t i = 0; i < info.n_tensors && !bad; i++) {
        const TensorInfo *t = &info.tensors[i];
        char shape[128];
        shape_string(shape, sizeof shape, t->dims, t->ndim, ", ");
        if (t->transposed) strncat(shape, " rows out", sizeof shape - strlen(shape) - 1);
        bad |= out_printf("  %-28s %-5s %-24s %12llu %12llu\n", t->name, t->dtype, shape,
                          (unsigned long long)t->offset, (unsigned long long)t->nbytes);
    }
    model_info_free(&info);
    return bad || out_flush() ? EXIT_RUNTIME : EXIT_OK;
}
