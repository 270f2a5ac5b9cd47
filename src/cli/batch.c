/*
 * batch.c - `gpt --batch`: prompts on stdin, one per line, decoded together,
 * one result line per prompt line on stdout.
 *
 *   input    a plain line is a prompt (an empty line an empty prompt); with
 *            --jsonl each line is a JSON object (--help lists its fields).
 *            Lines are read as they arrive: while sequences are running, a
 *            slow producer is polled, never waited for; at most a window of
 *            lines is held at once, however long the input.
 *   engine   up to --parallel sequences in flight; a new line joins as soon
 *            as a place is free, its prompt prefilled in chunks that share
 *            each step with the running sequences' one-token decodes, its KV
 *            blocks drawn from one pool (--kv-budget) and, where its prompt
 *            starts like an earlier one, shared with it.
 *   output   one JSON object per input line, in input order (or, with
 *            --unordered, as each is done), each written and flushed when
 *            it and all before it are done. A bad line gets {"index", "error"}
 *            in its place; the others run; the exit status is 1 if any line
 *            failed.
 *   progress on stderr, when it is a terminal or with --progress: the lines
 *            done, tokens/s and, reading a file, the time left (progress.h).
 *
 * A line's result is what `gpt -p PROMPT -s SEED` with the same options
 * gives, SEED being the line's "seed", or -s plus the line's index: every
 * row of the model is computed the same way whatever else is in the step
 * (forward.h), so the batch changes nothing but the speed.
 */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "base/grow.h"
#include "base/utf8.h"
#include "base/clock.h"
#include "engine.h"
#include "scheduler.h"
#include "score.h"
#include "model/kvcache.h"
#include "kernels/matmul.h"
#include "progress.h"

// ----------------------------------------------------------------------------
// reading lines as they come

// The longest line taken: a prompt of a whole context is a few KiB, a
// --jsonl line with a grammar at most a few MiB; a longer line is that
// line's error (its bytes are read and dropped, never held), so that one
// endless line cannot take the machine's memory.
enum { BATCH_LINE_MAX = 16 << 20 };

typedef struct {
    int fd;
    char *buf;
    size_t len, cap, start;  // unread bytes are buf[start, len)
    int eof, error;
    size_t consumed;         // bytes of the lines returned so far, their newlines too
    size_t dropping;         // > 0: the bytes so far of a line longer than BATCH_LINE_MAX, being dropped
} LineReader;

// The next line (without its newline, or CR LF) into *line/*n, pointing into
// the reader's buffer (valid until the next call). Waits for input only if
// `wait`. Returns 1 with a line, 2 for a line longer than BATCH_LINE_MAX
// (*line NULL, *n its length without the newline), 0 when none is there
// yet, -1 at the end of the input (or an error, reported).
static int next_line(LineReader *r, int wait, char **line, size_t *n) {
    for (;;) {
        char *nl = r->buf ? memchr(r->buf + r->start, '\n', r->len - r->start) : NULL;
        size_t end = nl ? (size_t)(nl - r->buf) : r->len;  // the line's bytes read so far end here
        if (r->dropping || end - r->start > BATCH_LINE_MAX) {
            // an over-long line: drop its bytes up to its newline (or the end)
            r->dropping += end - r->start;
            r->consumed += end - r->start + (nl != NULL);
            r->start = nl ? end + 1 : end;
            if (nl || r->eof) {
                *line = NULL;
                *n = r->dropping;
                r->dropping = 0;
                return 2;
            }
        } else if (nl || (r->eof && r->len > r->start)) {
            *line = r->buf + r->start;
            *n = end - r->start;
            if (*n && (*line)[*n - 1] == '\r') (*n)--;
            size_t next = nl ? end + 1 : end;
            r->consumed += next - r->start;
            r->start = next;
            return 1;
        }
        if (r->eof) return -1;
        struct pollfd p = {.fd = r->fd, .events = POLLIN};
        int ready = poll(&p, 1, wait ? -1 : 0);
        if (ready < 0 && errno == EINTR) return 0;  // Ctrl-C: the caller looks
        if (ready == 0) return 0;
        // room: drop what was read, grow if a line is longer than the buffer
        if (r->start) {
            memmove(r->buf, r->buf + r->start, r->len - r->start);
            r->len -= r->start;
            r->start = 0;
        }
        // at least 4 KiB free to read into; 64 KiB to start
        if (r->cap - r->len < 4096 &&
            grow_array(&r->buf, &r->cap, r->len + (r->cap ? 4096 : 1 << 16), 1) != 0) {
            runtime_error(NULL, "stdin: out of memory for a line of %zu bytes", r->len);
            r->error = 1;
            return -1;
        }
        ssize_t got = read(r->fd, r->buf + r->len, r->cap - r->len);
        if (got < 0 && errno == EINTR) return 0;
        if (got < 0) {
            runtime_error(NULL, "stdin: %s", strerror(errno));
            r->error = 1;
            r->eof = 1;
            return -1;
        }
        if (got == 0) r->eof = 1;
        r->len += (size_t)got;
    }
}

// ----------------------------------------------------------------------------
// requests: one per input line

// One continuation of a line's prompt (a line asks for one, or "n").
typedef struct {
    char *text;             // its text so far
    size_t len, cap;
    double last_token_at;   // when its last token came out, 0 before the first
    const char *stop_reason;  // why it ended; NULL while it runs
} BatchOutput;

typedef struct {
    uint64_t index;
    cJSON *id;              // the line's "id", echoed back
    char *prompt;           // the prompt text, as valid UTF-8 (for the output)
    char *prompt_hex;       // the prompt's bytes in hex when they are not valid UTF-8, else NULL
    char *error;            // a line that failed: why (nothing runs for it)
    int32_t *ids;           // the prompt's tokens
    size_t n_ids;
    GenParams params;
    Grammar *grammar;       // the line's own ("grammar", "json_schema", "regex", "response_format"), or NULL
    const char *stops[MAX_STOPS];  // into stop_json / the options
    cJSON *stop_json;
    int echo;               // "text" starts with the prompt (and its log-probabilities, with logprobs)
    // multiple choice ("choices"): one sequence per choice, nothing generated
    cJSON *candidates_json;    // the line's "choices" (their strings)
    Candidate *candidates;
    size_t n_candidates;
    Sequence *seqs;         // its sequences: one per completion, or one per candidate
    size_t n_seqs;          // initialized (sequence_free-able) ones
    size_t n_held;          // of them, in the scheduler (the request is freed only at 0)
    size_t n_ended;         // of them, ended by the scheduler
    BatchOutput *outs;       // its completions (seeds seed, seed + 1, ...), or NULL for choices
    size_t n_completions;   // --completions or the line's "n" (1: the line's result is the completion's)
    size_t input_bytes;     // its line's bytes in the input, the newline too
    int command;            // the command's --completions or --choice (run_one_request): a
                            // message names the flag, and a sequence's error is its own
    int done;
    const char *stop_reason;
} BatchRequest;

