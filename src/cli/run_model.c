/*
 * run_model.c - `gpt` and `gpt --score`: the prompt rules, the generation
 * loop as a client of the engine (one sequence), streaming the text, and the
 * --stats and --json reports.
 */
#include <cJSON.h>
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "generate.h"
#include "kvcache.h"

// What a run did, for --stats and --json.
typedef struct {
    size_t prompt_tokens, generated;
    size_t prefill_tokens, decode_tokens;
    double prefill_seconds, decode_seconds;
    size_t seq_tokens;        // positions held in the cache at the end
    size_t kv_allocated;
    uint64_t seed;
    int have_seed;            // sampling happened (scoring has no seed)
} RunStats;

static size_t peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024;  // Linux reports KiB
}

static double rate(size_t n, double seconds) { return seconds > 0 ? (double)n / seconds : 0.0; }

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

static cJSON *stats_json(const Model *m, const RunStats *r) {
    const GPT2Config *c = &m->config;
    size_t per_token = kvcache_bytes_per_token(c, DTYPE_F32);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "n_layer", c->n_layer);
    cJSON_AddNumberToObject(s, "n_head", c->n_head);
    cJSON_AddNumberToObject(s, "n_embd", c->n_embd);
    cJSON_AddNumberToObject(s, "n_ctx", c->n_ctx);
    cJSON_AddNumberToObject(s, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(s, "n_params", (double)m->n_params);
    cJSON_AddNumberToObject(s, "weight_bytes", (double)m->weight_bytes);
    cJSON_AddNumberToObject(s, "load_seconds", m->load_seconds);
    cJSON_AddNumberToObject(s, "kv_bytes_per_token", (double)per_token);
    cJSON_AddNumberToObject(s, "kv_bytes_sequence", (double)(per_token * r->seq_tokens));
    cJSON_AddNumberToObject(s, "seq_tokens", (double)r->seq_tokens);
    cJSON_AddNumberToObject(s, "kv_bytes_full_context", (double)(per_token * (size_t)c->n_ctx));
    cJSON_AddNumberToObject(s, "kv_bytes_allocated", (double)r->kv_allocated);
    cJSON_AddNumberToObject(s, "prefill_tokens", (double)r->prefill_tokens);
    cJSON_AddNumberToObject(s, "prefill_tok_s", rate(r->prefill_tokens, r->prefill_seconds));
    cJSON_AddNumberToObject(s, "decode_tokens", (double)r->decode_tokens);
    cJSON_AddNumberToObject(s, "decode_tok_s", rate(r->decode_tokens, r->decode_seconds));
    cJSON_AddNumberToObject(s, "peak_rss_bytes", (double)peak_rss_bytes());
    if (r->have_seed) {
        // A 64-bit seed does not fit a JSON number exactly: write it as digits.
        char digits[32];
        snprintf(digits, sizeof digits, "%llu", (unsigned long long)r->seed);
        cJSON_AddItemToObject(s, "seed", cJSON_CreateRaw(digits));
    } else {
        cJSON_AddNullToObject(s, "seed");
    }
    return s;
}

static void print_stats(const Model *m, const RunStats *r, long threads) {
    const GPT2Config *c = &m->config;
    size_t HS = (size_t)(c->n_embd / c->n_head);
    size_t per_token = kvcache_bytes_per_token(c, DTYPE_F32);
    FILE *e = stderr;
    fprintf(e, "model:      %s, %d layers, %d heads x %zu dims, %d channels, context %d, vocab %d\n",
            m->source_kind, c->n_layer, c->n_head, HS, c->n_embd, c->n_ctx, c->vocab_size);
    fprintf(e, "weights:    %zu params, %zu bytes (%.2f MiB) float32, loaded in %.3f s\n",
            m->n_params, m->weight_bytes, mib(m->weight_bytes), m->load_seconds);
    fprintf(e, "kv cache:   2 x %d layers x %d heads x %zu dims x 4 bytes = %zu B/token (%.2f KiB)\n",
            c->n_layer, c->n_head, HS, per_token, (double)per_token / 1024.0);
    fprintf(e, "kv held:    %zu tokens x %zu B = %zu B (%.2f MiB)\n", r->seq_tokens, per_token,
            per_token * r->seq_tokens, mib(per_token * r->seq_tokens));
    fprintf(e, "kv full:    %d tokens x %zu B = %zu B (%.2f MiB)\n", c->n_ctx, per_token,
            per_token * (size_t)c->n_ctx, mib(per_token * (size_t)c->n_ctx));
    fprintf(e, "kv alloc:   %zu B (%.2f MiB)\n", r->kv_allocated, mib(r->kv_allocated));
    fprintf(e, "prefill:    %zu tokens in %.3f s = %.1f tok/s\n", r->prefill_tokens,
            r->prefill_seconds, rate(r->prefill_tokens, r->prefill_seconds));
    fprintf(e, "decode:     %zu tokens in %.3f s = %.1f tok/s\n", r->decode_tokens,
            r->decode_seconds, rate(r->decode_tokens, r->decode_seconds));
    fprintf(e, "threads:    %ld\n", threads);
    fprintf(e, "peak rss:   %zu B (%.1f MiB)\n", peak_rss_bytes(), mib(peak_rss_bytes()));
    if (r->have_seed)
        fprintf(e, "seed:       %llu\n", (unsigned long long)r->seed);
}

