/*
 * gpt.c - the public C API (gpt.h): a third front-end, beside the command
 * and the server, on the same library calls. A model is a Session
 * (front.h) opened from a path; a generation is one sequence of its own
 * engine, as `gpt -p` runs it (src/cli/run_model.c), so its bits are the
 * command's; the settings are the one table's (src/front/settings.c), read
 * from JSON text as a gpt serve body's fields are. Nothing here prints:
 * every failure is a gpt_status and a message in the caller's gpt_err.
 */
#include <cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gpt.h"
#include "base/grow.h"
#include "base/utf8.h"
#include "embed.h"
#include "engine.h"
#include "front/chat.h"
#include "front/front.h"
#include "model/loader.h"
#include "scheduler.h"
#include "score.h"

struct gpt_model {
    Session s;
    DType kv_dtype;
    pthread_mutex_t tok_lock;    // tokenizer_encode: the tokenizer's scratch
    pthread_mutex_t pool_lock;   // held by the generation that runs on s.pool
    pthread_mutex_t vocab_lock;  // making vocab
    GrammarVocab *vocab;         // the tokens' trie, for grammars; made at the first
};

struct gpt_settings {
    GenSettings g;
};

struct gpt_result {
    char *text;
    size_t text_len, text_cap;
    int32_t *prompt, *tokens;
    size_t n_prompt, n_tokens;
    gpt_stop stop;
    uint64_t seed;
    char *logprobs;  // JSON text, or NULL
};

// ----------------------------------------------------------------------------
// errors

static void clear(gpt_err *err) {
    if (err) *err = (gpt_err){0};
}

