/*
 * run_model.c - `gpt` and `gpt --score`: the prompt rules, generation as a
 * client of the engine (one sequence), streaming the text, scoring, and the
 * --stats and --json reports.
 */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <utf8proc.h>

#include "cli.h"
#include "fileio.h"
#include "generate.h"
#include "kvcache.h"
#include "loader.h"
#include "matmul.h"
#include "speculate.h"
#include "progress.h"

// ----------------------------------------------------------------------------
// Ctrl-C and SIGTERM. Before the run's work starts (loading the model,
// reading the prompt, scoring) nothing is written until the end, so gpt
// exits 130 at once. Once it has started (defer_interrupts), the first one
// finishes the current step and ends the run as if it had stopped there
// (stop_reason "interrupted", the stats, exit 130); a second one ends the
// process at once, as usual.

static volatile sig_atomic_t interrupted;  // the flags a signal handler may set
static volatile sig_atomic_t deferred;     // 0: exit at once

static void on_interrupt(int sig) {
    if (!deferred) _exit(EXIT_INTERRUPTED);
    interrupted = 1;
    signal(sig, SIG_DFL);
}

// A signal ignored when gpt started stays ignored, as POSIX tools do: a
// shell ignores SIGINT for a script's `cmd &`, so that Ctrl-C spares it.
static void catch_signal(int sig) {
    struct sigaction old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) return;
    signal(sig, on_interrupt);
}

void catch_interrupts(void) {
    interrupted = 0;
    deferred = 0;
    catch_signal(SIGINT);
    catch_signal(SIGTERM);
}

void defer_interrupts(void) { deferred = 1; }

int was_interrupted(void) { return interrupted != 0; }

const volatile sig_atomic_t *interrupt_flag(void) { return &interrupted; }

// ----------------------------------------------------------------------------
// reports

size_t peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024;  // Linux reports KiB
}

static double rate(size_t n, double seconds) { return seconds > 0 ? (double)n / seconds : 0.0; }

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

// What a run did, for --stats and --json.
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
} RunStats;