static cJSON *ids_json(const int32_t *ids, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

static int print_json(cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    if (!s) return EXIT_RUNTIME;
    printf("%s\n", s);
    free(s);
    return EXIT_OK;
}

// ----------------------------------------------------------------------------
// --score

static int run_score(const Options *o, const Model *m, const int32_t *ids, size_t n) {
    GptError err = {{0}};
    RunStats r = {0};
    r.prompt_tokens = n;
    double *logprobs = calloc(n, sizeof *logprobs);  // n - 1 used
    if (!logprobs) {
        gpt_error(&err, "out of memory");
        return report_error(&err);
    }
    if (score_tokens(m, ids, n, DTYPE_F32, NULL, logprobs, &r.prefill_seconds, &r.kv_allocated, &err) != 0) {
        free(logprobs);
        return report_error(&err);
    }
    r.prefill_tokens = n;
    r.seq_tokens = n;
    double sum = 0.0;
    for (size_t i = 0; i + 1 < n; i++) sum += logprobs[i];
    double ppl = n > 1 ? exp(-sum / (double)(n - 1)) : NAN;
    int rc;
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "tokens", ids_json(ids, n));
        cJSON *lp = cJSON_CreateArray();
        for (size_t i = 0; i + 1 < n; i++) cJSON_AddItemToArray(lp, cJSON_CreateNumber(logprobs[i]));
        cJSON_AddItemToObject(root, "logprobs", lp);
        cJSON_AddNumberToObject(root, "sum", sum);
        if (n > 1)
            cJSON_AddNumberToObject(root, "perplexity", ppl);
        else
            cJSON_AddNullToObject(root, "perplexity");
        cJSON_AddItemToObject(root, "stats", stats_json(m, &r));
        rc = print_json(root);
        cJSON_Delete(root);
    } else {
        if (n > 1)
            printf("tokens %zu  logprob_sum %.6f  perplexity %.4f\n", n, sum, ppl);
        else
            printf("tokens %zu  logprob_sum 0  perplexity n/a (one token has nothing to predict)\n", n);
        rc = EXIT_OK;
    }
    if (o->stats) print_stats(m, &r, o->threads);
    free(logprobs);
    return rc;
}

// ----------------------------------------------------------------------------
// generation