static int fail(gpt_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(gpt_err *err, int code, const char *fmt, ...) {
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *gpt_version(void) { return GPT_VERSION; }

int gpt_abi_version(void) { return GPT_ABI_VERSION; }

const char *gpt_status_name(int code) {
    static const char *const names[] = {"ok", "argument", "setting", "model", "input", "memory", "runtime"};
    return code >= 0 && code < (int)(sizeof names / sizeof *names) ? names[code] : "unknown";
}

void gpt_free(void *p) { free(p); }

// ----------------------------------------------------------------------------
// the model

gpt_model_options gpt_model_options_default(void) { return (gpt_model_options){0}; }

// What the options say, as the shared options of the command read them:
// GPT_OK, or GPT_ERR_ARGUMENT naming the field.
static int read_options(const gpt_model_options *o, ModelOptions *mo, DType *kv, gpt_err *err) {
    if (o->dtype && weight_options_from_name(o->dtype, &mo->weights) != 0)
        return fail(err, GPT_ERR_ARGUMENT, "dtype \"%.40s\": must be " WEIGHT_DTYPE_NAMES, o->dtype);
    int k = o->kv_type ? dtype_from_name(o->kv_type) : DTYPE_F32;
    if (k != DTYPE_F32 && k != DTYPE_F16)
        return fail(err, GPT_ERR_ARGUMENT, "kv_type \"%.40s\": must be f32 or f16", o->kv_type);
    *kv = (DType)k;
    if (o->n_threads < 0) return fail(err, GPT_ERR_ARGUMENT, "n_threads %d: must be 0 (one per core) or more", o->n_threads);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    mo->threads = o->n_threads ? o->n_threads : cores > 0 ? cores : 1;
    TuneMode tune = TUNE_ON;
    if (o->tune ? tune_mode_parse(o->tune, &tune) != 0 : tune_mode_from_env(TUNE_ON, &tune) != 0)
        return o->tune ? fail(err, GPT_ERR_ARGUMENT, "tune \"%.40s\": must be on, off or force", o->tune)
                       : fail(err, GPT_ERR_ARGUMENT, "$GPT_TUNE=%.40s: must be on, off or force", getenv("GPT_TUNE"));
    mo->tune = (int)tune;
    if (o->n_lora > LORA_MAX)
        return fail(err, GPT_ERR_ARGUMENT, "n_lora %zu: at most %d adapters", o->n_lora, LORA_MAX);
    if (o->n_lora && !o->lora) return fail(err, GPT_ERR_ARGUMENT, "lora is NULL with n_lora %zu", o->n_lora);
    for (size_t i = 0; i < o->n_lora; i++) {
        if (!o->lora[i].path || !*o->lora[i].path)
            return fail(err, GPT_ERR_ARGUMENT, "lora[%zu]: the path is %s", i, o->lora[i].path ? "empty" : "NULL");
        if (!isfinite(o->lora[i].scale))
            return fail(err, GPT_ERR_ARGUMENT, "lora[%zu] %.200s: the scale is not a finite number", i, o->lora[i].path);
        mo->lora[i] = (LoraRequest){.path = o->lora[i].path, .scale = o->lora[i].scale};
    }
    mo->n_lora = o->n_lora;
    return GPT_OK;
}

int gpt_model_open(const char *path, const gpt_model_options *options, gpt_model **out, gpt_err *err) {
    clear(err);
    if (out) *out = NULL;
    if (!path || !out) return fail(err, GPT_ERR_ARGUMENT, "gpt_model_open: %s is NULL", path ? "out" : "path");
    gpt_model_options o = options ? *options : gpt_model_options_default();
    ModelOptions mo = {.model_path = path, .tokenizer_path = o.tokenizer, .weights = {.matrix_dtype = -1},
                       .version = GPT_VERSION, .quiet = 1};
    DType kv = DTYPE_F32;
    int rc = read_options(&o, &mo, &kv, err);
    if (rc != GPT_OK) return rc;
    gpt_model *m = calloc(1, sizeof *m);
    if (!m) return fail(err, GPT_ERR_MEMORY, "out of memory");
    if (strlen(path) >= sizeof m->s.model_path) {
        free(m);
        return fail(err, GPT_ERR_ARGUMENT, "%.80s...: the path is too long", path);
    }
    snprintf(m->s.model_path, sizeof m->s.model_path, "%s", path);
    GptError e = {{0}};
    mo.weights.lora = mo.lora;
    mo.weights.n_lora = mo.n_lora;
    if (model_load_with(&m->s.model, path, &mo.weights, &e) != 0 || session_finish(&m->s, &mo, &e) != 0) {
        model_free(&m->s.model);
        free(m);
        return fail(err, GPT_ERR_MODEL, "%s", e.msg);
    }
    m->kv_dtype = kv;
    pthread_mutex_init(&m->tok_lock, NULL);
    pthread_mutex_init(&m->pool_lock, NULL);
    pthread_mutex_init(&m->vocab_lock, NULL);
    *out = m;
    return GPT_OK;
}

void gpt_model_close(gpt_model *m) {
    if (!m) return;
    grammar_vocab_free(m->vocab);
    session_close(&m->s);
    pthread_mutex_destroy(&m->tok_lock);
    pthread_mutex_destroy(&m->pool_lock);
    pthread_mutex_destroy(&m->vocab_lock);
    free(m);
}

size_t gpt_model_context(const gpt_model *m) { return m ? (size_t)m->s.model.config.n_ctx : 0; }

size_t gpt_model_vocab(const gpt_model *m) { return m ? (size_t)m->s.model.config.vocab_size : 0; }

int gpt_tokenize(gpt_model *m, const char *text, size_t len, int32_t **ids, size_t *n, gpt_err *err) {
    clear(err);
    if (ids) *ids = NULL;
    if (n) *n = 0;
    if (!m || (!text && len) || !ids || !n)
        return fail(err, GPT_ERR_ARGUMENT, "gpt_tokenize: %s is NULL", !m ? "the model" : !ids ? "ids" : !n ? "n" : "text");
    GptError e = {{0}};
    pthread_mutex_lock(&m->tok_lock);
    int rc = tokenizer_encode(m->s.tok, text ? text : "", len, 0, ids, n, &e);
    pthread_mutex_unlock(&m->tok_lock);
    return rc == 0 ? GPT_OK : fail(err, GPT_ERR_INPUT, "%s", e.msg);
}

int gpt_detokenize(gpt_model *m, const int32_t *ids, size_t n, char **text, size_t *len, gpt_err *err) {
    clear(err);
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!m || (!ids && n) || !text)
        return fail(err, GPT_ERR_ARGUMENT, "gpt_detokenize: %s is NULL", !m ? "the model" : !text ? "text" : "ids");
    GptError e = {{0}};
    size_t got = 0;
    static const int32_t none[1];
    if (tokenizer_decode(m->s.tok, ids ? ids : none, n, text, &got, &e) != 0)
        return fail(err, GPT_ERR_INPUT, "%s", e.msg);
    if (len) *len = got;
    return GPT_OK;
}

// ----------------------------------------------------------------------------
// settings

gpt_settings *gpt_settings_new(void) {
    gpt_settings *s = calloc(1, sizeof *s);
    if (s) settings_defaults(&s->g);
    return s;
}

static void settings_release(GenSettings *g) {
    cJSON_Delete(g->stop_json);
    grammar_free(g->grammar);
}

void gpt_settings_free(gpt_settings *s) {
    if (!s) return;
    settings_release(&s->g);
    free(s);
}

int gpt_settings_set(gpt_settings *s, const char *name, const char *json_value, gpt_err *err) {
    clear(err);
    if (!s || !name || !json_value)
        return fail(err, GPT_ERR_ARGUMENT, "gpt_settings_set: %s is NULL",
                    !s ? "the settings" : !name ? "name" : "json_value");
    const Setting *st = setting_by_key(name);
    if (!st || !(st->in & (IN_JSONL | IN_SERVE)))
        return fail(err, GPT_ERR_SETTING, "\"%.60s\" is no setting (the JSON names of docs/usage.md's table: "
                                          "max_tokens, temperature, top_p, seed, stop, ...)", name);
    // {"NAME":VALUE}, read as a gpt serve body's field (a key of the table
    // has nothing to escape); VALUE must be one JSON value
    size_t cap = strlen(name) + strlen(json_value) + 8;
    char *text = malloc(cap);
    if (!text) return fail(err, GPT_ERR_MEMORY, "out of memory");
    snprintf(text, cap, "{\"%s\":%s}", name, json_value);
    size_t len = strlen(text);
    cJSON *obj = cJSON_ParseWithLengthOpts(text, len + 1, NULL, 1);  // the NUL included: nothing may follow
    if (!obj || !obj->child || obj->child->next || strcmp(obj->child->string, name)) {
        cJSON_Delete(obj);
        free(text);
        return fail(err, GPT_ERR_SETTING, "%s: the value is not one JSON value: %.60s", name, json_value);
    }
    if (st->id == SETTING_N && !(cJSON_IsNumber(obj->child) && obj->child->valuedouble == 1)) {
        cJSON_Delete(obj);
        free(text);
        return fail(err, GPT_ERR_SETTING, "n must be 1: gpt_generate makes one completion");
    }
    // on a copy, so that a refused value leaves the settings as they were
    GenSettings t = s->g;
    if (st->kind == VALUE_STOP) t.stop_json = NULL;  // the old one stays s's until t is taken
    GenLimits lim = {0};
    char msg[sizeof err->message];
    int rc = setting_from_json(&t, &lim, obj->child, text, len, 0, msg, sizeof msg);
    cJSON_Delete(obj);
    free(text);
    if (rc < 0) {
        if (st->kind == VALUE_STOP) cJSON_Delete(t.stop_json);
        if (t.grammar != s->g.grammar) grammar_free(t.grammar);
        return fail(err, strstr(msg, "out of memory") ? GPT_ERR_MEMORY : GPT_ERR_SETTING, "%s", msg);
    }
    if (st->kind == VALUE_STOP) cJSON_Delete(s->g.stop_json);
    s->g = t;
    s->g.params.stops = s->g.stops;  // t's array was a copy's
    return GPT_OK;
}

// ----------------------------------------------------------------------------
// generation

// The model's trie of its tokens' bytes, made by the first generation with
// a grammar. NULL with err set.
static const GrammarVocab *model_vocab(gpt_model *m, GptError *err) {
    pthread_mutex_lock(&m->vocab_lock);
    if (!m->vocab) m->vocab = sequence_grammar_vocab(m->s.tok, (size_t)m->s.model.config.vocab_size, err);
    const GrammarVocab *v = m->vocab;
    pthread_mutex_unlock(&m->vocab_lock);
    return v;
}

// A step's text for a callback: never NULL (a sequence has no buffer
// before its first text).
static const char *piece(const Sequence *s) { return s->out ? s->out : ""; }

static int append(gpt_result *r, const char *p, size_t n) {
    if (grow_array(&r->text, &r->text_cap, r->text_len + n + 1, 1) != 0) return -1;
    if (n) memcpy(r->text + r->text_len, p, n);
    r->text_len += n;
    r->text[r->text_len] = '\0';
    return 0;
}

void gpt_result_free(gpt_result *r) {
    if (!r) return;
    free(r->text);
    free(r->prompt);
    free(r->tokens);
    free(r->logprobs);
    free(r);
}

// One generation: the engine, its sequence, the steps.
typedef struct {
    gpt_model *m;
    const GenSettings *g;
    GenParams gp;
    ThreadPool *pool;  // the model's (pool_lock held), or NULL: the calling thread
    Engine engine;
    int engine_up;
    Sequence seq;
    gpt_result *r;
} Run;

// As run_model.c's generation_start: one sequence, the whole prompt in one
// step, a pool of its size.
static int run_start(Run *run, gpt_err *err) {
    const Session *ss = &run->m->s;
    gpt_result *r = run->r;
    size_t n = r->n_prompt, half = (size_t)ss->model.config.n_ctx / 2;
    size_t positions = sequence_positions(&ss->model.config, n, run->gp.max_new);
    size_t rows = run->gp.logprobs && run->g->echo ? (n < SCORE_CHUNK ? n : SCORE_CHUNK) : 0;
    EngineConfig ec = {.max_seqs = 1, .max_step_tokens = run->gp.context_shift && half > n ? half : n,
                       .kv_dtype = run->m->kv_dtype, .kv_blocks = (positions + KV_BLOCK - 1) / KV_BLOCK,
                       .pool = run->pool, .plan = &ss->plan, .prompt_logit_rows = rows};
    GptError e = {{0}};
    if (engine_init(&run->engine, &ss->model, ss->tok, &ec, &e) != 0) return fail(err, GPT_ERR_MEMORY, "%s", e.msg);
    run->engine_up = 1;
    if (sequence_init(&run->seq, &run->engine, r->prompt, n, &run->gp, &e) != 0)
        return fail(err, GPT_ERR_INPUT, "%s", e.msg);
    if (engine_admit(&run->engine, &run->seq, &e) != 1) return fail(err, GPT_ERR_MEMORY, "%s", e.msg);
    return GPT_OK;
}

// The steps until the sequence stops or the callback stops it.
static int run_loop(Run *run, gpt_token_callback cb, void *user_data, gpt_err *err) {
    Sequence *seq = &run->seq;
    gpt_result *r = run->r;
    GptError e = {{0}};
    while (!seq->stop) {
        if (engine_step(&run->engine, &(Sequence *){seq}, 1, &e) != 0) return fail(err, GPT_ERR_RUNTIME, "%s", e.msg);
        if (seq->stop == STOP_ERROR) return fail(err, GPT_ERR_RUNTIME, "%s", seq->error.msg);
        if (append(r, seq->out, seq->out_len) != 0) return fail(err, GPT_ERR_MEMORY, "out of memory");
        if (cb && cb(user_data, piece(seq), seq->out_len, seq->last_token) && !seq->stop) {
            sequence_interrupt(seq);  // what it held back for a stop string is the text's too
            if (seq->stop == STOP_ERROR || append(r, seq->out, seq->out_len) != 0)
                return fail(err, GPT_ERR_MEMORY, "out of memory");
            cb(user_data, piece(seq), seq->out_len, -1);
            r->stop = GPT_STOP_CANCELLED;
            return GPT_OK;
        }
    }
    r->stop = (gpt_stop)seq->stop;
    return GPT_OK;
}

// The result's tokens and log-probabilities from the finished sequence.
static int result_finish(gpt_result *r, const Sequence *seq, const Tokenizer *tok, int logprobs, int echo,
                         gpt_err *err) {
    size_t n = r->n_prompt;
    r->n_tokens = seq->n_generated;
    if (!(r->tokens = malloc((r->n_tokens ? r->n_tokens : 1) * sizeof *r->tokens)))
        return fail(err, GPT_ERR_MEMORY, "out of memory");
    if (r->n_tokens) memcpy(r->tokens, seq->tokens + n, r->n_tokens * sizeof *r->tokens);
    if (!logprobs) return GPT_OK;
    cJSON *lp = echo ? logprobs_json(tok, seq->tokens, seq->n_tokens, seq->lp, seq->lp_from, 0)
                             : logprobs_json(tok, seq->tokens + n, seq->n_generated, seq->lp, 0, 0);
    r->logprobs = lp ? cJSON_PrintUnformatted(lp) : NULL;
    cJSON_Delete(lp);
    return r->logprobs ? GPT_OK : fail(err, GPT_ERR_MEMORY, "out of memory");
}

static int run_finish(Run *run, gpt_err *err) {
    return result_finish(run->r, &run->seq, run->m->s.tok, run->gp.logprobs, run->g->echo, err);
}

// The prompt's tokens into r->prompt: text's as -p's (an empty one:
// <|endoftext|>), or a copy of ids[0..n) checked against the vocabulary;
// and with echo its text (the ids' bytes) into r's text, as UTF-8.
static int prompt_of(gpt_model *m, gpt_result *r, const char *text, const int32_t *ids, size_t n, int echo,
                     gpt_err *err) {
    GptError e = {{0}};
    char *decoded = NULL;
    size_t len = text ? strlen(text) : 0, vocab = (size_t)m->s.model.config.vocab_size;
    if (text) {
        pthread_mutex_lock(&m->tok_lock);
        int rc = prompt_tokens(m->s.tok, text, len, 0, &r->prompt, &r->n_prompt, &e);
        pthread_mutex_unlock(&m->tok_lock);
        if (rc != 0) return fail(err, GPT_ERR_INPUT, "%s", e.msg);
    } else {
        if (n == 0) return fail(err, GPT_ERR_INPUT, "prompt has no token ids");
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || (size_t)ids[i] >= vocab)
                return fail(err, GPT_ERR_INPUT, "prompt: element %zu (%d) is not a token id in [0, %zu)", i,
                            (int)ids[i], vocab);
        if (!(r->prompt = malloc(n * sizeof *r->prompt))) return fail(err, GPT_ERR_MEMORY, "out of memory");
        memcpy(r->prompt, ids, n * sizeof *ids);
        r->n_prompt = n;
        if (echo && tokenizer_decode(m->s.tok, ids, n, &decoded, &len, &e) != 0)
            return fail(err, GPT_ERR_MEMORY, "%s", e.msg);
        text = decoded;
    }
    if (check_prompt_length(&m->s.model.config, r->n_prompt, &e) != 0) {
        free(decoded);
        return fail(err, GPT_ERR_INPUT, "%s", e.msg);
    }
    if (!echo) return GPT_OK;
    size_t valid_len;
    char *valid = utf8_replace_invalid((const unsigned char *)text, len, &valid_len);
    int bad = !valid || append(r, valid, valid_len) != 0;
    free(valid);
    free(decoded);
    return bad ? fail(err, GPT_ERR_MEMORY, "out of memory") : GPT_OK;
}

