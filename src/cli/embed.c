/*
 * embed.c - gpt embed: a vector per text, one JSON line each on stdout, in
 * the input's order: each line of stdin a text (with --jsonl a JSON object
 * {"input": TEXT or [ids], "normalize": BOOL}), or -p TEXT alone. The
 * vector is POST /v1/embeddings' (embed.h): the final hidden states
 * (after ln_f) pooled by --pooling, of unit length unless --no-normalize,
 * each text run alone: the same bits whatever else the input holds.
 *
 * --hidden-states LAYERS adds the residual stream of each chosen block,
 * before and after it, and the final hidden states, under TransformerLens'
 * names (blocks.L.hook_resid_pre, blocks.L.hook_resid_post,
 * ln_final.hook_normalized): a vector per token.
 *
 * A bad line gets {"index", "error"} in its place and the others run; the
 * exit status is then 1.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "embed.h"

// --help, with the shared options' lines (help_from_template)
static const char embed_usage[] =
    "usage: gpt embed [options]      a vector per text: each line of stdin (or -p TEXT)\n"
    "                                becomes one JSON line {\"index\", \"tokens\", \"embedding\"}\n"
    "@shared model tokenizer dtype q8-act lora kv-type threads tune\n"
    "  -q, --quiet             no notes on stderr (the demo model's line); errors still\n"
    "  -p, --prompt TEXT       embed TEXT alone (default: each line of stdin)\n"
    "      --jsonl             each line of stdin is a JSON object: \"input\" (a text or an\n"
    "                          array of token ids) and \"normalize\" (true or false)\n"
    "      --pooling P         the tokens' final hidden states into one vector: mean (their\n"
    "                          average; the default) or last (the last token's, the only\n"
    "                          one that saw the whole text)\n"
    "      --no-normalize      the pooled vector as it is (default: scaled to unit length,\n"
    "                          as OpenAI's and Ollama's embeddings are)\n"
    "      --hidden-states L   also \"hidden_states\": the residual stream before and after\n"
    "                          each block of L (layers from 0, comma-separated, or all) and\n"
    "                          the final hidden states, a vector per token, under\n"
    "                          TransformerLens' names (blocks.L.hook_resid_pre,\n"
    "                          blocks.L.hook_resid_post, ln_final.hook_normalized)\n"
    "                          (default: none)\n"
    "      --parallel N        refused: each text runs alone\n"
    "      --kv-budget SIZE    refused: each text has a cache of its own, of its length\n"
    "  -h, --help              this help\n"
    "The vector is gpt serve's /v1/embeddings' for the same text and --pooling, bit for\n"
    "bit. A line that cannot be embedded (empty, longer than the context, bad JSON) gets\n"
    "{\"index\", \"error\"}; the others run. Exit codes: 0 success, 1 a bad line or a load\n"
    "or runtime error, 2 usage error.\n";

enum { O_JSONL = 256, O_POOLING, O_NO_NORMALIZE, O_HIDDEN_STATES };
_Static_assert((int)O_HIDDEN_STATES < (int)OPT_SHARED, "gpt embed's option codes run into the shared ones");

static const struct option EMBED_OPTIONS[] = {{"help", no_argument, 0, 'h'},
                                              {"prompt", required_argument, 0, 'p'},
                                              {"jsonl", no_argument, 0, O_JSONL},
                                              {"pooling", required_argument, 0, O_POOLING},
                                              {"no-normalize", no_argument, 0, O_NO_NORMALIZE},
                                              {"hidden-states", required_argument, 0, O_HIDDEN_STATES},
                                              {0, 0, 0, 0}};

typedef struct {
    SharedOptions shared;
    const char *prompt;         // -p, or NULL: stdin
    int jsonl, normalize;
    Pooling pooling;
    const char *hidden_states;  // --hidden-states as given, or NULL
    unsigned char *layers;      // (L) the layers --hidden-states chose
    Session ss;
    EmbedConfig how;
    float *hidden, *residual, *vector;  // (n_ctx, C), ((L + 1), n_ctx, C) with --hidden-states, (C)
} Embed;

// --hidden-states's value against a model of L layers into e->layers: 0, or the usage error's code.
static int read_layers(Embed *e, size_t L) {
    const char *v = e->hidden_states;
    if (!strcmp(v, "all")) {
        memset(e->layers, 1, L);
        return 0;
    }
    for (const char *p = v;;) {
        char *end;
        long l = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
        if (l < 0 || (size_t)l >= L || (*end != ',' && *end))
            return usage_error("embed", "--hidden-states %s: must be all, or layers from 0 to %zu separated by "
                               "commas (the model has %zu)", v, L - 1, L);
        e->layers[l] = 1;
        if (!*end) return 0;
        p = end + 1;
    }
}

// rows (n, C) as a JSON array of arrays
static cJSON *rows_json(const float *x, size_t n, size_t C) {
    cJSON *a = cJSON_CreateArray();
    for (size_t t = 0; a && t < n; t++) cJSON_AddItemToArray(a, floats_json(x + t * C, C));
    return a;
}

// One text's line: 0, or -1 with *why (a line's error; err's message).
static int embed_one(Embed *e, cJSON *out, const int32_t *ids, size_t n, int normalize, GptError *err) {
    const GPT2Config *cfg = &e->ss.model.config;
    size_t C = (size_t)cfg->n_embd, L = (size_t)cfg->n_layer;
    if (n == 0) return gpt_error(err, "the input is empty: it has no tokens to embed");
    if (n > (size_t)cfg->n_ctx)
        return gpt_error(err, "the input is %zu tokens; the model's context holds %d", n, cfg->n_ctx);
    if (embed_hidden(&e->how, ids, n, e->hidden, e->hidden_states ? e->residual : NULL, err) != 0) return -1;
    embed_pool(e->vector, e->hidden, n, C, e->pooling, normalize);
    cJSON_AddNumberToObject(out, "tokens", (double)n);
    cJSON_AddItemToObject(out, "embedding", floats_json(e->vector, C));
    if (!e->hidden_states) return 0;
    cJSON *h = cJSON_AddObjectToObject(out, "hidden_states");
    char name[64];
    for (size_t l = 0; l < L; l++) {
        if (!e->layers[l]) continue;
        // k = l is the stream before block l, k = l + 1 after it (embed.h); rows (n, C) at k * n * C
        snprintf(name, sizeof name, "blocks.%zu.hook_resid_pre", l);
        cJSON_AddItemToObject(h, name, rows_json(e->residual + l * n * C, n, C));
        snprintf(name, sizeof name, "blocks.%zu.hook_resid_post", l);
        cJSON_AddItemToObject(h, name, rows_json(e->residual + (l + 1) * n * C, n, C));
    }
    cJSON_AddItemToObject(h, "ln_final.hook_normalized", rows_json(e->hidden, n, C));
    return 0;
}

// One input line (len bytes, no newline) as line `index`'s JSON; 1 if it failed.
static int embed_line(Embed *e, size_t index, const char *line, size_t len) {
    GptError err = {{0}};
    int32_t *ids = NULL;
    size_t n = 0;
    int normalize = e->normalize, rc = 0;
    cJSON *out = cJSON_CreateObject(), *o = NULL;
    cJSON_AddNumberToObject(out, "index", (double)index);
    if (!e->jsonl) {
        rc = tokenizer_encode(e->ss.tok, line, len, 0, &ids, &n, &err);
    } else if (!(o = cJSON_ParseWithLength(line, len)) || !cJSON_IsObject(o)) {
        rc = gpt_error(&err, "--jsonl: the line is not a JSON object");
    } else {
        const cJSON *input = NULL;
        for (const cJSON *f = o->child; f && !rc; f = f->next) {
            if (!strcmp(f->string, "input")) input = f;
            else if (!strcmp(f->string, "normalize") && cJSON_IsBool(f)) normalize = cJSON_IsTrue(f);
            else if (!strcmp(f->string, "normalize")) rc = gpt_error(&err, "normalize must be true or false");
            else rc = gpt_error(&err, "unknown field \"%.40s\" (gpt embed knows input, normalize)", f->string);
        }
        char why[160];
        if (rc) {
        } else if (cJSON_IsString(input)) {
            rc = tokenizer_encode(e->ss.tok, input->valuestring, strlen(input->valuestring), 0, &ids, &n, &err);
        } else if (cJSON_IsArray(input)) {
            if (json_token_ids(input, tokenizer_vocab_size(e->ss.tok), "input", &ids, &n, why, sizeof why) != 0)
                rc = gpt_error(&err, "%s", why);
        } else {
            rc = gpt_error(&err, "input must be a text or an array of token ids");
        }
    }
    if (!rc) rc = embed_one(e, out, ids, n, normalize, &err);
    if (rc) {
        cJSON_Delete(out);
        out = cJSON_CreateObject();
        cJSON_AddNumberToObject(out, "index", (double)index);
        cJSON_AddStringToObject(out, "error", err.msg);
    }
    char *text = cJSON_PrintUnformatted(out);
    cJSON_Delete(out);
    int bad = !text || out_write(text, strlen(text)) || out_write("\n", 1);
    free(text);
    free(ids);
    cJSON_Delete(o);
    return rc || bad;
}

static int parse_embed_options(int argc, char **argv, Embed *e, int *done) {
    OptionParser p;
    options_begin(&p, "embed", EMBED_OPTIONS, NULL);
    *done = 1;
    e->normalize = 1;
    e->pooling = POOLING_MEAN;
    for (int c; (c = options_next(&p, argc, argv)) != -1;) {
        switch (c) {
        case OPTION_FAILED: return EXIT_USAGE;
        case 'h': {
            char *help = help_from_template(embed_usage, 0);
            int rc = !help || out_write(help, strlen(help)) || out_flush() ? EXIT_RUNTIME : EXIT_OK;
            if (!help) runtime_error(NULL, "out of memory");
            free(help);
            return rc;
        }
        case 'p': e->prompt = p.value; break;
        case O_JSONL: e->jsonl = 1; break;
        case O_NO_NORMALIZE: e->normalize = 0; break;
        case O_HIDDEN_STATES: e->hidden_states = p.value; break;
        case O_POOLING:
            if (pooling_from_name(p.value, &e->pooling) != 0)
                return usage_error("embed", "--pooling %s: must be mean or last", p.value);
            break;
        }
    }
    if (e->prompt && e->jsonl) return usage_error("embed", "-p and --jsonl: -p is one text, --jsonl reads stdin");
    if (p.given[OPT_PARALLEL] || p.given[OPT_KV_BUDGET])
        return usage_error("embed", "%s: gpt embed runs one text at a time",
                           p.given[OPT_PARALLEL] ? p.given[OPT_PARALLEL] : p.given[OPT_KV_BUDGET]);
    e->shared = p.shared;
    *done = 0;
    return 0;
}

int run_embed(int argc, char **argv) {
    Embed e = {0};
    int done, rc = parse_embed_options(argc, argv, &e, &done);
    if (done) return rc;
    if ((rc = session_open_model(&e.ss, &e.shared.model)) != EXIT_OK) return rc;
    const GPT2Config *cfg = &e.ss.model.config;
    size_t C = (size_t)cfg->n_embd, L = (size_t)cfg->n_layer, T = (size_t)cfg->n_ctx;
    char *line = NULL;
    size_t cap = 0, failed = 0;
    e.how = (EmbedConfig){.model = &e.ss.model, .pool = e.ss.pool, .kv_dtype = e.shared.kv_dtype, .plan = &e.ss.plan};
    e.layers = calloc(L, 1);
    e.hidden = malloc(T * C * sizeof *e.hidden);
    e.vector = malloc(C * sizeof *e.vector);
    e.residual = e.hidden_states ? malloc((L + 1) * T * C * sizeof *e.residual) : NULL;
    rc = EXIT_RUNTIME;
    if (!e.layers || !e.hidden || !e.vector || (e.hidden_states && !e.residual)) {
        runtime_error("embed", "out of memory for a context's hidden states");
        goto done;
    }
    if (e.hidden_states && (rc = read_layers(&e, L)) != 0) goto done;
    rc = EXIT_RUNTIME;
    if (e.prompt) {
        failed = (size_t)embed_line(&e, 0, e.prompt, strlen(e.prompt));
    } else {
        ssize_t n;
        for (size_t index = 0; (n = getline(&line, &cap, stdin)) >= 0; index++) {
            size_t len = (size_t)n;
            if (len && line[len - 1] == '\n') len--;
            if (len && line[len - 1] == '\r') len--;
            failed += (size_t)embed_line(&e, index, line, len);
        }
        if (ferror(stdin)) {
            runtime_error("embed", "stdin: cannot read");
            goto done;
        }
    }
    rc = out_flush() == 0 && !failed ? EXIT_OK : EXIT_RUNTIME;
done:
    free(line);
    free(e.layers);
    free(e.hidden);
    free(e.vector);
    free(e.residual);
    session_close(&e.ss);
    return rc;
}
