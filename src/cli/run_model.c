/*
 * run_model.c - `gpt` and `gpt --score`: generation as a client of the
 * engine (one sequence, checked against a draft's guesses when speculating),
 * streaming the text, scoring, and the --stats and --json reports.
 * --completions N and --choice run several sequences: as one request of
 * --batch's kind, through the scheduler (batch.c); only their reports are
 * here.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/blas.h"
#include "cli.h"
#include "front/chat.h"
#include "base/fileio.h"
#include "engine.h"
#include "score.h"
#include "base/grow.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "kernels/matmul.h"
#include "speculate.h"
#include "progress.h"
#include "base/utf8.h"

// ----------------------------------------------------------------------------
// reports

static double rate(size_t n, double seconds) { return seconds > 0 ? (double)n / seconds : 0.0; }

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

// What a run did, for --stats and --json.
// The output's grammar (--grammar, --json-schema, --json-object, --regex)
// and the vocabulary's trie (NULL, NULL: none).
typedef struct {
    Grammar *grammar;
    GrammarVocab *vocab;
} RunGrammar;

typedef struct {
    const char *model_file;   // the model that ran, as found (-m, $GPT_MODEL or the search)
    size_t prompt_tokens, generated;
    size_t prefill_tokens, decode_tokens;
    double prefill_seconds, decode_seconds;
    size_t seq_tokens;        // positions held in the cache at the end
    size_t kv_allocated;
    DType kv_dtype;           // the cache's elements
    uint64_t seed;
    int have_seed;            // sampling happened (scoring has no seed)
    // speculative decoding
    const char *draft;        // "model", "lookup", or NULL when off
    const char *draft_file;   // the draft model's file
    const char *draft_dtype;  // its matrices (model_matrix_dtypes, in draft_dtype_buf)
    char draft_dtype_buf[32];
    size_t lookup_n, draft_tokens;
    size_t verify_steps, proposed, accepted;
    size_t decode_forwards;   // model forward calls while decoding
    double draft_seconds;
    const char *blas;         // --blas: OpenBLAS's description, else NULL
    int context_shift;        // --context-shift
    size_t shifts, shift_tokens;  // the shifts, and the positions they recomputed
    const TuneReport *tune;   // the matmul variants the run's products ran (tune.h)
    ThreadPoolStats decode_joins;  // the thread pool's runs in the decode steps (threads.h), with 2+ threads
} RunStats;

// How the matmul variants were chosen and which each product ran.
static cJSON *tune_json(const TuneReport *t) {
    cJSON *j = cJSON_CreateObject(), *v = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "source", t->source);  // "measured", "wisdom", "default"
    cJSON_AddNumberToObject(j, "seconds", t->seconds);
    if (t->path[0]) cJSON_AddStringToObject(j, "wisdom", t->path);
    if (t->note[0]) cJSON_AddStringToObject(j, "note", t->note);
    for (int i = 0; i < t->n_products; i++) {  // "qkv f32": "2x3"
        char key[64];
        snprintf(key, sizeof key, "%s %s", t->product[i].name, dtype_name(t->product[i].dtype));
        cJSON_AddStringToObject(v, key, matmul_variant_name(t->isa, t->product[i].variant));
    }
    cJSON_AddItemToObject(j, "variants", v);
    return j;
}

static cJSON *stats_json(const Model *m, const RunStats *r) {
    const GPT2Config *c = &m->config;
    size_t per_token = kvcache_bytes_per_token(c, r->kv_dtype);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "model", r->model_file);
    cJSON_AddNumberToObject(s, "n_layer", c->n_layer);
    cJSON_AddNumberToObject(s, "n_head", c->n_head);
    cJSON_AddNumberToObject(s, "n_embd", c->n_embd);
    cJSON_AddNumberToObject(s, "n_ctx", c->n_ctx);
    cJSON_AddNumberToObject(s, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(s, "n_params", (double)m->n_params);
    char dts[32];
    cJSON_AddStringToObject(s, "weight_dtype", model_matrix_dtypes(m, dts, sizeof dts));
    cJSON_AddNumberToObject(s, "weight_bytes", (double)m->weight_bytes);
    cJSON_AddNumberToObject(s, "decode_bytes_per_token", (double)m->decode_bytes);
    cJSON_AddNumberToObject(s, "load_seconds", m->load_seconds);
    cJSON_AddStringToObject(s, "kv_type", dtype_name(r->kv_dtype));   // --kv-type
    cJSON_AddStringToObject(s, "kv_dtype", dtype_name(r->kv_dtype));  // its old name, until 0.2
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
    cJSON_AddStringToObject(s, "kernels", matmul_isa_in_use());
    if (r->decode_joins.runs) {  // --stats' "joins:" line
        const ThreadPoolStats *j = &r->decode_joins;
        cJSON *d = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "runs", (double)j->runs);
        cJSON_AddNumberToObject(d, "late_runs", (double)j->late_runs);
        cJSON_AddNumberToObject(d, "wait_seconds", j->wait_seconds);
        cJSON_AddNumberToObject(d, "parts", (double)j->parts);
        cJSON_AddNumberToObject(d, "worker_parts", (double)(j->parts - j->caller_parts));
        cJSON_AddNumberToObject(d, "solo_runs", (double)j->solo_runs);
        cJSON_AddItemToObject(s, "decode_joins", d);
    }
    if (r->have_seed) cJSON_AddItemToObject(s, "seed", seed_json(r->seed));
    else cJSON_AddNullToObject(s, "seed");
    if (r->blas) cJSON_AddStringToObject(s, "blas", r->blas);
    if (r->tune) cJSON_AddItemToObject(s, "tuning", tune_json(r->tune));
    if (r->context_shift) {
        cJSON_AddNumberToObject(s, "context_shifts", (double)r->shifts);
        cJSON_AddNumberToObject(s, "context_shift_tokens", (double)r->shift_tokens);
    }
    if (r->draft) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "draft", r->draft);
        if (r->draft_file) cJSON_AddStringToObject(d, "draft_model", r->draft_file);
        if (r->draft_dtype) cJSON_AddStringToObject(d, "draft_dtype", r->draft_dtype);
        if (r->lookup_n) cJSON_AddNumberToObject(d, "lookup_n", (double)r->lookup_n);
        cJSON_AddNumberToObject(d, "draft_tokens", (double)r->draft_tokens);
        cJSON_AddNumberToObject(d, "proposed", (double)r->proposed);
        cJSON_AddNumberToObject(d, "accepted", (double)r->accepted);
        cJSON_AddNumberToObject(d, "acceptance", r->proposed ? (double)r->accepted / (double)r->proposed : 0.0);
        cJSON_AddNumberToObject(d, "decode_forwards", (double)r->decode_forwards);
        cJSON_AddNumberToObject(d, "tokens_per_forward", rate(r->decode_tokens, (double)r->decode_forwards));
        cJSON_AddNumberToObject(d, "draft_seconds", r->draft_seconds);
        cJSON_AddNumberToObject(d, "draft_share", r->decode_seconds > 0 ? r->draft_seconds / r->decode_seconds : 0.0);
        cJSON_AddItemToObject(s, "speculation", d);
    }
    return s;
}

// --stats-json: the report as one JSON line on stderr (--json's "stats").
static void print_stats_json(const Model *m, const RunStats *r) {
    cJSON *st = stats_json(m, r);
    char *line = st ? cJSON_PrintUnformatted(st) : NULL;
    if (line) fprintf(stderr, "%s\n", line);
    free(line);
    cJSON_Delete(st);
}

// "s" unless n is 1: "1 token", "2 tokens"
static const char *plural(size_t n) { return n == 1 ? "" : "s"; }

static void print_stats(const Model *m, const RunStats *r, long threads) {
    const GPT2Config *c = &m->config;
    size_t HS = (size_t)(c->n_embd / c->n_head);
    size_t per_token = kvcache_bytes_per_token(c, r->kv_dtype);
    FILE *e = stderr;
    char dts[32];
    fprintf(e, "model:      %s (%s, %d layers, %d heads x %zu dims, %d channels, context %d, vocab %d)\n",
            r->model_file, m->source_kind, c->n_layer, c->n_head, HS, c->n_embd, c->n_ctx, c->vocab_size);
    fprintf(e, "weights:    %zu params, %zu bytes (%.2f MiB), matrices %s%s, loaded in %.3f s\n", m->n_params,
            m->weight_bytes, mib(m->weight_bytes), model_matrix_dtypes(m, dts, sizeof dts),
            model_q8_int8(m) ? " with int8 activations" : "", m->load_seconds);
    fprintf(e, "kv cache:   2 x %d layers x %d heads x %zu dims x %zu bytes (%s) = %zu B/token (%.2f KiB)\n",
            c->n_layer, c->n_head, HS, kv_elem_size(r->kv_dtype), dtype_name(r->kv_dtype), per_token,
            (double)per_token / 1024.0);
    fprintf(e, "kv held:    %zu token%s x %zu B = %zu B (%.2f MiB)\n", r->seq_tokens, plural(r->seq_tokens), per_token,
            per_token * r->seq_tokens, mib(per_token * r->seq_tokens));
    fprintf(e, "kv full:    %d tokens x %zu B = %zu B (%.2f MiB)\n", c->n_ctx, per_token,
            per_token * (size_t)c->n_ctx, mib(per_token * (size_t)c->n_ctx));
    fprintf(e, "kv alloc:   %zu B (%.2f MiB)\n", r->kv_allocated, mib(r->kv_allocated));
    fprintf(e, "prefill:    %zu token%s in %.3f s = %.1f tok/s\n", r->prefill_tokens, plural(r->prefill_tokens),
            r->prefill_seconds, rate(r->prefill_tokens, r->prefill_seconds));
    fprintf(e, "decode:     %zu token%s in %.3f s = %.1f tok/s\n", r->decode_tokens, plural(r->decode_tokens),
            r->decode_seconds, rate(r->decode_tokens, r->decode_seconds));
    if (r->context_shift)
        fprintf(e, "shifts:     %zu past the context, %zu positions computed again (in the prefill above)\n",
                r->shifts, r->shift_tokens);
    if (r->draft) {
        if (r->lookup_n)
            fprintf(e, "draft:      prompt lookup of %zu-grams, up to %zu guesses a step\n", r->lookup_n,
                    r->draft_tokens);
        else
            fprintf(e, "draft:      %s (matrices %s), up to %zu guesses a step\n", r->draft_file, r->draft_dtype,
                    r->draft_tokens);
        fprintf(e, "speculate:  %zu of %zu guesses accepted (%.1f%%), %.2f tokens per model step (%zu steps), "
                   "draft %.1f%% of decode time\n",
                r->accepted, r->proposed, r->proposed ? 100.0 * (double)r->accepted / (double)r->proposed : 0.0,
                rate(r->decode_tokens, (double)r->decode_forwards), r->decode_forwards,
                r->decode_seconds > 0 ? 100.0 * r->draft_seconds / r->decode_seconds : 0.0);
    }
    fprintf(e, "threads:    %ld (kernels %s)\n", threads, matmul_isa_in_use());
    const ThreadPoolStats *j = &r->decode_joins;
    if (j->runs && r->decode_tokens)  // where a second thread's time goes
        fprintf(e, "joins:      %.1f a decode token, %.1f%% of them waiting for another thread, %.3f ms a token "
                   "waiting (%.1f%% of decode); %.0f%% of the parts ran on the workers; %.0f%% of the runs solo "
                   "(a probe, or one thread measured faster)\n",
                (double)j->runs / (double)r->decode_tokens, 100.0 * (double)j->late_runs / (double)j->runs,
                1e3 * j->wait_seconds / (double)r->decode_tokens,
                r->decode_seconds > 0 ? 100.0 * j->wait_seconds / r->decode_seconds : 0.0,
                j->parts ? 100.0 * (double)(j->parts - j->caller_parts) / (double)j->parts : 0.0,
                100.0 * (double)j->solo_runs / (double)j->runs);
    if (r->blas) fprintf(e, "blas:       prompts of %d tokens or more through %s\n", BLAS_MIN_ROWS, r->blas);
    if (r->tune) print_tuning(e, r->tune);
    fprintf(e, "peak rss:   %zu B (%.1f MiB)\n", peak_rss_bytes(), mib(peak_rss_bytes()));
    if (r->have_seed)
        fprintf(e, "seed:       %llu\n", (unsigned long long)r->seed);
}

int print_tuning(FILE *e, const TuneReport *t) {
    if (strcmp(t->source, "wisdom") == 0) fprintf(e, "tuning:     from wisdom %s", t->path);
    else if (strcmp(t->source, "measured") == 0)
        fprintf(e, "tuning:     measured in %.3f s%s%s", t->seconds, t->note[0] ? "" : ", saved to ",
                t->note[0] ? "" : t->path);
    else fprintf(e, "tuning:     default variants");
    if (t->note[0]) fprintf(e, " (%s)", t->note);
    fprintf(e, "\n");
    tune_print(t, e);
    return ferror(e) ? -1 : 0;
}

// ----------------------------------------------------------------------------
// --score

// score_tokens' progress, on the Progress line ctx.
static void show_score_progress(void *ctx, size_t scored, size_t total, size_t windows) {
    Progress *p = ctx;
    double seconds = progress_elapsed(p);
    char eta[32];
    progress_update(p, "gpt --score: %zu/%zu tokens scored, %zu window%s, %.0f tok/s%s", scored, total, windows,
                    windows == 1 ? "" : "s", seconds > 0 ? (double)scored / seconds : 0.0,
                    progress_eta(p, total ? (double)scored / (double)total : 0, eta, sizeof eta));
}

static int run_score(const Options *o, const Session *ss, const int32_t *ids, size_t n) {
    const Model *m = &ss->model;
    const Tokenizer *tok = ss->tok;
    GptError err = {{0}};
    RunStats r = {.model_file = ss->model_path, .tune = &ss->tune};
    char blas_name[256];
    if (o->blas) r.blas = blas_describe(blas_name, sizeof blas_name);
    r.kv_dtype = o->kv_dtype;
    r.prompt_tokens = n;
    double *logprobs = calloc(n, sizeof *logprobs);  // n - 1 used
    ScoreStats st;
    if (!logprobs) {
        gpt_error(&err, "out of memory");
        return report_error(&err);
    }
    Progress progress;
    progress_init(&progress, o->progress);
    ScoreProgress shown = {show_score_progress, &progress};
    ScoreConfig how = {.model = m, .stride = (size_t)o->stride, .kv_dtype = o->kv_dtype, .pool = ss->pool,
                       .use_blas = o->blas, .plan = &ss->plan, .progress = &shown};
    int scored = score_tokens(&how, ids, n, logprobs, &st, &err);
    progress_clear(&progress);
    if (scored != 0) {
        free(logprobs);
        return report_error(&err);
    }
    r.prefill_tokens = st.tokens_run;
    r.prefill_seconds = st.seconds;
    r.kv_allocated = st.kv_bytes;
    r.seq_tokens = n < (size_t)m->config.n_ctx ? n : (size_t)m->config.n_ctx;
    double sum = 0.0;
    for (size_t i = 0; i + 1 < n; i++) sum += logprobs[i];
    double ppl = n > 1 ? exp(-sum / (double)(n - 1)) : NAN;
    int rc = EXIT_RUNTIME;
    // A NaN or infinite log-probability means the model's numbers went wrong
    // (a damaged weight, say): refused, as generation refuses such logits.
    if (n > 1 && !isfinite(sum)) {
        size_t bad = 0;
        while (bad + 1 < n && isfinite(logprobs[bad])) bad++;
        runtime_error(NULL, "the model produced a non-finite log-probability (token %zu: %g)", bad + 1,
                      logprobs[bad]);
        goto done;
    }
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "tokens", ids_json(ids, n));
        // lined up with tokens: the first has nothing before it (null)
        cJSON *lp = cJSON_CreateArray();
        cJSON_AddItemToArray(lp, cJSON_CreateNull());
        for (size_t i = 0; i + 1 < n; i++) cJSON_AddItemToArray(lp, exact_json(logprobs[i]));
        cJSON_AddItemToObject(root, "logprobs", lp);
        cJSON_AddItemToObject(root, "sum", exact_json(sum));
        if (n > 1) cJSON_AddItemToObject(root, "perplexity", exact_json(ppl));
        else cJSON_AddNullToObject(root, "perplexity");
        cJSON_AddNumberToObject(root, "windows", (double)st.windows);
        cJSON_AddItemToObject(root, "stats", stats_json(m, &r));
        int bad = out_json_line(root);
        cJSON_Delete(root);
        if (bad) goto done;
    } else {
        if (o->per_token) {
            // token text (escaped: a token may end inside a UTF-8
            // character), TAB, its log-probability (the first token has none)
            for (size_t i = 0; i < n; i++) {
                size_t len;
                const unsigned char *b = tokenizer_token_bytes(tok, ids[i], &len);
                char lp[32];
                if (i) snprintf(lp, sizeof lp, "%.6f", logprobs[i - 1]);
                else snprintf(lp, sizeof lp, "-");
                if (print_escaped(b, len) != 0 || out_printf("\t%s\n", lp) != 0) goto done;
            }
        }
        // n tokens: n - 1 of them predicted (the first has no context); the
        // fields separated by single spaces, for cut -d' ' and awk alike
        if (n == 1) note(o->quiet, "--score: one token has nothing to predict it: no perplexity");
        if (n > 1 ? out_printf("tokens %zu scored %zu logprob_sum %.6f perplexity %.4f\n", n, n - 1, sum, ppl)
                  : out_printf("tokens 1 scored 0 logprob_sum 0 perplexity n/a\n"))
            goto done;
    }
    if (out_flush() != 0) goto done;
    rc = EXIT_OK;
    if (o->stats) print_stats(m, &r, o->threads);
    if (o->stats_json) print_stats_json(m, &r);
done:
    free(logprobs);
    return rc;
}

// ----------------------------------------------------------------------------
// generation

// The draft of a speculative run: the --draft model (or the model itself
// in --draft-dtype) or prompt lookup; NULL model when none.
typedef struct {
    const Model *model;
    const char *file;
} DraftModel;

// --draft-tokens, or the default: what the draft costs per guess against a
// model step. A draft of a third of the model's bytes or less is cheap
// enough for 6 guesses; a heavier one gains most at 3-4, where more rows
// make the check itself compute-bound. Prompt lookup's guesses cost nothing
// but a row each: 4. (The measurements: docs/performance.md.)
static size_t default_guesses(const Options *o, const Model *m, const Model *draft) {
    if (o->draft_tokens) return (size_t)o->draft_tokens;
    if (draft && 3 * draft->decode_bytes <= m->decode_bytes) return 6;
    return 4;
}

// A run of generation: one sequence of its own engine, checked against the
// draft's guesses when speculating.
typedef struct {
    const Options *o;
    const Session *ss;
    const DraftModel *dm;
    const int32_t *ids;        // the prompt's tokens
    size_t n_prompt;
    GenParams gp;
    size_t positions;          // the most the sequence holds
    size_t guesses;            // a speculative step's guesses; 0: not speculating
    Engine engine;
    int engine_up;
    Sequence seq;
    Draft draft;
    char *text;                // the generated text, for --json
    size_t text_len, text_cap;
    size_t printed;            // the next token whose --per-token line is due
    int stopped_by_user;       // SIGINT or SIGTERM ended it
    RunStats r;
    char blas_name[256];
} Generation;

// The sequence's parameters from the options, and what the report says of
// them before the run.
static void generation_params(Generation *g) {
    const Options *o = g->o;
    size_t n_prompt = g->n_prompt;
    g->r = (RunStats){.model_file = g->ss->model_path, .tune = &g->ss->tune};
    if (o->blas) g->r.blas = blas_describe(g->blas_name, sizeof g->blas_name);
    g->gp = (GenParams){.sampling = o->sampling, .max_new = (size_t)o->max_tokens, .ignore_eos = o->ignore_eos,
                        .stops = o->stops, .n_stops = o->n_stops, .logprobs = o->logprobs >= 0,
                        .top_logprobs = o->logprobs > 0 ? (size_t)o->logprobs : 0, .logprobs_from = o->echo ? 1 : 0,
                        .context_shift = o->context_shift, .keep = (size_t)o->keep};
    g->gp.sampling.seed = run_seed(o);
    g->r.seed = g->gp.sampling.seed;
    g->r.have_seed = 1;
    g->r.prompt_tokens = n_prompt;
    g->r.kv_dtype = o->kv_dtype;
    g->positions = sequence_positions(&g->ss->model.config, n_prompt, (size_t)o->max_tokens);
    g->guesses = g->dm->model || o->lookup_n ? default_guesses(o, &g->ss->model, g->dm->model) : 0;
    if (o->context_shift && g->gp.keep > n_prompt) {
        runtime_error(NULL, "--keep %zu: the prompt is %zu tokens; a shift keeps all %zu", g->gp.keep, n_prompt,
                      n_prompt);
        g->gp.keep = n_prompt;
    }
    g->r.context_shift = o->context_shift;
}

// The engine, the sequence in it and the draft: 0, or -1 after reporting.
static int generation_start(Generation *g) {
    const Options *o = g->o;
    const Session *ss = g->ss;
    GptError err = {{0}};
    size_t n_prompt = g->n_prompt;
    // One sequence; the whole prompt in one step; a pool of its size. The
    // echoed prompt's log-probabilities: its rows with logits, SCORE_CHUNK a
    // step; a context shift computes half the context again in one step.
    size_t prompt_logit_rows = g->gp.logprobs && o->echo ? (n_prompt < SCORE_CHUNK ? n_prompt : SCORE_CHUNK) : 0;
    size_t half = (size_t)ss->model.config.n_ctx / 2, step_tokens = o->context_shift && half > n_prompt ? half : n_prompt;
    EngineConfig ec = {.max_seqs = 1, .max_step_tokens = step_tokens, .kv_dtype = o->kv_dtype,
                       .kv_blocks = (g->positions + KV_BLOCK - 1) / KV_BLOCK, .pool = ss->pool, .plan = &ss->plan,
                       .max_verify = g->guesses, .use_blas = o->blas, .prompt_logit_rows = prompt_logit_rows};
    if (engine_init(&g->engine, &ss->model, ss->tok, &ec, &err) != 0) return report_error(&err), -1;
    g->engine_up = 1;
    if (sequence_init(&g->seq, &g->engine, g->ids, n_prompt, &g->gp, &err) != 0 ||
        engine_admit(&g->engine, &g->seq, &err) != 1)
        return report_error(&err), -1;
    if (g->guesses && (g->dm->model ? draft_init_model(&g->draft, g->dm->model, &g->gp.sampling, g->positions,
                                                       g->guesses, ss->pool, &err)
                                    : draft_init_lookup(&g->draft, (size_t)o->lookup_n, g->positions, g->guesses,
                                                        &err)) != 0)
        return report_error(&err), -1;
    KVPoolStats ps = kvpool_stats(g->engine.kv);
    g->r.kv_allocated = ps.n_blocks * ps.block_bytes;
    return 0;
}

// --echo: the prompt on stdout, or (--json) at the start of the text, as
// UTF-8. 0, or -1 after reporting.
static int echo_prompt(Generation *g, const char *prompt, size_t prompt_len) {
    const Options *o = g->o;
    if (o->echo && !o->json && !o->per_token && (out_write(prompt, prompt_len) != 0 || out_flush() != 0)) return -1;
    if (o->echo && o->json) {
        size_t len;
        char *valid = utf8_replace_invalid((const unsigned char *)prompt, prompt_len, &len);
        if (!valid || grow_array(&g->text, &g->text_cap, len + 1, 1) != 0) {
            free(valid);
            runtime_error(NULL, "out of memory for the --json text");
            return -1;
        }
        memcpy(g->text, valid, len);
        g->text_len = len;
        free(valid);
    }
    return 0;
}

// One step of the sequence (speculative or plain), the thread pool's joins
// of a decode step counted. 0, or -1 after reporting.
static int generation_step(Generation *g) {
    GptError err = {{0}};
    Sequence *batch[1] = {&g->seq};
    ThreadPool *pool = g->ss->pool;
    ThreadPoolStats before = threadpool_stats(pool);
    size_t prefilled = g->seq.prefill_tokens;
    if ((g->guesses ? speculate_step(&g->engine, &g->seq, &g->draft, g->guesses, &err)
                    : engine_step(&g->engine, batch, 1, &err)) != 0)
        return report_error(&err), -1;
    if (g->seq.prefill_tokens == prefilled) {  // a decode step: its joins
        ThreadPoolStats after = threadpool_stats(pool);
        ThreadPoolStats *j = &g->r.decode_joins;
        j->runs += after.runs - before.runs;
        j->parts += after.parts - before.parts;
        j->caller_parts += after.caller_parts - before.caller_parts;
        j->late_runs += after.late_runs - before.late_runs;
        j->wait_seconds += after.wait_seconds - before.wait_seconds;
        j->solo_runs += after.solo_runs - before.solo_runs;
    }
    if (g->seq.stop == STOP_ERROR) return report_error(&g->seq.error), -1;
    return 0;
}

// What the last step added: --per-token's lines, the --json text, or the
// text on stdout. 0, or -1 after reporting.
static int show_step(Generation *g) {
    const Sequence *seq = &g->seq;
    if (g->o->per_token) {
        // a line for each token whose log-probability is known (the
        // echoed prompt's first token has none)
        for (; g->printed < seq->n_tokens && (g->printed < seq->lp_from || g->printed - seq->lp_from < seq->n_lp);
             g->printed++)
            if (print_token_logprob(g->ss->tok, seq->tokens[g->printed],
                                    g->printed >= seq->lp_from ? &seq->lp[g->printed - seq->lp_from] : NULL) != 0)
                return -1;
        return out_flush();
    }
    if (g->o->json) {
        if (grow_array(&g->text, &g->text_cap, g->text_len + seq->out_len + 1, 1) != 0) {
            runtime_error(NULL, "out of memory for the --json text");
            return -1;
        }
        if (seq->out_len) memcpy(g->text + g->text_len, seq->out, seq->out_len);
        g->text_len += seq->out_len;
        return 0;
    }
    if (seq->out_len && (out_write(seq->out, seq->out_len) != 0 || out_flush() != 0)) return -1;  // stdout is gone
    return 0;
}

// The sequence's steps until it stops or a signal ends it. 0, or -1 after
// reporting.
static int generation_loop(Generation *g) {
    while (!g->seq.stop) {
        if (was_interrupted()) {
            g->stopped_by_user = 1;
            sequence_interrupt(&g->seq);  // what it held back for a stop string is the text's too
            return show_step(g);
        }
        if (generation_step(g) != 0 || show_step(g) != 0) return -1;
        if (g->seq.stop == STOP_CONTEXT)
            note(g->o->quiet, "stopped at the end of the context (%d positions; --context-shift goes on)",
                 g->ss->model.config.n_ctx);
    }
    return 0;
}

// The sequence's and the draft's numbers into the report.
static void generation_stats(Generation *g) {
    const Sequence *seq = &g->seq;
    RunStats *r = &g->r;
    r->generated = seq->n_generated;
    r->prefill_tokens = seq->prefill_tokens;
    r->prefill_seconds = seq->prefill_seconds;
    r->decode_tokens = seq->decode_tokens;
    r->decode_seconds = seq->decode_seconds;
    r->seq_tokens = seq->positions;
    r->shifts = seq->shifts;
    r->shift_tokens = seq->shift_tokens;
    if (!g->guesses) return;
    const DraftModel *dm = g->dm;
    r->draft = dm->model ? "model" : "lookup";
    r->draft_file = dm->file;
    r->draft_dtype = dm->model ? model_matrix_dtypes(dm->model, r->draft_dtype_buf, sizeof r->draft_dtype_buf) : NULL;
    r->lookup_n = (size_t)g->o->lookup_n;
    r->draft_tokens = g->guesses;
    r->verify_steps = seq->verify_steps;
    r->proposed = seq->proposed;
    r->accepted = seq->accepted;
    r->draft_seconds = g->draft.seconds;
    r->decode_forwards = seq->decode_steps;
}

// --json's object, or the end of the text's line. 0, or -1 after reporting.
static int generation_result(Generation *g, const char *stop_reason) {
    const Options *o = g->o;
    const Sequence *seq = &g->seq;
    size_t n_prompt = g->n_prompt;
    if (!o->json) return !o->per_token && out_end_text() != 0 ? -1 : 0;
    cJSON *root = cJSON_CreateObject();
    // one vocabulary in every output: *_tokens is a count, the ids are prompt_ids and tokens
    cJSON_AddItemToObject(root, "prompt_ids", ids_json(g->ids, n_prompt));
    cJSON_AddNumberToObject(root, "prompt_tokens", (double)n_prompt);
    cJSON_AddItemToObject(root, "tokens", ids_json(seq->tokens + n_prompt, g->r.generated));
    if (g->text) g->text[g->text_len] = '\0';
    cJSON_AddStringToObject(root, "text", g->text ? g->text : "");
    cJSON_AddStringToObject(root, "stop_reason", stop_reason);
    cJSON_AddItemToObject(root, "seed", seed_json(g->r.seed));  // every answer that samples has it here
    if (g->gp.logprobs)  // the generated tokens', or (echo) every token's from the prompt's first
        cJSON_AddItemToObject(root, "logprobs",
                              o->echo ? logprobs_json(g->ss->tok, seq->tokens, seq->n_tokens, seq->lp, seq->lp_from, 0)
                                      : logprobs_json(g->ss->tok, seq->tokens + n_prompt, g->r.generated, seq->lp, 0, 0));
    cJSON_AddItemToObject(root, "stats", stats_json(&g->ss->model, &g->r));
    int bad = out_json_line(root);
    cJSON_Delete(root);
    return bad ? -1 : 0;
}

// One continuation of the prompt ids[0..n_prompt) (its text prompt, for
// --echo), streamed to stdout or written as --json at the end.
static int run_generate(const Options *o, const Session *ss, const char *prompt, size_t prompt_len,
                        const int32_t *ids, size_t n_prompt, const DraftModel *dm, const RunGrammar *gg) {
    Generation g = {.o = o, .ss = ss, .dm = dm, .ids = ids, .n_prompt = n_prompt};
    int rc = EXIT_RUNTIME;
    generation_params(&g);
    g.gp.grammar = gg->grammar;
    g.gp.grammar_vocab = gg->vocab;
    if (generation_start(&g) != 0) goto done;
    defer_interrupts();  // from here on a signal ends the run after its step
    if (echo_prompt(&g, prompt, prompt_len) != 0) goto done;
    g.printed = o->echo ? 0 : n_prompt;
    if (generation_loop(&g) != 0) goto done;
    generation_stats(&g);
    const char *stop_reason = g.stopped_by_user ? "interrupted" : stop_reason_name(g.seq.stop);
    if (generation_result(&g, stop_reason) != 0 || out_flush() != 0) goto done;
    rc = g.stopped_by_user ? EXIT_INTERRUPTED : EXIT_OK;
    if (o->stats) {
        fprintf(stderr, "stop:       %s after %zu new token%s\n", stop_reason, g.r.generated, plural(g.r.generated));
        print_stats(&ss->model, &g.r, o->threads);
    }
    if (o->stats_json) print_stats_json(&ss->model, &g.r);
done:
    free(g.text);
    draft_free(&g.draft);
    if (g.engine_up) {
        sequence_free(&g.seq, &g.engine);
        engine_free(&g.engine);
    }
    return rc;
}

// ----------------------------------------------------------------------------
// the reports of --completions N and --choice, which run as one request of
// --batch's kind (run_one_request, batch.c)

typedef struct {
    const Options *o;
    const Session *ss;
    const int32_t *ids;  // --completions: the prompt's tokens
    size_t n_prompt;
} OneReportCtx;

// N continuations of one prompt, seeds seed, seed + 1, ...: the first
// computed the prompt, the others shared its blocks, and they decoded
// together. Each is the single run with its seed, bit for bit (a row's result
// never depends on the others in the step). --json only.
static int report_completions(void *ctx, const OneRun *run) {
    const OneReportCtx *x = ctx;
    const Options *o = x->o;
    const Model *m = &x->ss->model;
    const Engine *engine = run->engine;
    size_t n = run->n_seqs, n_prompt = x->n_prompt;
    RunStats r = {.model_file = x->ss->model_path, .kv_dtype = o->kv_dtype, .tune = &x->ss->tune, .have_seed = 1,
                  .seed = run->seed, .prompt_tokens = n_prompt, .context_shift = o->context_shift};
    cJSON *root = cJSON_CreateObject(), *list = cJSON_CreateArray();
    cJSON_AddItemToObject(root, "prompt_ids", ids_json(x->ids, n_prompt));
    cJSON_AddNumberToObject(root, "prompt_tokens", (double)n_prompt);
    for (size_t i = 0; i < n; i++) {
        const Sequence *s = &run->seqs[i];
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", (double)i);
        cJSON_AddItemToObject(c, "seed", seed_json(run->seed + i));
        cJSON_AddItemToObject(c, "tokens", ids_json(s->tokens + n_prompt, s->n_generated));
        cJSON_AddStringToObject(c, "text", run->texts[i]);
        cJSON_AddStringToObject(c, "stop_reason",
                                run->interrupted && !s->stop ? "interrupted" : stop_reason_name(s->stop));
        if (o->logprobs >= 0)
            cJSON_AddItemToObject(c, "logprobs",
                                  o->echo ? logprobs_json(x->ss->tok, s->tokens, s->n_tokens, s->lp, s->lp_from, 0)
                                          : logprobs_json(x->ss->tok, s->tokens + n_prompt, s->n_generated, s->lp, 0, 0));
        cJSON_AddItemToArray(list, c);
        r.generated += s->n_generated;
        r.prefill_tokens += s->prefill_tokens;
        r.decode_tokens += s->decode_tokens;
        r.seq_tokens += s->positions;
        r.shifts += s->shifts;
        r.shift_tokens += s->shift_tokens;
    }
    r.prefill_seconds = run->seqs[0].prefill_seconds;
    r.decode_seconds = engine->forward_seconds - r.prefill_seconds;
    KVPoolStats ps = kvpool_stats(engine->kv);
    r.kv_allocated = ps.peak_held * ps.block_bytes;
    cJSON_AddItemToObject(root, "seed", seed_json(run->seed));  // completion i's: seed + i
    cJSON_AddItemToObject(root, "completions", list);
    cJSON_AddNumberToObject(root, "prefix_tokens_reused", (double)engine->prefix_tokens_reused);
    cJSON_AddItemToObject(root, "stats", stats_json(m, &r));
    int bad = out_json_line(root);
    cJSON_Delete(root);
    if (bad || out_flush() != 0) return EXIT_RUNTIME;
    if (o->stats) {
        fprintf(stderr, "completions: %zu, seeds %llu to %llu; the prompt computed once, %zu tokens reused\n", n,
                (unsigned long long)run->seed, (unsigned long long)(run->seed + n - 1),
                engine->prefix_tokens_reused);
        print_stats(m, &r, o->threads);
    }
    if (o->stats_json) print_stats_json(m, &r);
    return run->interrupted ? EXIT_INTERRUPTED : EXIT_OK;
}

// The prompt's continuations o->choices ranked by likelihood. Each choice
// was a sequence over prompt + choice (candidate_tokens) that generated
// nothing and reported the log-probabilities of its own tokens: the first
// computed the prompt, the others shared its blocks (prefix sharing) and all
// of them ran their tokens in one more step. Bit for bit, each
// log-probability is the one --score gives that token of the same text
// (every row has the same bits however it is batched or shared).
static int report_choice(void *ctx, const OneRun *run) {
    const OneReportCtx *x = ctx;
    const Options *o = x->o;
    const Model *m = &x->ss->model;
    const Candidate *c = run->candidates;
    size_t nc = run->n_seqs;
    if (run->interrupted) return EXIT_INTERRUPTED;
    RunStats r = {.model_file = x->ss->model_path, .kv_dtype = o->kv_dtype, .tune = &x->ss->tune};
    for (size_t i = 0; i < nc; i++) {
        r.prefill_tokens += run->seqs[i].prefill_tokens;
        r.prefill_seconds += run->seqs[i].prefill_seconds;
        r.seq_tokens += run->seqs[i].positions;
    }
    r.prompt_tokens = c[0].first;
    KVPoolStats ps = kvpool_stats(run->engine->kv);
    r.kv_allocated = ps.peak_held * ps.block_bytes;
    size_t best = candidate_best(c, nc, 0);
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        add_candidates_json(root, c, nc);
        cJSON_AddNumberToObject(root, "prefix_tokens_reused", (double)run->engine->prefix_tokens_reused);
        cJSON_AddItemToObject(root, "stats", stats_json(m, &r));
        int bad = out_json_line(root);
        cJSON_Delete(root);
        if (bad) return EXIT_RUNTIME;
    } else if (out_write(c[best].text, strlen(c[best].text)) != 0 || out_end_text() != 0) {
        return EXIT_RUNTIME;
    }
    if (out_flush() != 0) return EXIT_RUNTIME;
    if (o->stats) {
        // the index counts from 0, as --json's "index" and "best" do
        fprintf(stderr, "choices:    %zu, best %zu (sum %.6f); prompt computed once, %zu tokens reused\n", nc, best,
                c[best].sum, run->engine->prefix_tokens_reused);
        print_stats(m, &r, o->threads);
    }
    if (o->stats_json) print_stats_json(m, &r);
    return EXIT_OK;
}

// --completions N (ids[0..n_prompt) the prompt's tokens) or --choice (ids
// NULL): run and reported. An exit code.
static int run_one(const Options *o, const Session *ss, const char *prompt, size_t prompt_len, const int32_t *ids,
                   size_t n_prompt, const RunGrammar *gg) {
    OneReportCtx x = {.o = o, .ss = ss, .ids = ids, .n_prompt = n_prompt};
    OneRequest in = {.prompt = prompt, .prompt_len = prompt_len, .ids = ids, .n_ids = n_prompt,
                     .grammar = gg->grammar, .vocab = gg->vocab};
    return run_one_request(o, ss, &in, ids ? report_completions : report_choice, &x);
}

// ----------------------------------------------------------------------------
// the draft model

// The flag that named the draft, for messages.
static const char *draft_flag(const Options *o) { return o->draft_path ? "--draft" : "--draft-dtype"; }

// Loads the draft (the --draft file, or the model's own file in
// --draft-dtype) and checks that it speaks the model's language: the same
// vocabulary, every token the same bytes. 0, or -1 after reporting.
static int load_draft(const Options *o, const char *model_file, const Model *m, const Tokenizer *tok,
                      Model *draft) {
    GptError err = {{0}};
    const char *path = o->draft_path ? o->draft_path : model_file;
    WeightOptions wo = {.matrix_dtype = o->draft_dtype, .q4_pure = o->draft_q4_pure};
    if (model_load_with(draft, path, &wo, &err) != 0) {
        runtime_error(NULL, "%s: %s", draft_flag(o), err.msg);
        return -1;
    }
    if (draft->config.vocab_size != m->config.vocab_size) {
        runtime_error(NULL, "--draft %s: its vocabulary has %d tokens, the model's %d", path,
                      draft->config.vocab_size, m->config.vocab_size);
        return -1;
    }
    if (!o->draft_path) return 0;  // the model itself
    int owned;
    Tokenizer *dtok = open_tokenizer(NULL, draft, path, &owned, &err);
    if (!dtok) {
        runtime_error(NULL, "--draft %s: its tokenizer: %s", path, err.msg);
        return -1;
    }
    int same = tokenizer_vocab_size(dtok) == tokenizer_vocab_size(tok);
    size_t id = 0;
    for (; same && id < tokenizer_vocab_size(tok); id++) {
        size_t a, b;
        const unsigned char *x = tokenizer_token_bytes(tok, (int32_t)id, &a);
        const unsigned char *y = tokenizer_token_bytes(dtok, (int32_t)id, &b);
        same = a == b && (a == 0 || memcmp(x, y, a) == 0);
    }
    if (owned) tokenizer_free(dtok);
    if (!same) {
        runtime_error(NULL, "--draft %s: its tokenizer differs from the model's (token %zu)", path, id - 1);
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// gpt [--score]

// The options' grammar (--grammar, --json-schema, --json-object, --regex),
// compiled before the model loads (a bad --regex is a usage error at once).
// EXIT_OK, or the exit code after reporting.
static int load_grammar(const Options *o, RunGrammar *gg) {
    return o->mode == MODE_SCORE || o->mode == MODE_CHOICE ? EXIT_OK : options_grammar(o, &gg->grammar);
}

// The trie of the tokenizer's tokens, when there is a grammar: 0, or -1
// after reporting.
static int load_grammar_vocab(const Session *ss, RunGrammar *gg) {
    GptError err = {{0}};
    if (!gg->grammar) return 0;
    gg->vocab = sequence_grammar_vocab(ss->tok, (size_t)ss->model.config.vocab_size, &err);
    return gg->vocab ? 0 : (report_error(&err), -1);
}

int run_model(const Options *o) {
    RunGrammar gg = {0};
    Session ss;
    catch_interrupts();
    int rc = load_grammar(o, &gg);
    if (rc != EXIT_OK) return rc;
    if ((rc = session_open(&ss, o)) != EXIT_OK) {
        grammar_free(gg.grammar);
        return rc;
    }
    rc = EXIT_RUNTIME;
    const Model *m = &ss.model;
    if (o->mode == MODE_SCORE && o->stride > m->config.n_ctx) {  // a usage error, known once the model is
        rc = usage_error(NULL, "--stride %ld: must be at most the model's context, %d", o->stride, m->config.n_ctx);
        session_close(&ss);
        grammar_free(gg.grammar);
        return rc;
    }
    Model draft = {0};
    GptError err = {{0}};
    char *prompt = NULL;
    size_t prompt_len = 0;
    int32_t *ids = NULL;
    int scoring = o->mode == MODE_SCORE;
    DraftModel dm = {0};
    Options chat_o = *o;  // with --chat-template, o with the template's stops
    ChatTemplate chat;
    int chat_on = 0;
    if (!scoring && (o->draft_path || o->draft_dtype >= 0)) {
        if (load_draft(o, ss.model_path, m, ss.tok, &draft) != 0) goto done;
        dm.model = &draft;
        dm.file = o->draft_path ? o->draft_path : ss.model_path;
    }
    if (read_prompt(o, &prompt, &prompt_len) != 0) goto done;
    if (o->mode == MODE_CHOICE) {
        rc = run_one(o, &ss, prompt, prompt_len, NULL, 0, &gg);
        goto done;
    }
    size_t n;
    if (o->chat_template) {  // a conversation: the template's prompt and stops
        chat_on = conversation_prompt(&chat_o, ss.tok, &prompt, &prompt_len, &chat, &ids, &n) == 0;
        if (!chat_on) goto done;
        o = &chat_o;
    } else if ((scoring ? tokenizer_encode(ss.tok, prompt, prompt_len, o->special, &ids, &n, &err)
                        : prompt_tokens(ss.tok, prompt, prompt_len, o->special, &ids, &n, &err)) != 0) {
        report_error(&err);
        goto done;
    }
    if (scoring && n == 0) {
        runtime_error(NULL, "--score: the text is empty");
        goto done;
    }
    // --prepend-eos: <|endoftext|> goes first, the context of the text's first token
    if (scoring && o->prepend_eos) {
        int32_t eot = tokenizer_eot_id(ss.tok), *with = eot >= 0 ? malloc((n + 1) * sizeof *with) : NULL;
        if (!with) {
            runtime_error(NULL, "--prepend-eos: %s", eot < 0 ? "the tokenizer has no <|endoftext|>" : "out of memory");
            goto done;
        }
        with[0] = eot;
        memcpy(with + 1, ids, n * sizeof *ids);
        free(ids);
        ids = with;
        n++;
    }
    if (scoring && n > (size_t)m->config.n_ctx && !o->stride) {
        runtime_error(NULL, "the text is %zu tokens; the model's context holds %d (--stride N scores longer texts "
                      "in windows)", n, m->config.n_ctx);
        goto done;
    }
    char why[160];
    if (settings_check_keep(&o->gen, 0, 0, (size_t)m->config.n_ctx, why, sizeof why) != 0) {
        rc = usage_error(NULL, "%s", why);
        goto done;
    }
    if (!scoring && check_prompt_length(&m->config, n, &err) != 0) {
        report_error(&err);
        goto done;
    }
    if (!scoring && load_grammar_vocab(&ss, &gg) != 0) goto done;
    rc = scoring                ? run_score(o, &ss, ids, n)
         : o->completions > 1 ? run_one(o, &ss, prompt, prompt_len, ids, n, &gg)
                              : run_generate(o, &ss, prompt, prompt_len, ids, n, &dm, &gg);
done:
    grammar_free(gg.grammar);
    grammar_vocab_free(gg.vocab);
    free(ids);
    free(prompt);
    if (chat_on) chat_template_free(&chat);
    model_free(&draft);
    session_close(&ss);
    return rc;
}