static void batch_request_free(BatchRequest *req, Engine *e) {
    if (!req) return;
    cJSON_Delete(req->id);
    cJSON_Delete(req->stop_json);
    free(req->prompt);
    free(req->prompt_hex);
    free(req->error);
    free(req->ids);
    for (size_t i = 0; req->outs && i < req->n_completions; i++) free(req->outs[i].text);
    free(req->outs);
    for (size_t i = 0; i < req->n_seqs; i++) sequence_free(&req->seqs[i], e);
    free(req->seqs);
    grammar_free(req->grammar);  // after the sequences that read it
    for (size_t i = 0; req->candidates && i < req->n_candidates; i++) free(req->candidates[i].ids);
    free(req->candidates);
    cJSON_Delete(req->candidates_json);
    free(req);
}

static int batch_request_fail(BatchRequest *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int batch_request_fail(BatchRequest *req, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    free(req->error);
    req->error = strdup(msg);
    req->done = 1;
    return -1;
}


// The prompt as "prompt" shows it, and its exact bytes when that is not
// them: a JSON string is UTF-8, so a byte that is not part of a valid UTF-8
// character is U+FFFD there, while the model ran the byte itself:
// "prompt_hex" then gives what -p must be to run it again. 0 or -1.
static int echo_prompt(BatchRequest *req, const char *p, size_t n) {
    req->prompt = utf8_replace_invalid((const unsigned char *)p, n, NULL);
    if (!req->prompt) return -1;
    if (strlen(req->prompt) == n && !memcmp(req->prompt, p, n)) return 0;
    static const char digits[] = "0123456789abcdef";
    req->prompt_hex = malloc(2 * n + 1);
    if (!req->prompt_hex) return -1;
    for (size_t i = 0; i < n; i++) {
        req->prompt_hex[2 * i] = digits[(unsigned char)p[i] >> 4];
        req->prompt_hex[2 * i + 1] = digits[(unsigned char)p[i] & 15];
    }
    req->prompt_hex[2 * n] = '\0';
    return 0;
}

// The adapters --lora NAME=PATH named, applied at run time to the lines
// whose "lora" names one.
typedef struct {
    const char *name[LORA_MAX];
    LoraWeights w[LORA_MAX];
    size_t n;
} BatchAdapters;

// One field of a --jsonl line that is not a setting: "prompt" (a string
// into *prompt, pointing into f; token ids, each below vocab, into req->ids),
// "id", "choices", "lora" (a name of ad, which may be NULL). 0, or -1 (the
// request failed).
static int line_field(BatchRequest *req, const cJSON *f, size_t vocab, const BatchAdapters *ad, const char **prompt,
                      size_t *prompt_len) {
    const char *k = f->string;
    if (!strcmp(k, "lora")) {
        if (!cJSON_IsString(f)) return batch_request_fail(req, "lora must be a string: an adapter's name");
        req->params.lora = NULL;
        for (size_t i = 0; ad && i < ad->n; i++)
            if (!strcmp(ad->name[i], f->valuestring)) req->params.lora = &ad->w[i];
        if (!req->params.lora && *f->valuestring)
            return batch_request_fail(req, "lora \"%.60s\": no adapter of that name (--lora NAME=PATH)", f->valuestring);
    } else if (!strcmp(k, "prompt")) {
        free(req->ids);  // given twice: the last one
        req->ids = NULL, req->n_ids = 0, *prompt = NULL;
        if (cJSON_IsString(f)) {
            *prompt = f->valuestring;
            *prompt_len = strlen(f->valuestring);
        } else if (cJSON_IsArray(f)) {
            char msg[160];
            if (json_token_ids(f, vocab, "prompt", &req->ids, &req->n_ids, msg, sizeof msg) != 0)
                return batch_request_fail(req, "%s", msg);
            if (req->n_ids == 0) return batch_request_fail(req, "prompt has an empty array of token ids");
        } else {
            return batch_request_fail(req, "prompt must be a string or an array of token ids");
        }
    } else if (!strcmp(k, "id")) {
        cJSON_Delete(req->id);  // given twice: the last one, as for every field
        req->id = cJSON_Duplicate(f, 1);
    } else if (!strcmp(k, "choices")) {
        size_t n = cJSON_IsArray(f) ? (size_t)cJSON_GetArraySize(f) : 0;
        int bad = n == 0;
        for (const cJSON *c = cJSON_IsArray(f) ? f->child : NULL; c && !bad; c = c->next)
            bad = !cJSON_IsString(c) || !*c->valuestring;
        if (bad || n > MAX_CHOICES)
            return batch_request_fail(req, "choices must be an array of 1 to %d non-empty strings", MAX_CHOICES);
        cJSON_Delete(req->candidates_json);
        req->candidates_json = cJSON_Duplicate(f, 1);
        req->n_candidates = n;
    } else {
        return batch_request_fail(req, "unknown field \"%.40s\"", k);
    }
    return 0;
}

// A line's settings g (read over req's defaults) into req: its stops (when it
// gave "stop") and its grammar (set or not: the request's to free) with them.
static void take_line_settings(BatchRequest *req, GenSettings *g) {
    const LoraWeights *lora = req->params.lora;  // line_field's, not a setting
    req->params = g->params;
    req->params.lora = lora;
    if (g->stop_json) {
        memcpy(req->stops, g->stops, sizeof req->stops);
        req->params.stops = req->stops;
        req->stop_json = g->stop_json;
    }
    req->n_completions = g->n;
    req->echo = g->echo;
    req->grammar = g->grammar;
}

// The fields of a --jsonl line over the defaults in req->params. 0 or -1.
static int parse_jsonl(BatchRequest *req, const char *line, size_t len, size_t vocab, size_t n_ctx,
                       const BatchAdapters *ad, const char **prompt, size_t *prompt_len, int *seed_given) {
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    char msg[512];
    if (!o) {
        json_parse_error(line, len, end, msg, sizeof msg);
        return batch_request_fail(req, "%s", msg);
    }
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return batch_request_fail(req, "not a JSON object");
    }
    // one object per line: whatever follows it ({"prompt":"y"} too) is an error, never dropped
    while (end < line + len && (*end == ' ' || *end == '\t' || *end == '\r')) end++;
    if (end < line + len) {
        cJSON_Delete(o);
        return batch_request_fail(req, "text after the JSON object, at byte %ld", (long)(end - line));
    }
    int rc = -1;
    // the line's settings over the options' (req's), copied back below
    GenSettings g = {.params = req->params, .n = req->n_completions, .echo = req->echo};
    GenLimits limits = {.vocab_size = vocab};
    const char *generation_field = NULL;  // a field of generation the line has, if any
    size_t member = 0;  // f's place in the object
    for (const cJSON *f = o->child; f; f = f->next, member++) {
        const char *k = f->string;
        int known = setting_from_json(&g, &limits, f, line, len, member, msg, sizeof msg);
        if (known < 0) {
            batch_request_fail(req, "%s", msg);
            goto done;
        }
        if (!known && line_field(req, f, vocab, ad, prompt, prompt_len) != 0) goto done;
        if (known || (strcmp(k, "prompt") && strcmp(k, "id") && strcmp(k, "choices") && strcmp(k, "lora")))
            generation_field = k;
    }
    if (req->n_candidates && generation_field) {
        batch_request_fail(req, "%s does not apply to a line with \"choices\" (multiple choice generates nothing)",
                     generation_field);
        goto done;
    }
    if (settings_check_keep(&g, g.given[SETTING_KEEP], 1, n_ctx, msg, sizeof msg) != 0) {
        batch_request_fail(req, "%s", msg);
        goto done;
    }
    *seed_given = g.seed_given;
    if (!*prompt && !req->n_ids) {
        batch_request_fail(req, "no \"prompt\" field");
        goto done;
    }
    if (req->n_ids && req->n_candidates) {
        batch_request_fail(req, "\"choices\" needs a text prompt (each choice is tokenized with it)");
        goto done;
    }
    if (!*prompt) {  // token ids: the caller decodes their text
        rc = 0;
        goto done;
    }
    // the prompt string lives in o: keep it past o's deletion
    char *copy = malloc(*prompt_len + 1);
    if (!copy) {
        batch_request_fail(req, "out of memory");
        goto done;
    }
    memcpy(copy, *prompt, *prompt_len + 1);
    *prompt = copy;
    rc = 0;
done:
    take_line_settings(req, &g);
    cJSON_Delete(o);
    return rc;
}