static int run_generate(const Options *o, const Model *m, Tokenizer *tok, const char *prompt,
                        size_t prompt_len, const int32_t *ids, size_t n_prompt) {
    GptError err = {{0}};
    Engine engine;
    Sequence seq;
    char *text = NULL;  // the generated text, for --json
    size_t text_len = 0, text_cap = 0;
    int rc = EXIT_RUNTIME;
    RunStats r = {0};

    GenParams gp = {.sampling = o->sampling, .max_new = (size_t)o->max_tokens,
                    .ignore_eos = o->ignore_eos};
    gp.sampling.seed = o->have_seed ? o->sampling.seed : sampler_random_seed();
    r.seed = gp.sampling.seed;
    r.have_seed = 1;
    r.prompt_tokens = n_prompt;

    // One sequence; the whole prompt in one step.
    if (engine_init(&engine, m, tok, 1, n_prompt, DTYPE_F32, NULL, &err) != 0) return report_error(&err);
    if (sequence_init(&seq, &engine, ids, n_prompt, &gp, &err) != 0) {
        report_error(&err);
        goto done;
    }
    r.kv_allocated = kvcache_bytes_allocated(&seq.cache);

    if (o->echo && !o->json) {
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
    }
    Sequence *batch[1] = {&seq};
    while (!seq.stop) {
        if (engine_step(&engine, batch, 1, &err) != 0) {
            report_error(&err);
            goto done;
        }
        if (seq.stop == STOP_ERROR) {
            report_error(&seq.error);
            goto done;
        }
        if (o->json) {
            if (text_len + seq.out_len + 1 > text_cap) {
                size_t cap = (text_len + seq.out_len + 1) * 2;
                char *bigger = realloc(text, cap);
                if (!bigger) goto done;
                text = bigger;
                text_cap = cap;
            }
            memcpy(text + text_len, seq.out, seq.out_len);
            text_len += seq.out_len;
        } else if (seq.out_len) {
            fwrite(seq.out, 1, seq.out_len, stdout);
            fflush(stdout);
        }
        if (seq.stop == STOP_CONTEXT)
            fprintf(stderr, "gpt: stopped at the end of the context (%d positions)\n", m->config.n_ctx);
    }
    r.generated = seq.n_generated;
    r.prefill_tokens = seq.prefill_tokens;
    r.prefill_seconds = seq.prefill_seconds;
    r.decode_tokens = seq.decode_tokens;
    r.decode_seconds = seq.decode_seconds;
    r.seq_tokens = seq.cache.n_tokens;
    const char *stop_reason = stop_reason_name(seq.stop);
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "prompt_tokens", ids_json(ids, n_prompt));
        cJSON_AddItemToObject(root, "tokens", ids_json(seq.tokens + n_prompt, r.generated));
        if (text) text[text_len] = '\0';
        cJSON_AddStringToObject(root, "text", text ? text : "");
        cJSON_AddStringToObject(root, "stop_reason", stop_reason);
        cJSON_AddItemToObject(root, "stats", stats_json(m, &r));
        rc = print_json(root);
        cJSON_Delete(root);
    } else {
        rc = EXIT_OK;
    }
    if (fflush(stdout) != 0) rc = EXIT_RUNTIME;
    if (o->stats) {
        fprintf(stderr, "stop:       %s after %zu new tokens\n", stop_reason, r.generated);
        print_stats(m, &r, o->threads);
    }
done:
    free(text);
    sequence_free(&seq);
    engine_free(&engine);
    return rc;
}

// ----------------------------------------------------------------------------
// the prompt

int run_model(const Options *o) {
    Model m = {0};
    const char *model_path;
    int rc = load_model(o->model_path, o->weight_dtype, &m, &model_path);
    if (rc != EXIT_OK) return rc;
    rc = EXIT_RUNTIME;
    GptError err = {{0}};
    int owned = 0;
    char *stdin_text = NULL;
    int32_t *ids = NULL;
    Tokenizer *tok = open_tokenizer(o->tokenizer_path, &m, model_path, &owned, &err);
    if (!tok) {
        report_error(&err);
        goto done;
    }
    if ((size_t)m.config.vocab_size != tokenizer_vocab_size(tok)) {
        fprintf(stderr, "gpt: %s: the model's vocabulary has %d tokens, the tokenizer %zu\n",
                model_path, m.config.vocab_size, tokenizer_vocab_size(tok));
        goto done;
    }
    const char *prompt = o->prompt;
    size_t prompt_len = prompt ? strlen(prompt) : 0;
    if (!prompt) {
        if (isatty(STDIN_FILENO))
            fprintf(stderr, "gpt: reading the prompt from stdin; end it with Ctrl-D (or pass -p)\n");
        if (file_read_stream(stdin, "stdin", &stdin_text, &prompt_len, &err) != 0) {
            report_error(&err);
            goto done;
        }
        prompt = stdin_text;
    }
    size_t n;
    if (tokenizer_encode(tok, prompt, prompt_len, o->special, &ids, &n, &err) != 0) {
        report_error(&err);
        goto done;
    }
    if (n == 0 && !o->score) {
        // GPT-2 was trained with <|endoftext|> between documents: an empty
        // prompt starts a new one.
        int32_t eot = tokenizer_eot_id(tok);
        if (eot < 0) {
            fprintf(stderr, "gpt: empty prompt and the tokenizer has no <|endoftext|>\n");
            goto done;
        }
        free(ids);
        ids = malloc(sizeof *ids);
        if (!ids) goto done;
        ids[0] = eot;
        n = 1;
    }
    if (n == 0) {
        fprintf(stderr, "gpt: --score: the text is empty\n");
        goto done;
    }
    if (n > (size_t)m.config.n_ctx) {
        fprintf(stderr, "gpt: the %s is %zu tokens; the model's context holds %d\n",
                o->score ? "text" : "prompt", n, m.config.n_ctx);
        goto done;
    }
    openblas_set_num_threads((int)o->threads);
    rc = o->score ? run_score(o, &m, ids, n)
                  : run_generate(o, &m, tok, prompt, prompt_len, ids, n);
done:
    free(ids);
    free(stdin_text);
    if (owned) tokenizer_free(tok);
    model_free(&m);
    return rc;
}
