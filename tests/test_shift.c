/*
 * test_shift.c - generation past the context (--context-shift).
 *
 * The definition, checked bit for bit: after a shift, what is generated is
 * exactly what a fresh run from the kept ids would generate with the
 * sampler's state carried over (its RNG where it was, the repetition
 * penalty over every token so far). The reference below is that fresh run,
 * written out without the engine: a new cache each time the window is
 * full, the kept ids (the first `keep` of the prompt, then the latest,
 * half the context in all) run in one call, one sampler throughout. The
 * engine must give its tokens alone, in a batch beside other sequences
 * (which shift at other times and share a prompt prefix), with speculative
 * decoding (a draft that is the model itself, prompt lookup), and with an
 * F16 cache (against the reference in F16).
 *
 * Then the command: -n past the context writes them all, --stats and --json
 * count the shifts, --keep's limits, a stop string across a shift, and
 * --batch and speculative runs giving the plain run's tokens.
 *
 * The tiny checkpoint (context 128) and the demo model (context 256).
 */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "forward.h"
#include "engine.h"
#include "model/loader.h"
#include "paths.h"
#include "run_gpt.h"
#include "speculate.h"

static Model model;
static Tokenizer *tok;
static char tmpdir[256];

// The fresh runs: out gets max_new tokens (eos ignored).
static void reference(const int32_t *prompt, size_t n_prompt, const GenParams *p, DType kv, int32_t *out) {
    const GPT2Config *c = &model.config;
    size_t ctx = (size_t)c->n_ctx, half = ctx / 2, keep = p->keep < n_prompt ? p->keep : n_prompt;
    GptError err = {{0}};
    KVCache cache;
    ForwardState fs;
    Sampler s;
    int32_t *hist = malloc((n_prompt + p->max_new) * sizeof *hist), *win = malloc(ctx * sizeof *win);
    memcpy(hist, prompt, n_prompt * sizeof *prompt);
    memcpy(win, prompt, n_prompt * sizeof *prompt);
    size_t n_hist = n_prompt, n_win = n_prompt;
    if (kvcache_init(&cache, c, kv, ctx, &err) || forward_state_init(&fs, c, ctx, ctx, 1, NULL, &err) ||
        sampler_init(&s, &p->sampling, (size_t)c->vocab_size, &err)) {
        CHECK(0, "reference: %s", err.msg);
        return;
    }
    SeqInput in = {.tokens = win, .n_tokens = n_win, .cache = &cache, .want = LOGITS_LAST};
    gpt2_forward(&model, &fs, &in, 1, &err);
    for (size_t g = 0; g < p->max_new; g++) {
        int32_t next = sampler_sample(&s, fs.logits, hist, n_hist);
        hist[n_hist++] = out[g] = win[n_win++] = next;
        if (g + 1 == p->max_new) break;
        if (n_win == ctx) {  // a fresh run from the kept ids
            memcpy(win, hist, keep * sizeof *win);
            memcpy(win + keep, hist + n_hist - (half - keep), (half - keep) * sizeof *win);
            n_win = half;
            kvcache_reset(&cache);
            in = (SeqInput){.tokens = win, .n_tokens = n_win, .cache = &cache, .want = LOGITS_LAST};
        } else {
            in = (SeqInput){.tokens = &win[n_win - 1], .n_tokens = 1, .cache = &cache, .want = LOGITS_LAST};
        }
        gpt2_forward(&model, &fs, &in, 1, &err);
    }
    kvcache_free(&cache);
    forward_state_free(&fs);
    sampler_free(&s);
    free(hist);
    free(win);
}

static int32_t prompt_ids[64];

static void make_prompt(size_t n, uint32_t salt) {
    for (size_t i = 0; i < n; i++) prompt_ids[i] = (int32_t)((i * 7919u + salt * 104729u) % 50000u);
}