// A multiple-choice request's choices (their texts set), each tokenized
// with the prompt (candidate_tokens) and checked against the context. 0, or
// -1 (the request failed).
static int candidates_tokenize(BatchRequest *req, Tokenizer *tok, const Model *m, int special, const char *prompt,
                               size_t prompt_len) {
    GptError err = {{0}};
    for (size_t i = 0; i < req->n_candidates; i++) {
        Candidate *r = &req->candidates[i];
        if (candidate_tokens(tok, prompt, prompt_len, r->text, strlen(r->text), special, &r->ids, &r->n, &r->first,
                          &err) != 0 ||
            check_prompt_length(&m->config, r->n, &err) != 0)
            return batch_request_fail(req, "%schoice %zu: %s", req->command ? "--" : "", i + 1, err.msg);
    }
    return 0;
}

// A multiple-choice line's choices, tokenized (candidates_tokenize). 0, or -1
// (the request failed).
static int candidates_from_line(BatchRequest *req, Tokenizer *tok, const Model *m, int special, const char *prompt,
                                size_t prompt_len) {
    if (!(req->candidates = calloc(req->n_candidates, sizeof *req->candidates))) return batch_request_fail(req, "out of memory");
    size_t i = 0;
    for (const cJSON *c = req->candidates_json->child; c; c = c->next, i++) req->candidates[i].text = c->valuestring;
    return candidates_tokenize(req, tok, m, special, prompt, prompt_len);
}

// A request for input line `index`: parsed, tokenized and checked, or failed.
// Line `index`'s request with the options' defaults, before its line is
// read; NULL when out of memory.
static BatchRequest *batch_request_new(const Options *o, const Grammar *grammar, uint64_t seed_base, uint64_t index) {
    BatchRequest *req = calloc(1, sizeof *req);
    if (!req) return NULL;
    req->index = index;
    req->params = (GenParams){.sampling = o->sampling, .max_new = (size_t)o->max_tokens,
                            .ignore_eos = o->ignore_eos, .stops = o->stops, .n_stops = o->n_stops,
                            .logprobs = o->logprobs >= 0, .top_logprobs = o->logprobs > 0 ? (size_t)o->logprobs : 0,
                            .context_shift = o->context_shift, .keep = (size_t)o->keep, .grammar = grammar};
    req->echo = o->echo;
    req->n_completions = (size_t)o->completions;
    req->params.sampling.seed = seed_base + index;
    return req;
}

static BatchRequest *request_from_line(const Options *o, Tokenizer *tok, const Model *m, const Grammar *grammar,
                                       const BatchAdapters *ad, uint64_t seed_base, uint64_t index, const char *line,
                                       size_t len) {
    BatchRequest *req = batch_request_new(o, grammar, seed_base, index);
    if (!req) return NULL;
    const char *prompt = line;
    size_t prompt_len = len;
    int seed_given = 0;
    char *owned_prompt = NULL;
    long nul = nul_at(line, len, o->jsonl);
    if (nul >= 0) {
        batch_request_fail(req, "a NUL byte at byte %ld of the line: gpt takes none (-p could not repeat the prompt)", nul);
        return req;
    }
    if (o->jsonl) {
        prompt = NULL;
        if (parse_jsonl(req, line, len, (size_t)m->config.vocab_size, (size_t)m->config.n_ctx, ad, &prompt, &prompt_len,
                        &seed_given) != 0)
            return req;
        owned_prompt = (char *)prompt;
    }
    GptError decode_err = {{0}};
    if (!prompt && tokenizer_decode(tok, req->ids, req->n_ids, &owned_prompt, &prompt_len, &decode_err) != 0) {
        batch_request_fail(req, "prompt: %s", decode_err.msg);
        return req;
    }
    if (!prompt) prompt = owned_prompt;  // the token ids' text, for "prompt" and echo
    GptError err = {{0}};
    if (req->echo && req->params.logprobs) req->params.logprobs_from = 1;
    if (req->n_completions > 1 && o->text_output)
        batch_request_fail(req, "\"n\": %zu and --text exclude each other (--text writes one text per input line; without "
                     "--text the JSON line lists its \"completions\")", req->n_completions);
    else if (req->params.logprobs && o->text_output)
        batch_request_fail(req, "\"logprobs\" and --text exclude each other (--text writes only the text; without --text "
                     "the JSON line has its \"logprobs\")");
    else if (echo_prompt(req, prompt, prompt_len) != 0) batch_request_fail(req, "out of memory");
    else if (req->n_candidates) candidates_from_line(req, tok, m, o->special, prompt, prompt_len);
    else if (sampler_params_validate(&req->params.sampling, &err) != 0) batch_request_fail(req, "%s", err.msg);
    else if ((!req->ids && prompt_tokens(tok, prompt, prompt_len, o->special, &req->ids, &req->n_ids, &err) != 0) ||
             check_prompt_length(&m->config, req->n_ids, &err) != 0)
        batch_request_fail(req, "%s", err.msg);
    free(owned_prompt);
    return req;
}

char *batch_line_error(const Options *o, Tokenizer *tok, const Model *m, uint64_t index, const char *line,
                       size_t len) {
    BatchRequest *req = request_from_line(o, tok, m, NULL, NULL, 0, index, line, len);
    if (!req) return strdup("out of memory");
    char *error = req->error;
    req->error = NULL;
    batch_request_free(req, NULL);
    return error;
}

// ----------------------------------------------------------------------------
// the run

// Log-spaced buckets of the time between two tokens of one sequence, for
// the median and the maximum without keeping every gap.
enum { GAP_BUCKETS = 600 };  // 10 us .. 100 s, 100 per decade
typedef struct {
    size_t count[GAP_BUCKETS], n;
    double max;
} GapHistogram;

static void gap_add(GapHistogram *h, double s) {
    int b = s <= 1e-5 ? 0 : (int)(100 * log10(s / 1e-5));
    h->count[b < GAP_BUCKETS ? b : GAP_BUCKETS - 1]++;
    h->n++;
    if (s > h->max) h->max = s;
}