// A 64-bit integer as a JSON number: digits, exact (cJSON would round it to
// a double). Seeds gpt draws and --batch indices are below 2^53, which every
// JSON reader keeps.
cJSON *u64_json(uint64_t v) {
    char digits[32];
    snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(digits);
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
    cJSON_AddStringToObject(s, "kv_dtype", dtype_name(r->kv_dtype));
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
    if (r->have_seed) cJSON_AddItemToObject(s, "seed", u64_json(r->seed));
    else cJSON_AddNullToObject(s, "seed");
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

static void print_stats(const Model *m, const RunStats *r, long threads) {
    const GPT2Config *c = &m->config;
    size_t HS = (size_t)(c->n_embd / c->n_head);
    size_t per_token = kvcache_bytes_per_token(c, r->kv_dtype);
    FILE *e = stderr;
    char dts[32];
    fprintf(e, "model:      %s (%s, %d layers, %d heads x %zu dims, %d channels, context %d, vocab %d)\n",
            r->model_file, m->source_kind, c->n_layer, c->n_head, HS, c->n_embd, c->n_ctx, c->vocab_size);
    fprintf(e, "weights:    %zu params, %zu bytes (%.2f MiB), matrices %s, loaded in %.3f s\n", m->n_params,
            m->weight_bytes, mib(m->weight_bytes), model_matrix_dtypes(m, dts, sizeof dts), m->load_seconds);
    fprintf(e, "kv cache:   2 x %d layers x %d heads x %zu dims x %zu bytes (%s) = %zu B/token (%.2f KiB)\n",
            c->n_layer, c->n_head, HS, kv_elem_size(r->kv_dtype), dtype_name(r->kv_dtype), per_token,
            (double)per_token / 1024.0);
    fprintf(e, "kv held:    %zu tokens x %zu B = %zu B (%.2f MiB)\n", r->seq_tokens, per_token,
            per_token * r->seq_tokens, mib(per_token * r->seq_tokens));
    fprintf(e, "kv full:    %d tokens x %zu B = %zu B (%.2f MiB)\n", c->n_ctx, per_token,
            per_token * (size_t)c->n_ctx, mib(per_token * (size_t)c->n_ctx));
    fprintf(e, "kv alloc:   %zu B (%.2f MiB)\n", r->kv_allocated, mib(r->kv_allocated));
    fprintf(e, "prefill:    %zu tokens in %.3f s = %.1f tok/s\n", r->prefill_tokens,
            r->prefill_seconds, rate(r->prefill_tokens, r->prefill_seconds));
    fprintf(e, "decode:     %zu tokens in %.3f s = %.1f tok/s\n", r->decode_tokens,
            r->decode_seconds, rate(r->decode_tokens, r->decode_seconds));
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
    fprintf(e, "peak rss:   %zu B (%.1f MiB)\n", peak_rss_bytes(), mib(peak_rss_bytes()));
    if (r->have_seed)
        fprintf(e, "seed:       %llu\n", (unsigned long long)r->seed);
}

cJSON *ids_json(const int32_t *ids, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

// ----------------------------------------------------------------------------
// the prompt

int read_prompt(const Options *o, char **text, size_t *len) {
    GptError err = {{0}};
    if (o->prompt) {
        *len = strlen(o->prompt);
        *text = malloc(*len + 1);
        if (!*text) {
            fprintf(stderr, "gpt: out of memory\n");
            return -1;
        }
        memcpy(*text, o->prompt, *len + 1);
        return 0;
    }
    if (isatty(STDIN_FILENO))
        fprintf(stderr, "gpt: reading %s from stdin; end it with Ctrl-D (or pass -p)\n",
                o->mode == MODE_DETOKENIZE ? "token ids" : "the text");
    if (file_read_stream(stdin, "stdin", text, len, &err) != 0) return report_error(&err), -1;
    // `echo Hello | gpt` means the prompt "Hello": one final newline (or
    // CR LF) is the end of the line, not part of the prompt. (--score and
    // --tokenize take the text exactly as it is.)
    if (o->mode == MODE_GENERATE && !o->keep_newline && *len && (*text)[*len - 1] == '\n') {
        (*text)[--*len] = '\0';
        if (*len && (*text)[*len - 1] == '\r') (*text)[--*len] = '\0';
    }
    return 0;
}

int prompt_ids(Tokenizer *tok, const char *text, size_t len, int special, int32_t **ids, size_t *n,
               GptError *err) {
    if (tokenizer_encode(tok, text, len, special, ids, n, err) != 0) return -1;
    if (*n > 0) return 0;
    // GPT-2 was trained with <|endoftext|> between documents: an empty
    // prompt starts a new one.
    int32_t eot = tokenizer_eot_id(tok);
    if (eot < 0) return gpt_error(err, "empty prompt and the tokenizer has no <|endoftext|>");
    (*ids)[(*n)++] = eot;  // an empty result still has room for one id (tokenizer.h)
    return 0;
}

// The seed of a run: -s, or one drawn from the OS below 2^53 (so that a JSON
// reader keeps it exactly and `gpt -s SEED` repeats the run).
uint64_t run_seed(const Options *o) {
    return o->have_seed ? o->sampling.seed : sampler_random_seed() & ((1ull << 53) - 1);
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

static int run_score(const Options *o, const Model *m, const char *model_file, ThreadPool *pool,
                     const Tokenizer *tok, const int32_t *ids, size_t n) {
    GptError err = {{0}};
    RunStats r = {.model_file = model_file};
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
    int scored = score_tokens(m, ids, n, (size_t)o->stride, o->kv_dtype, pool, logprobs, &st, &shown, &err);
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
        fprintf(stderr, "gpt: the model produced a non-finite log-probability (token %zu: %g)\n", bad + 1,
                logprobs[bad]);
        goto done;
    }
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "tokens", ids_json(ids, n));
        cJSON *lp = cJSON_CreateArray();
        for (size_t i = 0; i + 1 < n; i++) cJSON_AddItemToArray(lp, cJSON_CreateNumber(logprobs[i]));
        cJSON_AddItemToObject(root, "logprobs", lp);
        cJSON_AddNumberToObject(root, "sum", sum);
        if (n > 1) cJSON_AddNumberToObject(root, "perplexity", ppl);
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
        if (n == 1) fprintf(stderr, "gpt: --score: one token has nothing to predict it: no perplexity\n");
        if (n > 1 ? out_printf("tokens %zu scored %zu logprob_sum %.6f perplexity %.4f\n", n, n - 1, sum, ppl)
                  : out_printf("tokens 1 scored 0 logprob_sum 0 perplexity n/a\n"))
            goto done;
    }
    if (out_flush() != 0) goto done;
    rc = EXIT_OK;
    if (o->stats) print_stats(m, &r, o->threads);
done:
    free(logprobs);
    return rc;
}