// n sequences (prompts of lengths[i], sharing their first 20 ids when
// shared_prefix; keep[i]) through one engine, plain steps or with a draft;
// each against its reference.
static void check_engine(const char *what, size_t n, const size_t *lengths, const size_t *keeps, size_t max_new,
                         float temperature, float penalty, DType kv, int shared_prefix, int draft_kind) {
    GptError err = {{0}};
    size_t ctx = (size_t)model.config.n_ctx;
    Engine e;
    EngineConfig ec = {.max_seqs = n, .max_step_tokens = n + 64, .kv_dtype = kv, .share_prefixes = shared_prefix,
                       .max_verify = draft_kind ? 4 : 0};
    if (engine_init(&e, &model, tok, &ec, &err) != 0) {
        CHECK(0, "%s: %s", what, err.msg);
        return;
    }
    Sequence seqs[4];
    Sequence *ptrs[4];
    int32_t prompts[4][64];
    GenParams gp[4];
    Draft drafts[4];
    Model q8 = {0};
    if (draft_kind == 1) {
        WeightOptions wo = {.matrix_dtype = DTYPE_Q8};
        if (model_load_with(&q8, ckpt("tiny"), &wo, &err) != 0) CHECK(0, "%s: %s", what, err.msg);
    }
    for (size_t i = 0; i < n; i++) {
        make_prompt(lengths[i], shared_prefix ? 0 : (uint32_t)i + 1);
        if (shared_prefix)
            for (size_t t = 20; t < lengths[i]; t++) prompt_ids[t] = (int32_t)(t * 31 + i * 977) % 50000;
        memcpy(prompts[i], prompt_ids, lengths[i] * sizeof *prompt_ids);
        gp[i] = (GenParams){.sampling = {.temperature = temperature, .top_p = 1.0f, .repeat_penalty = penalty,
                                         .seed = 11 + i},
                            .max_new = max_new, .ignore_eos = 1, .context_shift = 1, .keep = keeps[i]};
        ptrs[i] = &seqs[i];
        if (sequence_init(&seqs[i], &e, prompts[i], lengths[i], &gp[i], &err) != 0 ||
            engine_admit(&e, &seqs[i], &err) < 0)
            CHECK(0, "%s: %s", what, err.msg);
        if (draft_kind == 1) draft_init_model(&drafts[i], &q8, &gp[i].sampling, ctx, 4, NULL, &err);
        if (draft_kind == 2) draft_init_lookup(&drafts[i], 1, ctx, 4, &err);
    }
    for (int steps = 0; steps < 100000; steps++) {
        int running = 0;
        for (size_t i = 0; i < n; i++) {
            running |= !seqs[i].stop;
            if (!seqs[i].admitted && engine_admit(&e, &seqs[i], &err) < 0) CHECK(0, "%s: %s", what, err.msg);
        }
        if (!running) break;
        int rc = 0;
        if (draft_kind)
            for (size_t i = 0; i < n && rc == 0; i++) rc = seqs[i].stop ? 0 : speculate_step(&e, &seqs[i], &drafts[i], 4, &err);
        else
            rc = engine_step(&e, ptrs, n, &err);
        if (rc != 0) {
            CHECK(0, "%s: %s", what, err.msg);
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int32_t *want = calloc(max_new, sizeof *want);
        reference(prompts[i], lengths[i], &gp[i], kv, want);
        const Sequence *s = &seqs[i];
        size_t same = 0;
        while (same < s->n_generated && same < max_new && s->tokens[s->n_prompt + same] == want[same]) same++;
        // the window fills when the run holds ctx tokens, then every ctx -
        // half more; it shifts when tokens are still to come
        size_t expect_shifts = 0;
        for (size_t at = ctx; at < lengths[i] + max_new; at += ctx - ctx / 2) expect_shifts++;
        CHECK(s->stop == STOP_LENGTH && s->n_generated == max_new && same == max_new && s->shifts == expect_shifts &&
                  s->shifts >= 1,
              "%s, sequence %zu (prompt %zu, keep %zu): %zu of %zu tokens the fresh runs', stop %s, %zu shifts (want "
              "%zu)",
              what, i, lengths[i], keeps[i], same, max_new, stop_reason_name(s->stop), s->shifts, expect_shifts);
        free(want);
    }
    for (size_t i = 0; i < n; i++) {
        if (draft_kind) draft_free(&drafts[i]);
        sequence_free(&seqs[i], &e);
    }
    engine_free(&e);
    model_free(&q8);
}

static void test_engine(void) {
    size_t one[] = {10}, keep0[] = {0}, keep4[] = {4};
    check_engine("greedy, keep 0", 1, one, keep0, 300, 0.0f, 1.0f, DTYPE_F32, 0, 0);
    check_engine("sampled, keep 4", 1, one, keep4, 300, 1.0f, 1.0f, DTYPE_F32, 0, 0);
    // the penalty's history is every token so far, not only the window's
    check_engine("sampled, penalty 1.3", 1, one, keep4, 300, 0.9f, 1.3f, DTYPE_F32, 0, 0);
    size_t four[] = {10, 37, 60, 25}, keeps[] = {0, 5, 64, 30};  // 64 and 30: more than the prompt, capped
    check_engine("a batch of 4, shared prefix", 4, four, keeps, 260, 1.0f, 1.0f, DTYPE_F32, 1, 0);
    check_engine("F16 cache", 1, one, keep4, 300, 1.0f, 1.0f, DTYPE_F16, 0, 0);
    check_engine("speculative, the q8 model drafts", 1, one, keep4, 300, 0.0f, 1.0f, DTYPE_F32, 0, 1);
    check_engine("speculative, prompt lookup", 2, four, keeps, 300, 1.0f, 1.0f, DTYPE_F32, 0, 2);
}

// ----------------------------------------------------------------------------
// the command (the demo model, context 256)

#define DEMO "models/demo.bin"
#define RUN(...) run_gpt(tmpdir, NULL, 0, (const char *const[]){__VA_ARGS__, NULL})

static cJSON *json_of(const Result *r) { return r->rc == 0 ? cJSON_Parse(r->out) : NULL; }

static int same_key(const cJSON *a, const cJSON *b, const char *k) {
    char *x = cJSON_PrintUnformatted(cJSON_GetObjectItem(a, k)), *y = cJSON_PrintUnformatted(cJSON_GetObjectItem(b, k));
    int same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

static void test_command(void) {
    const char *p = "And it came to pass";
    Result r = RUN("-m", DEMO, "-p", p, "-n", "700", "-s", "4", "--ignore-eos", "--context-shift", "--keep", "2",
                   "--json", "--logprobs", "0");
    cJSON *j = json_of(&r);
    const cJSON *st = cJSON_GetObjectItem(j, "stats");
    int shifts = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(st, "context_shifts"));
    CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")) == 700 && shifts == 4 &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "stop_reason")), "length") &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(st, "context_shift_tokens")) == 4 * 128,
          "-n 700 --context-shift: rc %d, %d tokens, %d shifts: %s", r.rc,
          cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")), shifts, r.err);
    // a stop string across the first shift: tokens 249..251 of the run
    // (the window fills with the token at position 255: the prompt's 5
    // and 251 generated)
    const cJSON *lp = cJSON_GetObjectItem(j, "logprobs"), *offsets = cJSON_GetObjectItem(lp, "text_offset");
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(j, "text"));
    if (text && cJSON_GetArraySize(offsets) == 700) {
        int a = (int)cJSON_GetArrayItem(offsets, 249)->valuedouble, b = (int)cJSON_GetArrayItem(offsets, 252)->valuedouble;
        char stop[256];
        snprintf(stop, sizeof stop, "%.*s", b - a, text + a);
        // (the escapes --stop reads: written so that it reads them back)
        char escaped[1024];
        size_t k = 0;
        for (const char *c = stop; *c && k + 5 < sizeof escaped; c++) {
            if (*c == '\\') k += (size_t)snprintf(escaped + k, sizeof escaped - k, "\\\\");
            else if (*c == '\n') k += (size_t)snprintf(escaped + k, sizeof escaped - k, "\\n");
            else escaped[k++] = *c;
        }
        escaped[k] = '\0';
        Result s = RUN("-m", DEMO, "-p", p, "-n", "700", "-s", "4", "--ignore-eos", "--context-shift", "--keep", "2",
                       "--json", "--stop", escaped);
        cJSON *sj = json_of(&s);
        const char *st_text = cJSON_GetStringValue(cJSON_GetObjectItem(sj, "text"));
        const char *first = strstr(text, stop);
        CHECK(sj && st_text && first && strlen(st_text) == (size_t)(first - text) &&
                  !strncmp(st_text, text, strlen(st_text)) &&
                  !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(sj, "stop_reason")), "stop"),
              "--stop across a shift: rc %d, text of %zu bytes, want %ld", s.rc, st_text ? strlen(st_text) : 0,
              first ? (long)(first - text) : -1);
        cJSON_Delete(sj);
        result_free(&s);
    } else {
        CHECK(0, "--context-shift --logprobs: no text offsets");
    }
    // speculation and --batch give the plain run's tokens
    const char *spec[][2] = {{"--lookup", "2"}, {"--draft-dtype", "q8"}};
    for (int i = 0; i < 2; i++) {
        Result q = RUN("-m", DEMO, "-p", p, "-n", "700", "-s", "4", "--ignore-eos", "--context-shift", "--keep", "2",
                       "--json", spec[i][0], spec[i][1]);
        cJSON *qj = json_of(&q);
        CHECK(qj && same_key(j, qj, "tokens"), "--context-shift %s: not the plain run's tokens", spec[i][0]);
        cJSON_Delete(qj);
        result_free(&q);
    }
    const char *line = "{\"prompt\":\"And it came to pass\",\"max_tokens\":700,\"seed\":4,\"context_shift\":true,"
                       "\"keep\":2}\n{\"prompt\":\"And it came\",\"max_tokens\":300,\"seed\":4}\n";
    Result b = run_gpt(tmpdir, line, strlen(line),
                       (const char *const[]){"-m", DEMO, "--batch", "--jsonl", "--ignore-eos", NULL});
    char *nl = b.rc == 0 ? strchr(b.out, '\n') : NULL;
    if (nl) *nl = '\0';
    cJSON *bj = nl ? cJSON_Parse(b.out) : NULL, *second = nl ? cJSON_Parse(nl + 1) : NULL;
    CHECK(bj && same_key(j, bj, "tokens") &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(bj, "stats"), "context_shifts")) == 4,
          "--batch \"context_shift\": not the single run's tokens: %s", b.err);
    CHECK(second && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(second, "stop_reason")), "context"),
          "--batch without context_shift: stops at the context");
    cJSON_Delete(bj);
    cJSON_Delete(second);
    result_free(&b);
    cJSON_Delete(j);
    result_free(&r);

    // the limits
    r = RUN("-m", DEMO, "-p", p, "--context-shift", "--keep", "129");
    CHECK(r.rc == 2 && strstr(r.err, "--keep 129: more than half the model's context (128)"), "--keep 129: rc %d %s",
          r.rc, r.err);
    result_free(&r);
    r = RUN("-m", DEMO, "-p", p, "--keep", "3");
    CHECK(r.rc == 2 && strstr(r.err, "--keep needs --context-shift"), "--keep alone: rc %d %s", r.rc, r.err);
    result_free(&r);
    r = RUN("-m", DEMO, "-p", p, "-n", "3", "--context-shift", "--keep", "100");
    CHECK(r.rc == 0 && strstr(r.err, "--keep 100: the prompt is 5 tokens; a shift keeps all 5"), "--keep 100: %s",
          r.err);
    result_free(&r);
    r = RUN("-m", DEMO, "-p", p, "-n", "400", "--ignore-eos", "--temp", "0");
    CHECK(r.rc == 0 && strstr(r.err, "stopped at the end of the context (256 positions; --context-shift goes on)"),
          "without --context-shift: %s", r.err);
    result_free(&r);
}

int main(void) {
    GptError err = {{0}};
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "shift") != 0) return 1;
    if (model_load(&model, ckpt("tiny"), &err) != 0 ||
        !(tok = tokenizer_load_files("models/vocab.json", "models/merges.txt", &err))) {
        CHECK(0, "%s", err.msg);
        return check_exit("test_shift");
    }
    test_engine();
    test_command();
    tokenizer_free(tok);
    model_free(&model);
    scratch_dir_remove(tmpdir);
    return check_exit("test_shift");
}