// gpt_generate, gpt_generate_tokens and gpt_chat: the prompt as text, or as
// ids[0..n); a chat template's stops (t, or NULL) after the settings'.
static int generate(gpt_model *m, const char *text, const int32_t *ids, size_t n, const ChatTemplate *t,
                    const gpt_settings *s, gpt_token_callback callback, void *user_data, gpt_result **out,
                    gpt_err *err) {
    GenSettings defaults;
    settings_defaults(&defaults);
    Run run = {.m = m, .g = s ? &s->g : &defaults};
    const GenSettings *g = run.g;
    char why[256];
    if (settings_check_keep(g, g->given[SETTING_KEEP], 1, (size_t)m->s.model.config.n_ctx, why, sizeof why) != 0)
        return fail(err, GPT_ERR_SETTING, "%s", why);
    gpt_result *r = run.r = calloc(1, sizeof *r);
    if (!r || append(r, "", 0) != 0) {
        free(r);
        return fail(err, GPT_ERR_MEMORY, "out of memory");
    }
    int rc = prompt_of(m, r, text, ids, n, g->echo, err);
    if (rc == GPT_OK && t && g->params.n_stops + t->n_stops > MAX_STOPS)
        rc = fail(err, GPT_ERR_SETTING, "stop: %zu strings and the chat template's %zu are more than %d",
                  g->params.n_stops, t->n_stops, MAX_STOPS);
    if (rc != GPT_OK) {
        gpt_result_free(r);
        return rc;
    }
    run.gp = g->params;
    const char *stops[MAX_STOPS];  // the settings', then the template's (as gpt --chat-template)
    if (t) {
        memcpy(stops, g->stops, g->params.n_stops * sizeof *stops);
        memcpy(stops + g->params.n_stops, t->stops, t->n_stops * sizeof *stops);
        run.gp.stops = stops;
        run.gp.n_stops = g->params.n_stops + t->n_stops;
    }
    run.gp.sampling.seed = r->seed = g->seed_given ? g->params.sampling.seed : draw_seed();
    if (g->echo && run.gp.logprobs) run.gp.logprobs_from = 1;
    if (run.gp.context_shift && run.gp.keep > r->n_prompt) run.gp.keep = r->n_prompt;  // as gpt --keep
    GptError e = {{0}};
    if (run.gp.grammar && !(run.gp.grammar_vocab = model_vocab(m, &e))) {
        gpt_result_free(r);
        return fail(err, GPT_ERR_MEMORY, "%s", e.msg);
    }
    int pooled = pthread_mutex_trylock(&m->pool_lock) == 0;
    run.pool = pooled ? m->s.pool : NULL;
    rc = run_start(&run, err);
    if (rc == GPT_OK) rc = run_loop(&run, callback, user_data, err);
    if (rc == GPT_OK) rc = run_finish(&run, err);
    if (run.engine_up) {
        sequence_free(&run.seq, &run.engine);
        engine_free(&run.engine);
    }
    if (pooled) pthread_mutex_unlock(&m->pool_lock);
    if (rc != GPT_OK) {
        gpt_result_free(r);
        return rc;
    }
    *out = r;
    return GPT_OK;
}