static double gap_median(const GapHistogram *h) {
    size_t seen = 0;
    for (int b = 0; b < GAP_BUCKETS; b++)
        if ((seen += h->count[b]) * 2 >= h->n && h->n) return 1e-5 * pow(10, (b + 0.5) / 100);
    return 0;
}

typedef struct {
    const Options *o;
    const Model *m;
    const char *model_file;  // the model that runs, as found
    Tokenizer *tok;
    Engine engine;
    Scheduler sched;        // the sequences of the requests in flight
    Grammar *grammar;       // the options' grammar (every line's default), or NULL
    GrammarVocab *vocab;    // the tokens' trie, made when a line first has a grammar
    size_t in_flight;       // requests with sequences in the scheduler
    BatchRequest **queue;            // every request read and not yet written, in input order
    size_t q_head, q_len, q_cap;
    size_t lines, failed, written;
    size_t interrupted;     // lines read and stopped by Ctrl-C (or SIGTERM) before their end
    size_t not_read;        // after an interruption: input lines never read
    int not_read_exact;     // ... all of them (stdin had ended), else at least that many
    size_t generated;       // tokens generated, all lines together
    Progress progress;      // the progress line on stderr
    size_t input_total;     // stdin's bytes when it is a file (from where it stood), else 0
    size_t input_done;      // bytes of the lines written
    int stdout_terminal;    // results go to the terminal the progress line is on
    GapHistogram gaps;
    double t0;
    int write_failed;
    BatchAdapters adapters;  // --lora NAME=PATH
} Batch;

static int queue_push(Batch *b, BatchRequest *req) {
    if (b->q_len == b->q_cap) {
        size_t cap = b->q_cap ? 2 * b->q_cap : 64;
        BatchRequest **q = malloc(cap * sizeof *q);
        if (!q) return -1;
        for (size_t i = 0; i < b->q_len; i++) q[i] = b->queue[(b->q_head + i) % b->q_cap];
        free(b->queue);
        b->queue = q;
        b->q_cap = cap;
        b->q_head = 0;
    }
    b->queue[(b->q_head + b->q_len++) % b->q_cap] = req;
    return 0;
}

static BatchRequest *queue_at(const Batch *b, size_t i) { return b->queue[(b->q_head + i) % b->q_cap]; }

// BatchOutput k of a finished request into c: text, ids, why it stopped, its
// seed, log-probabilities and KV cache (with one completion, c is the line).
static void add_completion_json(const Batch *b, BatchRequest *req, size_t k, cJSON *c) {
    const Sequence *s = &req->seqs[k];
    BatchOutput *out = &req->outs[k];
    size_t per_token = kvcache_bytes_per_token(&b->m->config, b->o->kv_dtype);
    if (out->text) out->text[out->len] = '\0';
    cJSON_AddStringToObject(c, "text", out->text ? out->text : "");
    cJSON_AddItemToObject(c, "tokens", ids_json(s->tokens + s->n_prompt, s->n_generated));
    if (req->n_completions == 1) {
        cJSON_AddItemToObject(c, "prompt_ids", ids_json(s->tokens, s->n_prompt));
        cJSON_AddNumberToObject(c, "prompt_tokens", (double)s->n_prompt);
    }
    cJSON_AddStringToObject(c, "stop_reason", out->stop_reason ? out->stop_reason : req->stop_reason);
    cJSON_AddItemToObject(c, "seed", seed_json(req->params.sampling.seed + k));
    if (s->logprobs)  // the generated tokens', or (echo) every token's from the prompt's first
        cJSON_AddItemToObject(c, "logprobs",
                              req->echo ? logprobs_json(b->tok, s->tokens, s->n_tokens, s->lp, s->lp_from, 0)
                                      : logprobs_json(b->tok, s->tokens + s->n_prompt, s->n_generated, s->lp, 0, 0));
    cJSON *st = cJSON_CreateObject();
    cJSON_AddNumberToObject(st, "seq_tokens", (double)s->positions);
    cJSON_AddNumberToObject(st, "kv_bytes_sequence", (double)(s->positions * per_token));
    cJSON_AddNumberToObject(st, "prefix_tokens_reused", (double)s->prefix_reused);
    cJSON_AddNumberToObject(st, "prefill_tokens", (double)s->prefill_tokens);
    cJSON_AddNumberToObject(st, "decode_tokens", (double)s->decode_tokens);
    if (s->context_shift) cJSON_AddNumberToObject(st, "context_shifts", (double)s->shifts);
    cJSON_AddItemToObject(c, "stats", st);
}

// The result line of a finished request.
static int write_request(Batch *b, BatchRequest *req) {
    const Options *o = b->o;
    if (req->error) {
        b->failed++;
        if (o->text_output) {
            progress_clear(&b->progress);
            // the line of stdin, counted from 1 as editors and sed -n count
            runtime_error(NULL, "line %llu: %s", (unsigned long long)(req->index - o->first_index + 1), req->error);
            return out_write("\n", 1) || out_flush() ? -1 : 0;
        }
    }
    if (o->text_output) {
        // a multiple-choice line's text is its most likely choice
        const char *t = req->outs ? req->outs[0].text : NULL;
        size_t n = req->outs ? req->outs[0].len : 0;
        if (req->n_candidates && !strcmp(req->stop_reason, "choice")) {
            t = req->candidates[candidate_best(req->candidates, req->n_candidates, 0)].text;
            n = strlen(t);
        }
        return print_escaped((const unsigned char *)t, n) || out_write("\n", 1) || out_flush() ? -1 : 0;
    }
    cJSON *r = cJSON_CreateObject();
    cJSON_AddItemToObject(r, "index", u64_json(req->index));
    if (req->id) cJSON_AddItemToObject(r, "id", cJSON_Duplicate(req->id, 1));
    if (req->error) {
        cJSON_AddStringToObject(r, "error", req->error);
    } else if (req->n_candidates) {
        cJSON_AddStringToObject(r, "prompt", req->prompt);
        if (req->prompt_hex) cJSON_AddStringToObject(r, "prompt_hex", req->prompt_hex);
        if (!strcmp(req->stop_reason, "choice")) add_candidates_json(r, req->candidates, req->n_candidates);
        else cJSON_AddStringToObject(r, "stop_reason", req->stop_reason);  // interrupted
        size_t reused = 0, prefilled = 0;
        for (size_t i = 0; i < req->n_seqs; i++) {
            reused += req->seqs[i].prefix_reused;
            prefilled += req->seqs[i].prefill_tokens;
        }
        cJSON *st = cJSON_CreateObject();
        cJSON_AddNumberToObject(st, "prefix_tokens_reused", (double)reused);
        cJSON_AddNumberToObject(st, "prefill_tokens", (double)prefilled);
        cJSON_AddItemToObject(r, "stats", st);
    } else {
        // one completion: its fields in the line; several: a list of them
        const Sequence *s0 = &req->seqs[0];
        cJSON_AddStringToObject(r, "prompt", req->prompt);
        if (req->prompt_hex) cJSON_AddStringToObject(r, "prompt_hex", req->prompt_hex);
        cJSON *list = req->n_completions > 1 ? cJSON_CreateArray() : NULL;
        for (size_t k = 0; k < req->n_completions; k++) {
            cJSON *c = list ? cJSON_CreateObject() : r;
            if (list) cJSON_AddNumberToObject(c, "index", (double)k);
            add_completion_json(b, req, k, c);
            if (list) cJSON_AddItemToArray(list, c);
        }
        if (list) {
            cJSON_AddItemToObject(r, "prompt_ids", ids_json(s0->tokens, s0->n_prompt));
            cJSON_AddNumberToObject(r, "prompt_tokens", (double)s0->n_prompt);
            cJSON_AddItemToObject(r, "seed", seed_json(req->params.sampling.seed));  // completion k's: seed + k
            cJSON_AddItemToObject(r, "completions", list);
        }
    }
    int rc = out_json_line(r) || out_flush() ? -1 : 0;
    cJSON_Delete(r);
    return rc;
}