// Bytes as text for one output line: \\ for a backslash, \n, \r and \t for
// those characters, \xHH for other control bytes and for each byte that
// does not begin a whole, valid UTF-8 character (a token may hold part of
// one: its bytes are escaped one by one); whole characters as they are. The
// line is valid UTF-8, and the bytes can be read back from it exactly.
int print_escaped(const unsigned char *b, size_t len) {
    for (size_t i = 0; i < len;) {
        unsigned char ch = b[i];
        char esc[8];
        const char *s = esc;
        size_t n = 2, used = 1;
        utf8proc_int32_t cp;
        utf8proc_ssize_t whole;
        if (ch == '\\') s = "\\\\";
        else if (ch == '\n') s = "\\n";
        else if (ch == '\r') s = "\\r";
        else if (ch == '\t') s = "\\t";
        else if (ch < 0x20 || ch == 0x7F) n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", ch);
        else if (ch < 0x80) s = (const char *)&b[i], n = 1;
        else if ((whole = utf8proc_iterate(b + i, (utf8proc_ssize_t)(len - i), &cp)) > 0)
            s = (const char *)&b[i], n = used = (size_t)whole;
        else n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", ch);
        if (out_write(s, n) != 0) return -1;
        i += used;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// generation

// The draft of a speculative run: the --draft model (or the model itself
// in --draft-dtype) or prompt lookup; NULL model when none.
typedef struct {
    const Model *model;
    const char *file;
} DraftModel;

static int run_generate(const Options *o, const Model *m, const char *model_file, ThreadPool *pool,
                        Tokenizer *tok, const char *prompt, size_t prompt_len, const int32_t *ids,
                        size_t n_prompt, const DraftModel *dm) {
    GptError err = {{0}};
    Engine engine;
    Sequence seq;
    Draft draft = {0};
    int speculating = dm->model || o->lookup_n;
    char *text = NULL;  // the generated text, for --json
    size_t text_len = 0, text_cap = 0;
    int rc = EXIT_RUNTIME;
    RunStats r = {.model_file = model_file};

    GenParams gp = {.sampling = o->sampling, .max_new = (size_t)o->max_tokens, .ignore_eos = o->ignore_eos,
                    .stops = o->stops, .n_stops = o->n_stops};
    gp.sampling.seed = run_seed(o);
    r.seed = gp.sampling.seed;
    r.have_seed = 1;
    r.prompt_tokens = n_prompt;
    r.kv_dtype = o->kv_dtype;

    // One sequence; the whole prompt in one step; a pool of its size.
    size_t room = (size_t)m->config.n_ctx - n_prompt, max_new = (size_t)o->max_tokens;
    size_t positions = n_prompt + (max_new < room ? max_new : room);
    size_t guesses = speculating ? (size_t)o->draft_tokens : 0;
    EngineConfig ec = {.max_seqs = 1, .max_step_tokens = n_prompt, .kv_dtype = o->kv_dtype,
                       .kv_blocks = (positions + KV_BLOCK - 1) / KV_BLOCK, .pool = pool, .max_verify = guesses};
    if (engine_init(&engine, m, tok, &ec, &err) != 0) return report_error(&err);
    if (sequence_init(&seq, &engine, ids, n_prompt, &gp, &err) != 0 || engine_admit(&engine, &seq, &err) != 1) {
        report_error(&err);
        goto done;
    }
    if (speculating &&
        (dm->model ? draft_init_model(&draft, dm->model, &gp.sampling, positions, guesses, pool, &err)
                   : draft_init_lookup(&draft, (size_t)o->lookup_n, positions, guesses, &err)) != 0) {
        report_error(&err);
        goto done;
    }
    KVPoolStats ps = kvpool_stats(engine.kv);
    r.kv_allocated = ps.n_blocks * ps.block_bytes;

    defer_interrupts();  // from here on a signal ends the run after its step
    if (o->echo && !o->json && (out_write(prompt, prompt_len) != 0 || out_flush() != 0)) goto done;
    Sequence *batch[1] = {&seq};
    int stopped_by_user = 0;
    while (!seq.stop) {
        if (was_interrupted()) {
            stopped_by_user = 1;
            break;
        }
        if ((speculating ? speculate_step(&engine, &seq, &draft, guesses, &err)
                         : engine_step(&engine, batch, 1, &err)) != 0) {
            report_error(&err);
            goto done;
        }
        if (seq.stop == STOP_ERROR) {
            report_error(&seq.error);
            goto done;
        }
        if (o->json) {
            if (seq.out_len && text_len + seq.out_len + 1 > text_cap) {
                size_t cap = (text_len + seq.out_len + 1) * 2;
                char *bigger = realloc(text, cap);
                if (!bigger) {
                    fprintf(stderr, "gpt: out of memory for the --json text\n");
                    goto done;
                }
                text = bigger;
                text_cap = cap;
            }
            if (seq.out_len) memcpy(text + text_len, seq.out, seq.out_len);
            text_len += seq.out_len;
        } else if (seq.out_len && (out_write(seq.out, seq.out_len) != 0 || out_flush() != 0)) {
            goto done;  // stdout is gone: stop generating
        }
        if (seq.stop == STOP_CONTEXT)
            fprintf(stderr, "gpt: stopped at the end of the context (%d positions)\n", m->config.n_ctx);
    }
    r.generated = seq.n_generated;
    r.prefill_tokens = seq.prefill_tokens;
    r.prefill_seconds = seq.prefill_seconds;
    r.decode_tokens = seq.decode_tokens;
    r.decode_seconds = seq.decode_seconds;
    r.seq_tokens = seq.positions;
    if (speculating) {
        r.draft = dm->model ? "model" : "lookup";
        r.draft_file = dm->file;
        r.draft_dtype = dm->model ? model_matrix_dtypes(dm->model, r.draft_dtype_buf, sizeof r.draft_dtype_buf) : NULL;
        r.lookup_n = (size_t)o->lookup_n;
        r.draft_tokens = guesses;
        r.verify_steps = seq.verify_steps;
        r.proposed = seq.proposed;
        r.accepted = seq.accepted;
        r.draft_seconds = draft.seconds;
        r.decode_forwards = seq.decode_steps;
    }
    const char *stop_reason = stopped_by_user ? "interrupted" : stop_reason_name(seq.stop);
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "prompt_tokens", ids_json(ids, n_prompt));
        cJSON_AddItemToObject(root, "tokens", ids_json(seq.tokens + n_prompt, r.generated));
        if (text) text[text_len] = '\0';
        cJSON_AddStringToObject(root, "text", text ? text : "");
        cJSON_AddStringToObject(root, "stop_reason", stop_reason);
        cJSON_AddItemToObject(root, "stats", stats_json(m, &r));
        int bad = out_json_line(root);
        cJSON_Delete(root);
        if (bad) goto done;
    } else if (out_end_text() != 0) {
        goto done;
    }
    if (out_flush() != 0) goto done;
    rc = stopped_by_user ? EXIT_INTERRUPTED : EXIT_OK;
    if (o->stats) {
        fprintf(stderr, "stop:       %s after %zu new tokens\n", stop_reason, r.generated);
        print_stats(m, &r, o->threads);
    }
done:
    free(text);
    draft_free(&draft);
    sequence_free(&seq, &engine);
    engine_free(&engine);
    return rc;
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
    WeightOptions wo = {.matrix_dtype = o->draft_dtype};
    if (model_load_with(draft, path, &wo, &err) != 0) {
        fprintf(stderr, "gpt: %s: %s\n", draft_flag(o), err.msg);
        return -1;
    }
    if (draft->config.vocab_size != m->config.vocab_size) {
        fprintf(stderr, "gpt: --draft %s: its vocabulary has %d tokens, the model's %d\n", path,
                draft->config.vocab_size, m->config.vocab_size);
        return -1;
    }
    if (!o->draft_path) return 0;  // the model itself
    int owned;
    Tokenizer *dtok = open_tokenizer(NULL, draft, path, &owned, &err);
    if (!dtok) {
        fprintf(stderr, "gpt: --draft %s: its tokenizer: %s\n", path, err.msg);
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
        fprintf(stderr, "gpt: --draft %s: its tokenizer differs from the model's (token %zu)\n", path, id - 1);
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// gpt [--score]

int run_model(const Options *o) {
    Model m = {0}, draft = {0};
    char model_path[4096];
    catch_interrupts();
    int rc = open_model(o->model_path, o->weight_dtype, &m, model_path, sizeof model_path);
    if (rc != EXIT_OK) return rc;
    rc = EXIT_RUNTIME;
    GptError err = {{0}};
    int owned = 0;
    char *prompt = NULL;
    size_t prompt_len = 0;
    int32_t *ids = NULL;
    ThreadPool *pool = NULL;
    int scoring = o->mode == MODE_SCORE;
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
    DraftModel dm = {0};
    if (!scoring && (o->draft_path || o->draft_dtype >= 0)) {
        if (load_draft(o, model_path, &m, tok, &draft) != 0) goto done;
        dm.model = &draft;
        dm.file = o->draft_path ? o->draft_path : model_path;
    }
    if (read_prompt(o, &prompt, &prompt_len) != 0) goto done;
    size_t n;
    if ((scoring ? tokenizer_encode(tok, prompt, prompt_len, o->special, &ids, &n, &err)
                 : prompt_ids(tok, prompt, prompt_len, o->special, &ids, &n, &err)) != 0) {
        report_error(&err);
        goto done;
    }
    if (n == 0) {
        fprintf(stderr, "gpt: --score: the text is empty\n");
        goto done;
    }
    if (n > (size_t)m.config.n_ctx && !(scoring && o->stride)) {
        fprintf(stderr, "gpt: the %s is %zu tokens; the model's context holds %d%s\n", scoring ? "text" : "prompt",
                n, m.config.n_ctx, scoring ? " (--stride N scores longer texts in windows)" : "");
        goto done;
    }
    // -t N: the threads our kernels split the work over
    pool = threadpool_create((int)o->threads, &err);
    if (!pool) {
        report_error(&err);
        goto done;
    }
    rc = scoring ? run_score(o, &m, model_path, pool, tok, ids, n)
                 : run_generate(o, &m, model_path, pool, tok, prompt, prompt_len, ids, n, &dm);
done:
    threadpool_free(pool);
    free(ids);
    free(prompt);
    if (owned) tokenizer_free(tok);
    model_free(&draft);
    model_free(&m);
    return rc;
}