int gpt_generate(gpt_model *m, const char *prompt, const gpt_settings *s, gpt_token_callback callback,
                 void *user_data, gpt_result **out, gpt_err *err) {
    clear(err);
    if (out) *out = NULL;
    if (!m || !prompt || !out)
        return fail(err, GPT_ERR_ARGUMENT, "gpt_generate: %s is NULL", !m ? "the model" : !prompt ? "prompt" : "out");
    return generate(m, prompt, NULL, 0, NULL, s, callback, user_data, out, err);
}

int gpt_generate_tokens(gpt_model *m, const int32_t *ids, size_t n, const gpt_settings *s,
                        gpt_token_callback callback, void *user_data, gpt_result **out, gpt_err *err) {
    clear(err);
    if (out) *out = NULL;
    if (!m || (!ids && n) || !out)
        return fail(err, GPT_ERR_ARGUMENT, "gpt_generate_tokens: %s is NULL",
                    !m ? "the model" : !out ? "out" : "ids");
    return generate(m, NULL, ids, n, NULL, s, callback, user_data, out, err);
}

// ----------------------------------------------------------------------------
// chat

// The template (NULL: gpt2) and the messages as the library's: GPT_OK, or
// the code with err set (then *t is closed).
static int chat_open(const char *template_name, const gpt_message *msgs, size_t n, ChatTemplate *t,
                     ChatMessage **out, gpt_err *err) {
    *out = NULL;
    memset(t, 0, sizeof *t);
    if (!msgs && n) return fail(err, GPT_ERR_ARGUMENT, "messages is NULL");
    if (n == 0) return fail(err, GPT_ERR_INPUT, "messages: a conversation has at least one message");
    if (n > CHAT_MAX_MESSAGES) return fail(err, GPT_ERR_INPUT, "messages: at most %d", CHAT_MAX_MESSAGES);
    ChatMessage *cm = calloc(n, sizeof *cm);
    if (!cm) return fail(err, GPT_ERR_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int role = msgs[i].role ? chat_role_from_name(msgs[i].role) : -1;
        if (!msgs[i].role || !msgs[i].content) {
            free(cm);
            return fail(err, GPT_ERR_ARGUMENT, "messages[%zu].%s is NULL", i, msgs[i].role ? "content" : "role");
        }
        if (role < 0) {
            free(cm);
            return fail(err, GPT_ERR_INPUT, "messages[%zu].role: \"%.40s\" is not a role gpt takes (system, user, "
                        "assistant)", i, msgs[i].role);
        }
        cm[i] = (ChatMessage){.role = (ChatRole)role, .content = msgs[i].content, .len = strlen(msgs[i].content)};
    }
    GptError e = {{0}};
    if (chat_template_open(template_name ? template_name : "gpt2", t, &e) != 0) {
        free(cm);
        return fail(err, GPT_ERR_ARGUMENT, "chat template: %s", e.msg);
    }
    *out = cm;
    return GPT_OK;
}