// Writes what is done: in order, the done requests at the head of the queue; or
// (--unordered) every done request. Frees them.
static int write_done(Batch *b) {
    size_t keep = 0;
    for (size_t i = 0; i < b->q_len; i++) {
        BatchRequest *req = queue_at(b, i);
        int ready = req->done && !req->n_held && (b->o->unordered || keep == 0);
        if (!ready) {
            b->queue[(b->q_head + keep++) % b->q_cap] = req;
            continue;
        }
        if (b->stdout_terminal) progress_clear(&b->progress);
        if (!b->write_failed && write_request(b, req) != 0) b->write_failed = 1;
        b->written++;
        b->input_done += req->input_bytes;
        batch_request_free(req, &b->engine);
    }
    b->q_len = keep;
    return b->write_failed ? -1 : 0;
}

// A request stops: its texts are complete (a completion still running ends
// for the same reason: interrupted).
static void finish(BatchRequest *req, const char *reason) {
    req->done = 1;
    req->stop_reason = reason;
    for (size_t k = 0; req->outs && k < req->n_completions; k++)
        if (!req->outs[k].stop_reason) req->outs[k].stop_reason = reason;
}

static int append_text(BatchOutput *c, const char *p, size_t n) {
    if (n > SIZE_MAX - 1 - c->len || grow_array(&c->text, &c->cap, c->len + n + 1, 1) != 0) return -1;
    memcpy(c->text + c->len, p, n);
    c->len += n;
    return 0;
}

static void print_batch_stats(const Batch *b, double wall) {
    const Options *o = b->o;
    const Engine *e = &b->engine;
    const GPT2Config *c = &b->m->config;
    KVPoolStats ps = kvpool_stats(e->kv);
    size_t per_token = kvcache_bytes_per_token(c, o->kv_dtype);
    size_t HS = (size_t)(c->n_embd / c->n_head);
    double median = gap_median(&b->gaps);
    double prefill_rate = b->sched.prefill_seconds > 0 ? (double)e->prefill_tokens / b->sched.prefill_seconds : 0;
    if (o->stats_json) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "model", b->model_file);
        cJSON_AddNumberToObject(s, "lines", (double)b->lines);
        cJSON_AddNumberToObject(s, "failed", (double)b->failed);
        cJSON_AddNumberToObject(s, "interrupted", (double)b->interrupted);
        cJSON_AddNumberToObject(s, "not_read", (double)b->not_read);
        cJSON_AddBoolToObject(s, "not_read_exact", b->not_read_exact);
        cJSON_AddNumberToObject(s, "wall_seconds", wall);
        cJSON_AddNumberToObject(s, "parallel", (double)o->parallel);
        char dts[32];
        cJSON_AddStringToObject(s, "weight_dtype", model_matrix_dtypes(b->m, dts, sizeof dts));
        cJSON_AddStringToObject(s, "kv_type", dtype_name(o->kv_dtype));   // --kv-type
        cJSON_AddStringToObject(s, "kv_dtype", dtype_name(o->kv_dtype));  // its old name, until 0.2
        cJSON_AddNumberToObject(s, "kv_bytes_per_token", (double)per_token);
        cJSON_AddNumberToObject(s, "kv_block_tokens", KV_BLOCK);
        cJSON_AddNumberToObject(s, "kv_block_bytes", (double)ps.block_bytes);
        cJSON_AddNumberToObject(s, "kv_blocks", (double)ps.n_blocks);
        cJSON_AddNumberToObject(s, "kv_budget_bytes", (double)(ps.n_blocks * ps.block_bytes));
        cJSON_AddNumberToObject(s, "kv_peak_bytes_held", (double)(ps.peak_held * ps.block_bytes));
        cJSON_AddNumberToObject(s, "prefix_tokens_reused", (double)e->prefix_tokens_reused);
        cJSON_AddNumberToObject(s, "prefill_tokens_saved", (double)e->prefix_tokens_reused);
        cJSON_AddNumberToObject(s, "prefill_tokens", (double)e->prefill_tokens);
        cJSON_AddNumberToObject(s, "decode_tokens", (double)e->decode_tokens);
        cJSON_AddNumberToObject(s, "steps", (double)e->steps);
        cJSON_AddNumberToObject(s, "prefill_steps", (double)b->sched.prefill_steps);
        cJSON_AddNumberToObject(s, "prefill_seconds", b->sched.prefill_seconds);
        cJSON_AddNumberToObject(s, "prefill_tok_s", prefill_rate);
        cJSON_AddNumberToObject(s, "decode_tok_s", wall > 0 ? (double)e->decode_tokens / wall : 0);
        cJSON_AddNumberToObject(s, "token_gap_max_seconds", b->gaps.max);
        cJSON_AddNumberToObject(s, "token_gap_median_seconds", median);
        cJSON_AddNumberToObject(s, "peak_rss_bytes", (double)peak_rss_bytes());
        cJSON_AddStringToObject(s, "kernels", matmul_isa_in_use());
        char *txt = cJSON_PrintUnformatted(s);
        if (txt) fprintf(stderr, "%s\n", txt);
        free(txt);
        cJSON_Delete(s);
    }
    if (!o->stats) return;
    FILE *f = stderr;
    fprintf(f, "model:      %s\n", b->model_file);
    fprintf(f, "lines:      %zu (%zu failed, %zu interrupted) in %.3f s, %ld in parallel; %s%zu not read\n", b->lines,
            b->failed, b->interrupted, wall, o->parallel, b->not_read_exact ? "" : "at least ", b->not_read);
    fprintf(f, "kv cache:   2 x %d layers x %d heads x %zu dims x %zu bytes (%s) = %zu B/token\n", c->n_layer,
            c->n_head, HS, kv_elem_size(o->kv_dtype), dtype_name(o->kv_dtype), per_token);
    fprintf(f, "kv pool:    %zu blocks of %d tokens (%zu B), budget %zu B, peak held %zu B\n", ps.n_blocks, KV_BLOCK,
            ps.block_bytes, ps.n_blocks * ps.block_bytes, ps.peak_held * ps.block_bytes);
    fprintf(f, "prefix:     %zu prompt tokens reused, %zu prefill tokens saved\n", e->prefix_tokens_reused,
            e->prefix_tokens_reused);
    fprintf(f, "prefill:    %zu tokens in %zu steps (%.3f s) = %.1f tok/s over the steps that prefilled\n",
            e->prefill_tokens, b->sched.prefill_steps, b->sched.prefill_seconds,
            prefill_rate);
    fprintf(f, "decode:     %zu tokens, %.1f tok/s of wall time, %zu steps\n", e->decode_tokens,
            wall > 0 ? (double)e->decode_tokens / wall : 0, e->steps);
    fprintf(f, "token gap:  median %.4f s, largest %.4f s (between two tokens of one sequence)\n", median,
            b->gaps.max);
    fprintf(f, "threads:    %ld (kernels %s)\n", o->threads, matmul_isa_in_use());
    fprintf(f, "peak rss:   %zu B (%.1f MiB)\n", peak_rss_bytes(), (double)peak_rss_bytes() / (1 << 20));
}