int gpt_chat_render(const char *template_name, const gpt_message *msgs, size_t n, int add_generation_prompt,
                    char **text, size_t *len, gpt_err *err) {
    clear(err);
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!text) return fail(err, GPT_ERR_ARGUMENT, "gpt_chat_render: text is NULL");
    ChatTemplate t;
    ChatMessage *cm;
    int rc = chat_open(template_name, msgs, n, &t, &cm, err);
    if (rc != GPT_OK) return rc;
    GptError e = {{0}};
    size_t got = 0;
    if (chat_render(&t, cm, n, add_generation_prompt, text, &got, &e) != 0) rc = fail(err, GPT_ERR_MEMORY, "%s", e.msg);
    else if (len) *len = got;
    free(cm);
    chat_template_free(&t);
    return rc;
}

int gpt_chat(gpt_model *m, const char *template_name, const gpt_message *msgs, size_t n, const gpt_settings *s,
             gpt_token_callback callback, void *user_data, gpt_result **out, gpt_err *err) {
    clear(err);
    if (out) *out = NULL;
    if (!m || !out) return fail(err, GPT_ERR_ARGUMENT, "gpt_chat: %s is NULL", !m ? "the model" : "out");
    ChatTemplate t;
    ChatMessage *cm;
    int rc = chat_open(template_name, msgs, n, &t, &cm, err);
    if (rc != GPT_OK) return rc;
    // the conversation's ids: a content's <|endoftext|> stays text
    GptError e = {{0}};
    int32_t *ids = NULL;
    size_t n_ids = 0;
    pthread_mutex_lock(&m->tok_lock);
    int bad = chat_tokens(m->s.tok, &t, cm, n, 1, &ids, &n_ids, &e) != 0;
    pthread_mutex_unlock(&m->tok_lock);
    rc = bad ? fail(err, GPT_ERR_MEMORY, "%s", e.msg)
             : generate(m, NULL, ids, n_ids, &t, s, callback, user_data, out, err);
    free(ids);
    free(cm);
    chat_template_free(&t);
    return rc;
}

// ----------------------------------------------------------------------------
// a batch: requests through the scheduler (scheduler.h), as gpt --batch runs
// its lines

typedef struct {
    Sequence seq;
    gpt_result *r;
    gpt_token_callback cb;
    void *user_data;
    int logprobs, echo;
    int cancelled, ended;
    gpt_err outcome;  // GPT_OK, or why it failed
} BatchRequest;

struct gpt_batch {
    gpt_model *m;
    int pooled;  // holds the model's threads
    Engine engine;
    Scheduler sched;
    BatchRequest **req;
    size_t n, cap;
};

static int batch_dropped(void *ctx, void *request) {
    (void)ctx;
    return ((BatchRequest *)request)->cancelled;
}

static void batch_stepped(void *ctx, void *request, size_t index, Sequence *s) {
    (void)ctx;
    (void)index;
    BatchRequest *q = request;
    if (q->cancelled) return;
    if (append(q->r, s->out, s->out_len) != 0) {
        fail(&q->outcome, GPT_ERR_MEMORY, "out of memory");
        q->cancelled = 1;
        return;
    }
    if (q->cb && q->cb(q->user_data, piece(s), s->out_len, s->last_token) && !s->stop) q->cancelled = 1;
}

static void batch_ended(void *ctx, void *request, size_t index, Sequence *s, SchedEnd why, const GptError *e) {
    gpt_batch *b = ctx;
    BatchRequest *q = request;
    (void)index;
    q->ended = 1;
    if (q->outcome.code) return;
    switch (why) {
    case SCHED_DROPPED:  // cancelled: what it held back is its text's too
        sequence_interrupt(s);
        if (s->stop == STOP_ERROR || append(q->r, s->out, s->out_len) != 0) {
            fail(&q->outcome, GPT_ERR_MEMORY, "out of memory");
            return;
        }
        if (q->cb) q->cb(q->user_data, piece(s), s->out_len, -1);
        q->r->stop = GPT_STOP_CANCELLED;
        break;
    case SCHED_REFUSED: fail(&q->outcome, GPT_ERR_INPUT, "%s", e->msg); return;
    case SCHED_NO_ROOM: fail(&q->outcome, GPT_ERR_MEMORY, "the KV pool cannot take this sequence"); return;
    case SCHED_FAILED: fail(&q->outcome, GPT_ERR_RUNTIME, "%s", e->msg); return;
    case SCHED_STOPPED:
        if (s->stop == STOP_ERROR) {
            fail(&q->outcome, GPT_ERR_RUNTIME, "%s", s->error.msg);
            return;
        }
        q->r->stop = (gpt_stop)s->stop;
        break;
    }
    result_finish(q->r, s, b->m->s.tok, q->logprobs, q->echo, &q->outcome);
}

int gpt_batch_new(gpt_model *m, size_t parallel, gpt_batch **out, gpt_err *err) {
    clear(err);
    if (out) *out = NULL;
    if (!m || !out) return fail(err, GPT_ERR_ARGUMENT, "gpt_batch_new: %s is NULL", !m ? "the model" : "out");
    if (parallel < 1 || parallel > 256)
        return fail(err, GPT_ERR_ARGUMENT, "parallel %zu: must be an integer in [1, 256]", parallel);
    gpt_batch *b = calloc(1, sizeof *b);
    if (!b) return fail(err, GPT_ERR_MEMORY, "out of memory");
    b->m = m;
    b->pooled = pthread_mutex_trylock(&m->pool_lock) == 0;
    // gpt --batch's engine: prompts read 128 tokens a step beside the decodes,
    // the default KV budget, prefixes shared
    const GPT2Config *c = &m->s.model.config;
    EngineConfig ec = {.max_seqs = parallel, .max_step_tokens = parallel + 128, .kv_dtype = m->kv_dtype,
                       .kv_blocks = kv_blocks_for_budget(c, m->kv_dtype, 0, parallel), .share_prefixes = 1,
                       .pool = b->pooled ? m->s.pool : NULL, .plan = &m->s.plan, .prompt_logit_rows = 128};
    SchedulerHooks hooks = {.ctx = b, .dropped = batch_dropped, .stepped = batch_stepped, .ended = batch_ended};
    GptError e = {{0}};
    if (engine_init(&b->engine, &m->s.model, m->s.tok, &ec, &e) != 0) {
        if (b->pooled) pthread_mutex_unlock(&m->pool_lock);
        free(b);
        return fail(err, GPT_ERR_MEMORY, "%s", e.msg);
    }
    if (scheduler_init(&b->sched, &b->engine, parallel, &hooks, &e) != 0) {
        engine_free(&b->engine);
        if (b->pooled) pthread_mutex_unlock(&m->pool_lock);
        free(b);
        return fail(err, GPT_ERR_MEMORY, "%s", e.msg);
    }
    *out = b;
    return GPT_OK;
}

int gpt_batch_add(gpt_batch *b, const char *prompt, const gpt_settings *s, gpt_token_callback callback,
                  void *user_data, size_t *index, gpt_err *err) {
    clear(err);
    if (!b || !prompt) return fail(err, GPT_ERR_ARGUMENT, "gpt_batch_add: %s is NULL", !b ? "the batch" : "prompt");
    gpt_model *m = b->m;
    GenSettings defaults;
    settings_defaults(&defaults);
    const GenSettings *g = s ? &s->g : &defaults;
    char why[256];
    if (settings_check_keep(g, g->given[SETTING_KEEP], 1, (size_t)m->s.model.config.n_ctx, why, sizeof why) != 0)
        return fail(err, GPT_ERR_SETTING, "%s", why);
    if (grow_array(&b->req, &b->cap, b->n + 1, sizeof *b->req) != 0) return fail(err, GPT_ERR_MEMORY, "out of memory");
    BatchRequest *q = calloc(1, sizeof *q);
    gpt_result *r = q ? calloc(1, sizeof *r) : NULL;
    if (!r || append(r, "", 0) != 0) {
        free(r);
        free(q);
        return fail(err, GPT_ERR_MEMORY, "out of memory");
    }
    q->r = r;
    int rc = prompt_of(m, r, prompt, NULL, 0, g->echo, err);
    GenParams gp = g->params;
    gp.sampling.seed = r->seed = g->seed_given ? g->params.sampling.seed : draw_seed();
    if (g->echo && gp.logprobs) gp.logprobs_from = 1;
    if (gp.context_shift && gp.keep > r->n_prompt) gp.keep = r->n_prompt;
    GptError e = {{0}};
    if (rc == GPT_OK && gp.grammar && !(gp.grammar_vocab = model_vocab(m, &e))) rc = fail(err, GPT_ERR_MEMORY, "%s", e.msg);
    if (rc == GPT_OK && sequence_init(&q->seq, &b->engine, r->prompt, r->n_prompt, &gp, &e) != 0) {
        sequence_free(&q->seq, &b->engine);
        rc = fail(err, GPT_ERR_INPUT, "%s", e.msg);
    }
    if (rc == GPT_OK && scheduler_add(&b->sched, q, b->n, &q->seq, &e) != 0) {
        sequence_free(&q->seq, &b->engine);
        rc = fail(err, GPT_ERR_MEMORY, "%s", e.msg);
    }
    if (rc != GPT_OK) {
        gpt_result_free(r);
        free(q);
        return rc;
    }
    q->cb = callback;
    q->user_data = user_data;
    q->logprobs = gp.logprobs;
    q->echo = g->echo;
    if (index) *index = b->n;
    b->req[b->n++] = q;
    return GPT_OK;
}

int gpt_batch_run(gpt_batch *b, gpt_err *err) {
    clear(err);
    if (!b) return fail(err, GPT_ERR_ARGUMENT, "gpt_batch_run: the batch is NULL");
    GptError e = {{0}};
    while (scheduler_held(&b->sched) > 0)
        if (scheduler_step(&b->sched, &e) != 0) {
            scheduler_drop_all(&b->sched);  // the waiting ones too: the step cannot run
            return fail(err, GPT_ERR_RUNTIME, "%s", e.msg);
        }
    return GPT_OK;
}

int gpt_batch_cancel(gpt_batch *b, size_t index, gpt_err *err) {
    clear(err);
    if (!b || index >= b->n)
        return fail(err, GPT_ERR_ARGUMENT, "gpt_batch_cancel: %s", !b ? "the batch is NULL" : "no such request");
    b->req[index]->cancelled = 1;
    return GPT_OK;
}

const gpt_result *gpt_batch_result(const gpt_batch *b, size_t index, gpt_err *err) {
    clear(err);
    if (!b || index >= b->n) {
        fail(err, GPT_ERR_ARGUMENT, "gpt_batch_result: %s", !b ? "the batch is NULL" : "no such request");
        return NULL;
    }
    const BatchRequest *q = b->req[index];
    if (!q->ended) {
        fail(err, GPT_ERR_ARGUMENT, "gpt_batch_result: request %zu has not ended (gpt_batch_run)", index);
        return NULL;
    }
    if (q->outcome.code) {
        if (err) *err = q->outcome;
        return NULL;
    }
    return q->r;
}

void gpt_batch_free(gpt_batch *b) {
    if (!b) return;
    scheduler_drop_all(&b->sched);
    for (size_t i = 0; i < b->n; i++) {
        sequence_free(&b->req[i]->seq, &b->engine);
        gpt_result_free(b->req[i]->r);
        free(b->req[i]);
    }
    free(b->req);
    scheduler_free(&b->sched);
    engine_free(&b->engine);
    if (b->pooled) pthread_mutex_unlock(&b->m->pool_lock);
    free(b);
}

// ----------------------------------------------------------------------------
// multiple choice, as gpt --choice: each choice one sequence over prompt +
// choice that generates nothing and reports its own tokens' log-probabilities
// (run_model.c's run_choice)