// The progress line: lines written of those read, the generation rate, and
// when stdin is a file, how much of it is done and the time left.
static void show_batch_progress(Batch *b) {
    Progress *p = &b->progress;
    double seconds = progress_elapsed(p);
    char eta[32] = "", part[32] = "";
    if (b->input_total) {
        double fraction = (double)b->input_done / (double)b->input_total;
        snprintf(part, sizeof part, ", %.0f%% of stdin", 100 * fraction);
        progress_eta(p, fraction, eta, sizeof eta);
    }
    progress_update(p, "gpt --batch: %zu/%zu lines done, %.0f tok/s%s%s", b->written, b->lines,
                    seconds > 0 ? (double)b->generated / seconds : 0.0, part, eta);
}

// The bytes of stdin from where it stands to its end, when it is a regular
// file (how far along the run is); 0 for a pipe or a terminal.
static size_t stdin_file_bytes(void) {
    struct stat st;
    if (fstat(STDIN_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    off_t at = lseek(STDIN_FILENO, 0, SEEK_CUR);
    return at >= 0 && at < st.st_size ? (size_t)(st.st_size - at) : 0;
}

// A request's sequences: one per completion (seeds seed, seed + 1, ...: the
// first computes the prompt, the others share its blocks, engine_admit),
// or one per choice that reports the log-probabilities of the choice's
// tokens and generates nothing. 0, or -1 with err set.
static int batch_request_sequences(BatchRequest *req, Engine *e, GptError *err) {
    size_t n = req->n_candidates ? req->n_candidates : req->n_completions;
    if (!(req->seqs = calloc(n, sizeof *req->seqs))) return gpt_error(err, "out of memory");
    if (!req->n_candidates && !(req->outs = calloc(n, sizeof *req->outs))) return gpt_error(err, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const int32_t *ids = req->n_candidates ? req->candidates[i].ids : req->ids;
        size_t n_ids = req->n_candidates ? req->candidates[i].n : req->n_ids;
        GenParams own = req->params;
        own.sampling.seed += i;
        GenParams choice = {.sampling = {.temperature = 0.0f, .top_p = 1.0f, .repeat_penalty = 1.0f},
                            .logprobs = 1, .logprobs_from = req->n_candidates ? req->candidates[i].first : 0,
                            .lora = own.lora};
        req->n_seqs = i + 1;
        if (sequence_init(&req->seqs[i], e, ids, n_ids, req->n_candidates ? &choice : &own, err) != 0) return -1;
        // echo: the text starts with the prompt (as UTF-8, as "prompt" shows it)
        if (req->echo && !req->n_candidates && append_text(&req->outs[i], req->prompt, strlen(req->prompt)) != 0)
            return gpt_error(err, "out of memory");
    }
    return 0;
}

// ----------------------------------------------------------------------------
// the scheduler's hooks (scheduler.h): request is the BatchRequest, index the
// completion's or the candidate's

// A request that failed or was interrupted: its other sequences are dropped.
static int hook_dropped(void *ctx, void *request) {
    (void)ctx;
    return ((BatchRequest *)request)->done;
}

// A completion's new text, and the time since its last token.
static void hook_stepped(void *ctx, void *request, size_t index, Sequence *s) {
    Batch *b = ctx;
    BatchRequest *req = request;
    if (req->n_candidates || req->done) return;
    BatchOutput *c = &req->outs[index];
    if (s->out_len && append_text(c, s->out, s->out_len) != 0)
        batch_request_fail(req, "out of memory%s", req->command ? " for the --json text" : "");
    if (s->last_token >= 0) {
        b->generated++;
        double now = b->sched.last_step_end;
        if (c->last_token_at > 0) gap_add(&b->gaps, now - c->last_token_at);
        c->last_token_at = now;
    }
}

// A multiple-choice request is done when all its candidates are.
static void candidates_done(BatchRequest *req, const Tokenizer *tok) {
    for (size_t i = 0; i < req->n_candidates; i++) {
        req->candidates[i].lp = req->seqs[i].lp;
        candidate_measure(tok, &req->candidates[i]);
        if (!isfinite(req->candidates[i].sum)) {
            batch_request_fail(req, "%schoice %zu: the model produced a non-finite log-probability", req->command ? "--" : "",
                         i + 1);
            return;
        }
    }
    finish(req, "choice");
}

static void hook_ended(void *ctx, void *request, size_t index, Sequence *s, SchedEnd why, const GptError *err) {
    Batch *b = ctx;
    BatchRequest *req = request;
    req->n_ended++;
    if (--req->n_held == 0) b->in_flight--;
    if (req->done) return;  // failed already: nothing more to say
    switch (why) {
    case SCHED_DROPPED:
        finish(req, "interrupted");
        b->interrupted++;
        return;
    case SCHED_REFUSED: case SCHED_FAILED: batch_request_fail(req, "%s", err->msg); return;
    case SCHED_NO_ROOM: batch_request_fail(req, "the KV pool cannot take this sequence now"); return;
    case SCHED_STOPPED: break;
    }
    if (s->stop == STOP_ERROR) {
        if (req->command) batch_request_fail(req, "%s", s->error.msg);
        else if (req->n_candidates) batch_request_fail(req, "choice %zu: %s", index + 1, s->error.msg);
        else if (req->n_seqs > 1) batch_request_fail(req, "completion %zu: %s", index, s->error.msg);
        else batch_request_fail(req, "%s", s->error.msg);
        return;
    }
    if (!req->n_candidates) req->outs[index].stop_reason = stop_reason_name(s->stop);
    if (req->n_ended < req->n_seqs) return;
    if (req->n_candidates) candidates_done(req, b->tok);
    else finish(req, req->outs[0].stop_reason);
}

// ----------------------------------------------------------------------------
// the run

// The engine as ec says, and its scheduler of `parallel` places with the
// hooks above. 0, or an exit code after reporting.
static int batch_engine(Batch *b, const Session *ss, const EngineConfig *ec, size_t parallel) {
    SchedulerHooks hooks = {.ctx = b, .dropped = hook_dropped, .stepped = hook_stepped, .ended = hook_ended};
    GptError err = {{0}};
    if (engine_init(&b->engine, &ss->model, b->tok, ec, &err) != 0) return report_error(&err);
    if (scheduler_init(&b->sched, &b->engine, parallel, &hooks, &err) != 0) {
        engine_free(&b->engine);
        return report_error(&err);
    }
    return EXIT_OK;
}

// A request's sequences (batch_request_sequences), handed to the scheduler. 0, or
// -1 with err set (the ones handed over stay held).
static int batch_request_submit(Batch *b, BatchRequest *req, GptError *err) {
    if (batch_request_sequences(req, &b->engine, err) != 0) return -1;
    int rc = 0;
    for (size_t k = 0; k < req->n_seqs && rc == 0; k++)
        if ((rc = scheduler_add(&b->sched, req, k, &req->seqs[k], err)) == 0) req->n_held++;
    if (req->n_held) b->in_flight++;
    return rc;
}

// The engine and its scheduler for the options. 0, or an exit code after
// reporting.
static int batch_open(Batch *b, const Session *ss) {
    const Options *o = b->o;
    const Model *mp = &ss->model;
    // A budget that no line can run in is the option's error, before any
    // line is read (a line that alone needs more is that line's error).
    size_t block_bytes = kvcache_bytes_per_token(&mp->config, o->kv_dtype) * KV_BLOCK;
    size_t kv_blocks = kv_blocks_for_budget(&mp->config, o->kv_dtype, o->kv_budget, (size_t)o->parallel);
    if (kv_blocks == 0)
        return usage_error(NULL,
                           "--kv-budget %s: less than one block of this model's KV cache (%d positions, %zu bytes)",
                           o->kv_budget_arg, KV_BLOCK, block_bytes);
    note_kv_budget(o->quiet, o->kv_budget_arg, o->kv_budget, kv_blocks, block_bytes);
    char why[160];
    if (settings_check_keep(&o->gen, 0, 0, (size_t)mp->config.n_ctx, why, sizeof why) != 0)
        return usage_error(NULL, "%s", why);
    for (size_t i = 0; i < o->n_lora; i++) {
        if (!o->lora[i].name) continue;
        GptError err = {{0}};
        if (lora_weights_load(&b->adapters.w[b->adapters.n], &o->lora[i], &mp->config, &err) != 0)
            return report_error(&err);
        b->adapters.name[b->adapters.n++] = o->lora[i].name;
    }
    EngineConfig ec = {.max_seqs = (size_t)o->parallel, .max_step_tokens = (size_t)(o->parallel + o->prefill_chunk),
                       .kv_dtype = o->kv_dtype, .kv_blocks = kv_blocks, .share_prefixes = o->share_prefixes,
                       .pool = ss->pool, .plan = &ss->plan, .prompt_logit_rows = (size_t)o->prefill_chunk};
    return batch_engine(b, ss, &ec, (size_t)o->parallel);
}

// Reads new lines while fewer than --parallel requests are in flight and the
// ordered output's window has room; each becomes a request, queued for output,
// its sequences handed to the scheduler (a bad line is done at once: its
// error is its result). 0, or -1 (out of memory, or stdin failed: reported).
static int read_lines(Batch *b, LineReader *in, uint64_t seed_base, size_t window) {
    const Options *o = b->o;
    GptError err = {{0}};
    while (!in->eof && b->in_flight < (size_t)o->parallel && b->q_len < window) {
        char *line;
        size_t len;
        int idle = scheduler_held(&b->sched) == 0;  // nothing to do but wait for input
        size_t consumed_before = in->consumed;
        int got = next_line(in, idle, &line, &len);
        if (got <= 0) break;
        BatchRequest *req = got == 2 ? batch_request_new(o, b->grammar, seed_base, o->first_index + b->lines)
                              : request_from_line(o, b->tok, b->m, b->grammar, &b->adapters, seed_base,
                                                  o->first_index + b->lines, line, len);
        if (req && got == 2)
            batch_request_fail(req, "the line is %zu bytes, longer than the %d MiB a --batch line may have", len,
                         BATCH_LINE_MAX >> 20);
        if (!req || queue_push(b, req) != 0) {
            batch_request_free(req, &b->engine);
            runtime_error(NULL, "out of memory");
            return -1;
        }
        b->lines++;
        req->input_bytes = in->consumed - consumed_before;
        if (req->done) continue;
        if (req->params.grammar && !b->vocab &&
            !(b->vocab = sequence_grammar_vocab(b->tok, (size_t)b->m->config.vocab_size, &err))) {
            batch_request_fail(req, "%s", err.msg);
            continue;
        }
        req->params.grammar_vocab = b->vocab;
        if (batch_request_submit(b, req, &err) != 0) batch_request_fail(req, "%s", err.msg);
    }
    return in->error ? -1 : 0;
}

// After Ctrl-C: the lines never read, counted as far as stdin has them now
// (to its end for a file, or a pipe whose writer is done), never waited for.
static void count_unread(Batch *b, LineReader *in) {
    char *line;
    size_t len;
    int got;
    while ((got = next_line(in, 0, &line, &len)) > 0) b->not_read++;
    b->not_read_exact = got < 0 && !in->error;
    runtime_error(NULL, "--batch interrupted: %zu lines answered, %zu of them stopped early; %s%zu lines not read",
                  b->lines, b->interrupted, b->not_read_exact ? "" : "at least ", b->not_read);
}

int run_batch(const Options *o) {
    Session ss;
    catch_interrupts();
    Grammar *grammar;
    int rc = options_grammar(o, &grammar);
    if (rc != EXIT_OK) return rc;
    if ((rc = session_open(&ss, o)) != EXIT_OK) {
        grammar_free(grammar);
        return rc;
    }
    Batch b = {.o = o, .m = &ss.model, .model_file = ss.model_path, .tok = ss.tok, .grammar = grammar};
    if ((rc = batch_open(&b, &ss)) != EXIT_OK) {
        for (size_t i = 0; i < b.adapters.n; i++) lora_weights_free(&b.adapters.w[i]);
        grammar_free(grammar);
        session_close(&ss);
        return rc;
    }
    rc = EXIT_RUNTIME;
    GptError err = {{0}};
    LineReader in = {.fd = STDIN_FILENO};
    uint64_t seed_base = run_seed(o);
    // Ordered output holds done requests until those before them are done: read
    // no further than this many lines past the oldest one not yet written.
    size_t window = 4 * (size_t)o->parallel + 64;
    int interrupted_run = 0;
    defer_interrupts();  // from here on a signal ends the run after its step
    b.t0 = now_seconds();
    progress_init(&b.progress, o->progress);
    b.input_total = stdin_file_bytes();
    b.stdout_terminal = isatty(STDOUT_FILENO);
    for (;;) {
        if (was_interrupted()) interrupted_run = 1;
        if (!interrupted_run && read_lines(&b, &in, seed_base, window) != 0) goto done;
        if (interrupted_run) {
            scheduler_drop_all(&b.sched);
        } else if (scheduler_step(&b.sched, &err) != 0) {
            progress_clear(&b.progress);
            report_error(&err);
            goto done;
        }
        if (write_done(&b) != 0) goto done;
        show_batch_progress(&b);
        if ((in.eof || interrupted_run) && !scheduler_held(&b.sched) && b.q_len == 0) break;
    }
    double wall = now_seconds() - b.t0;
    progress_clear(&b.progress);
    b.not_read_exact = 1;
    if (interrupted_run) count_unread(&b, &in);
    print_batch_stats(&b, wall);
    rc = interrupted_run ? EXIT_INTERRUPTED : b.failed ? EXIT_RUNTIME : EXIT_OK;
done:
    progress_clear(&b.progress);
    scheduler_drop_all(&b.sched);
    for (size_t i = 0; i < b.q_len; i++) batch_request_free(queue_at(&b, i), &b.engine);
    free(b.queue);
    free(in.buf);
    scheduler_free(&b.sched);
    engine_free(&b.engine);
    grammar_free(b.grammar);
    grammar_vocab_free(b.vocab);
    for (size_t i = 0; i < b.adapters.n; i++) lora_weights_free(&b.adapters.w[i]);
    session_close(&ss);
    return rc;
}

// ----------------------------------------------------------------------------
// one request of the command: --completions N, --choice

// The engine for the command's one request req alone: a place and a pool for
// every sequence at once, and each prompt in one step; for choices, every
// choice's rows with logits in one step (up to a bound on the logits'
// memory); for completions with --echo and log-probabilities, SCORE_CHUNK
// prompt rows a step, and with a context shift, half the context in one
// step.
static EngineConfig one_request_engine(const Options *o, const Session *ss, const BatchRequest *req) {
    EngineConfig ec = {.kv_dtype = o->kv_dtype, .share_prefixes = 1, .pool = ss->pool, .plan = &ss->plan};
    if (req->n_candidates) {
        size_t longest = 0, rows = 0;
        for (size_t i = 0; i < req->n_candidates; i++) {
            const Candidate *c = &req->candidates[i];
            if (c->n > longest) longest = c->n;
            rows += c->n - c->first + 1;
            ec.kv_blocks += (c->n + KV_BLOCK - 1) / KV_BLOCK;
        }
        ec.max_seqs = req->n_candidates;
        ec.prompt_logit_rows = rows < 512 ? rows : 512;
        ec.max_step_tokens = longest > ec.prompt_logit_rows ? longest : ec.prompt_logit_rows;
        return ec;
    }
    size_t n = req->n_completions, n_prompt = req->n_ids, half = (size_t)ss->model.config.n_ctx / 2;
    size_t positions = sequence_positions(&ss->model.config, n_prompt, req->params.max_new);
    ec.max_seqs = n;
    ec.max_step_tokens = o->context_shift && half > n_prompt ? half + n : n_prompt + n;
    ec.kv_blocks = n * ((positions + KV_BLOCK - 1) / KV_BLOCK);
    if (req->params.logprobs && req->echo) ec.prompt_logit_rows = n_prompt < SCORE_CHUNK ? n_prompt : SCORE_CHUNK;
    return ec;
}

// The command's request for in: the prompt's tokens and text (--completions)
// or the choices tokenized with it (--choice). 0, or -1 after reporting.
static int one_request_fill(BatchRequest *req, const Options *o, const Session *ss, const OneRequest *in) {
    req->command = 1;
    req->params.grammar_vocab = in->vocab;
    if (echo_prompt(req, in->prompt, in->prompt_len) != 0) return runtime_error(NULL, "out of memory"), -1;
    if (o->mode == MODE_CHOICE) {
        req->n_candidates = o->n_choices;
        if (!(req->candidates = calloc(req->n_candidates, sizeof *req->candidates)))
            return runtime_error(NULL, "out of memory"), -1;
        for (size_t i = 0; i < req->n_candidates; i++) req->candidates[i].text = o->choices[i];
        if (candidates_tokenize(req, ss->tok, &ss->model, o->special, in->prompt, in->prompt_len) != 0)
            return runtime_error(NULL, "%s", req->error), -1;
        return 0;
    }
    if (req->echo && req->params.logprobs) req->params.logprobs_from = 1;
    if (!(req->ids = malloc(in->n_ids * sizeof *req->ids))) return runtime_error(NULL, "out of memory"), -1;
    memcpy(req->ids, in->ids, in->n_ids * sizeof *req->ids);
    req->n_ids = in->n_ids;
    return 0;
}

// Ctrl-C: every sequence not stopped lets out what it held back for a stop
// string, which is its text's too.
static void one_request_interrupt(BatchRequest *req) {
    for (size_t k = 0; k < req->n_seqs; k++) {
        Sequence *s = &req->seqs[k];
        if (s->stop) continue;
        sequence_interrupt(s);
        if (req->outs && s->out_len && append_text(&req->outs[k], s->out, s->out_len) != 0)
            batch_request_fail(req, "out of memory for the --json text");
    }
}

int run_one_request(const Options *o, const Session *ss, const OneRequest *in, OneReport report, void *ctx) {
    Batch b = {.o = o, .m = &ss->model, .model_file = ss->model_path, .tok = ss->tok};
    GptError err = {{0}};
    int rc = EXIT_RUNTIME, engine_up = 0, interrupted = 0;
    const char **texts = NULL;
    BatchRequest *req = batch_request_new(o, in->grammar, run_seed(o), 0);
    if (!req) {
        runtime_error(NULL, "out of memory");
        return rc;
    }
    if (one_request_fill(req, o, ss, in) != 0) goto done;
    EngineConfig ec = one_request_engine(o, ss, req);
    if (batch_engine(&b, ss, &ec, ec.max_seqs) != EXIT_OK) goto done;
    engine_up = 1;
    if (batch_request_submit(&b, req, &err) != 0) {
        report_error(&err);
        goto done;
    }
    defer_interrupts();  // from here on a signal ends the run after its step
    while (scheduler_held(&b.sched) && !req->error) {
        if ((interrupted = was_interrupted())) {
            one_request_interrupt(req);
            break;
        }
        if (scheduler_step(&b.sched, &err) != 0) {
            report_error(&err);
            goto done;
        }
    }
    if (req->error) {
        runtime_error(NULL, "%s", req->error);
        goto done;
    }
    OneRun run = {.engine = &b.engine, .seqs = req->seqs, .n_seqs = req->n_seqs, .candidates = req->candidates,
                  .seed = req->params.sampling.seed, .interrupted = interrupted};
    if (req->outs) {
        if (!(texts = calloc(req->n_seqs, sizeof *texts))) {
            runtime_error(NULL, "out of memory");
            goto done;
        }
        for (size_t k = 0; k < req->n_seqs; k++) {
            if (req->outs[k].text) req->outs[k].text[req->outs[k].len] = '\0';
            texts[k] = req->outs[k].text ? req->outs[k].text : "";
        }
        run.texts = texts;
    }
    rc = report(ctx, &run);
done:
    free(texts);
    if (engine_up) scheduler_drop_all(&b.sched);
    batch_request_free(req, &b.engine);
    if (engine_up) {
        scheduler_free(&b.sched);
        engine_free(&b.engine);
    }
    return rc;
}