// Steps every sequence of seqs[0..n) until all have stopped: 0, or -1 with
// err set.
static int step_all(Engine *e, Sequence *seqs, Sequence **live, size_t n, GptError *err) {
    for (;;) {
        for (size_t i = 0; i < n; i++) {
            int a = seqs[i].admitted ? 1 : engine_admit(e, &seqs[i], err);
            if (a < 0) return -1;
            if (a == 0) break;
        }
        size_t n_live = 0, waiting = 0;
        for (size_t i = 0; i < n; i++) {
            if (seqs[i].admitted && !seqs[i].stop) live[n_live++] = &seqs[i];
            waiting += !seqs[i].admitted;
        }
        if (n_live == 0) return waiting ? gpt_error(err, "engine: the pool admits none of them") : 0;
        if (engine_step(e, live, n_live, err) != 0) return -1;
        for (size_t i = 0; i < n_live; i++)
            if (live[i]->stop == STOP_ERROR) return gpt_error(err, "%s", live[i]->error.msg);
    }
}

int gpt_choose(gpt_model *m, const char *prompt, const char *const *choices, size_t n, gpt_choice_score *scores,
               size_t *best, gpt_err *err) {
    clear(err);
    if (!m || !prompt || !choices || !scores)
        return fail(err, GPT_ERR_ARGUMENT, "gpt_choose: %s is NULL",
                    !m ? "the model" : !prompt ? "prompt" : !choices ? "choices" : "scores");
    if (n < 1 || n > 64) return fail(err, GPT_ERR_ARGUMENT, "choices: %zu of them; 1 to 64", n);
    for (size_t i = 0; i < n; i++)
        if (!choices[i]) return fail(err, GPT_ERR_ARGUMENT, "choices[%zu] is NULL", i);
    int32_t *ids[64] = {0};
    size_t len[64], first[64], longest = 0, rows = 0, blocks = 0;
    Sequence *seqs = calloc(n, sizeof *seqs);
    Sequence **live = calloc(n, sizeof *live);
    Engine engine;
    int engine_up = 0, rc = GPT_OK, pooled = 0;
    GptError e = {{0}};
    if (!seqs || !live) rc = fail(err, GPT_ERR_MEMORY, "out of memory");
    for (size_t i = 0; rc == GPT_OK && i < n; i++) {
        pthread_mutex_lock(&m->tok_lock);
        int bad = candidate_tokens(m->s.tok, prompt, strlen(prompt), choices[i], strlen(choices[i]), 0, &ids[i],
                                   &len[i], &first[i], &e) != 0;
        pthread_mutex_unlock(&m->tok_lock);
        if (bad || check_prompt_length(&m->s.model.config, len[i], &e) != 0) {
            rc = fail(err, GPT_ERR_INPUT, "choices[%zu]: %s", i, e.msg);
            break;
        }
        if (len[i] > longest) longest = len[i];
        rows += len[i] - first[i] + 1;
        blocks += (len[i] + KV_BLOCK - 1) / KV_BLOCK;
    }
    if (rc == GPT_OK) {
        // every choice's rows with logits in one step (up to a bound on the logits' memory)
        size_t logit_rows = rows < 512 ? rows : 512;
        pooled = pthread_mutex_trylock(&m->pool_lock) == 0;
        EngineConfig ec = {.max_seqs = n, .max_step_tokens = longest > logit_rows ? longest : logit_rows,
                           .kv_dtype = m->kv_dtype, .kv_blocks = blocks, .share_prefixes = 1,
                           .pool = pooled ? m->s.pool : NULL, .plan = &m->s.plan, .prompt_logit_rows = logit_rows};
        if (engine_init(&engine, &m->s.model, m->s.tok, &ec, &e) != 0) rc = fail(err, GPT_ERR_MEMORY, "%s", e.msg);
        else engine_up = 1;
    }
    for (size_t i = 0; rc == GPT_OK && i < n; i++) {
        GenParams gp = {.sampling = {.temperature = 0.0f, .top_p = 1.0f, .repeat_penalty = 1.0f}, .max_new = 0,
                        .logprobs = 1, .logprobs_from = first[i]};
        if (sequence_init(&seqs[i], &engine, ids[i], len[i], &gp, &e) != 0) rc = fail(err, GPT_ERR_INPUT, "%s", e.msg);
    }
    if (rc == GPT_OK && step_all(&engine, seqs, live, n, &e) != 0) rc = fail(err, GPT_ERR_RUNTIME, "%s", e.msg);
    // as candidate_measure: the sum, the mean per token, the bytes and the sum per byte
    for (size_t i = 0; rc == GPT_OK && i < n; i++) {
        gpt_choice_score *c = &scores[i];
        *c = (gpt_choice_score){.tokens = len[i] - first[i]};
        for (size_t k = 0; k < c->tokens; k++) {
            size_t b;
            c->sum += seqs[i].lp[k].logprob;
            if (tokenizer_token_bytes(m->s.tok, ids[i][first[i] + k], &b)) c->bytes += b;
        }
        c->mean = c->sum / (double)c->tokens;
        c->mean_per_byte = c->bytes ? c->sum / (double)c->bytes : c->sum;
        if (!isfinite(c->sum)) rc = fail(err, GPT_ERR_RUNTIME, "choices[%zu]: the model produced a non-finite "
                                                               "log-probability", i);
    }
    if (rc == GPT_OK && best) {
        *best = 0;
        for (size_t i = 1; i < n; i++)
            if (scores[i].sum > scores[*best].sum) *best = i;  // equal ones: the lower index
    }
    for (size_t i = 0; seqs && engine_up && i < n; i++) sequence_free(&seqs[i], &engine);
    if (engine_up) engine_free(&engine);
    if (pooled) pthread_mutex_unlock(&m->pool_lock);
    for (size_t i = 0; i < n; i++) free(ids[i]);
    free(seqs);
    free(live);
    return rc;
}

// ----------------------------------------------------------------------------
// scoring

int gpt_score(gpt_model *m, const char *text, size_t len, int prepend_eos, size_t stride, int32_t **ids,
              double **logprobs, size_t *n, gpt_err *err) {
    clear(err);
    if (ids) *ids = NULL;
    if (logprobs) *logprobs = NULL;
    if (n) *n = 0;
    if (!m || (!text && len) || !ids || !logprobs || !n)
        return fail(err, GPT_ERR_ARGUMENT, "gpt_score: %s is NULL",
                    !m ? "the model" : !ids ? "ids" : !logprobs ? "logprobs" : !n ? "n" : "text");
    size_t ctx = (size_t)m->s.model.config.n_ctx;
    if (stride > ctx) return fail(err, GPT_ERR_ARGUMENT, "stride %zu: must be at most the model's context, %zu", stride, ctx);
    // the text's tokens as gpt --score's (--prepend-eos: <|endoftext|> first)
    GptError e = {{0}};
    int32_t *t = NULL, eot = tokenizer_eot_id(m->s.tok);
    size_t k = 0;
    pthread_mutex_lock(&m->tok_lock);
    int rc = tokenizer_encode(m->s.tok, text ? text : "", len, 0, &t, &k, &e);
    pthread_mutex_unlock(&m->tok_lock);
    if (rc != 0) return fail(err, GPT_ERR_INPUT, "%s", e.msg);
    if (k == 0) {
        free(t);
        return fail(err, GPT_ERR_INPUT, "the text is empty");
    }
    if (prepend_eos) {
        int32_t *with = eot >= 0 ? malloc((k + 1) * sizeof *with) : NULL;
        if (!with) {
            free(t);
            return eot < 0 ? fail(err, GPT_ERR_INPUT, "prepend_eos: the tokenizer has no <|endoftext|>")
                           : fail(err, GPT_ERR_MEMORY, "out of memory");
        }
        with[0] = eot;
        memcpy(with + 1, t, k * sizeof *t);
        free(t);
        t = with;
        k++;
    }
    if (k > ctx && !stride) {
        free(t);
        return fail(err, GPT_ERR_INPUT, "the text is %zu tokens; the model's context holds %zu (a stride scores "
                                        "longer texts in windows)", k, ctx);
    }
    double *lp = malloc(k * sizeof *lp);  // k - 1 used
    if (!lp) {
        free(t);
        return fail(err, GPT_ERR_MEMORY, "out of memory");
    }
    int pooled = pthread_mutex_trylock(&m->pool_lock) == 0;
    ScoreConfig how = {.model = &m->s.model, .stride = stride, .kv_dtype = m->kv_dtype,
                       .pool = pooled ? m->s.pool : NULL, .plan = &m->s.plan};
    ScoreStats st;
    rc = score_tokens(&how, t, k, lp, &st, &e);
    if (pooled) pthread_mutex_unlock(&m->pool_lock);
    size_t bad = 0;
    while (rc == 0 && bad + 1 < k && isfinite(lp[bad])) bad++;
    if (rc != 0 || bad + 1 < k) {
        free(t);
        free(lp);
        // a NaN or infinite log-probability: the model's numbers went wrong, as gpt --score refuses them
        return rc != 0 ? fail(err, GPT_ERR_RUNTIME, "%s", e.msg)
                       : fail(err, GPT_ERR_RUNTIME, "the model produced a non-finite log-probability (token %zu)", bad + 1);
    }
    *ids = t;
    *logprobs = lp;
    *n = k;
    return GPT_OK;
}

int gpt_embed(gpt_model *m, const char *text, size_t len, const char *pooling, int normalize, float **out,
              size_t *dim, gpt_err *err) {
    clear(err);
    if (out) *out = NULL;
    if (dim) *dim = 0;
    if (!m || (!text && len) || !out || !dim)
        return fail(err, GPT_ERR_ARGUMENT, "gpt_embed: %s is NULL", !m ? "the model" : !out ? "out" : !dim ? "dim" : "text");
    Pooling how_pool = POOLING_MEAN;
    if (pooling && pooling_from_name(pooling, &how_pool) != 0)
        return fail(err, GPT_ERR_ARGUMENT, "pooling \"%.40s\": must be mean or last", pooling);
    const GPT2Config *cfg = &m->s.model.config;
    size_t C = (size_t)cfg->n_embd, ctx = (size_t)cfg->n_ctx;
    GptError e = {{0}};
    int32_t *t = NULL;
    size_t k = 0;
    pthread_mutex_lock(&m->tok_lock);
    int rc = tokenizer_encode(m->s.tok, text ? text : "", len, 0, &t, &k, &e);
    pthread_mutex_unlock(&m->tok_lock);
    if (rc != 0) return fail(err, GPT_ERR_INPUT, "%s", e.msg);
    if (k == 0 || k > ctx) {
        free(t);
        return k == 0 ? fail(err, GPT_ERR_INPUT, "the text is empty: it has no tokens to embed")
                      : fail(err, GPT_ERR_INPUT, "the text is %zu tokens; the model's context holds %zu", k, ctx);
    }
    float *v = malloc(C * sizeof *v);
    if (!v) {
        free(t);
        return fail(err, GPT_ERR_MEMORY, "out of memory");
    }
    int pooled = pthread_mutex_trylock(&m->pool_lock) == 0;
    EmbedConfig how = {.model = &m->s.model, .pool = pooled ? m->s.pool : NULL, .kv_dtype = m->kv_dtype,
                       .plan = &m->s.plan};
    rc = embed_tokens(&how, t, k, how_pool, normalize, v, &e);
    if (pooled) pthread_mutex_unlock(&m->pool_lock);
    free(t);
    if (rc != 0) {
        free(v);
        return fail(err, GPT_ERR_RUNTIME, "%s", e.msg);
    }
    *out = v;
    *dim = C;
    return GPT_OK;
}

// ----------------------------------------------------------------------------
// the result

const char *gpt_result_text(const gpt_result *r, size_t *len) {
    if (len) *len = r ? r->text_len : 0;
    return r ? r->text : NULL;
}

const int32_t *gpt_result_tokens(const gpt_result *r, size_t *n) {
    if (n) *n = r ? r->n_tokens : 0;
    return r ? r->tokens : NULL;
}

const int32_t *gpt_result_prompt_tokens(const gpt_result *r, size_t *n) {
    if (n) *n = r ? r->n_prompt : 0;
    return r ? r->prompt : NULL;
}

gpt_stop gpt_result_stop(const gpt_result *r) { return r ? r->stop : (gpt_stop)0; }

const char *gpt_result_stop_reason(const gpt_result *r) {
    if (!r) return "";
    return r->stop == GPT_STOP_CANCELLED ? "cancelled" : stop_reason_name((StopReason)r->stop);
}

uint64_t gpt_result_seed(const gpt_result *r) { return r ? r->seed : 0; }

const char *gpt_result_logprobs_json(const gpt_result *r) { return r ? r->logprobs : NULL; }
