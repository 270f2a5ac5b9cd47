/*
 * test_generate.c - the generation engine (engine.h) on the tiny
 * checkpoint:
 *   - one sequence through the engine gives, token for token, what the plain
 *     loop the command line used to run gives (prefill, then sample, append,
 *     feed back), greedy and sampled, for every stop reason;
 *   - several sequences stepping together, prompts read in chunks beside
 *     the decodes, give each sequence's greedy tokens alone;
 *   - scoring matches transformers' log-probabilities.
 */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "base/fileio.h"
#include "forward.h"
#include "engine.h"
#include "score.h"
#include "model/loader.h"

static Model model;
static Tokenizer *tok;

// The loop the command line ran before the engine existed: the reference
// for what one sequence must produce.
static size_t plain_loop(const int32_t *prompt, size_t n_prompt, const GenParams *p, int32_t eot,
                         int32_t *out, StopReason *why) {
    const GPT2Config *c = &model.config;
    size_t room = (size_t)c->n_ctx - n_prompt, max_new = p->max_new;
    size_t capacity = n_prompt + (max_new < room ? max_new : room);
    GptError err = {{0}};
    KVCache cache;
    ForwardState fs;
    Sampler s;
    int32_t *hist = malloc((capacity + 1) * sizeof *hist);
    memcpy(hist, prompt, n_prompt * sizeof *prompt);
    size_t n_hist = n_prompt, generated = 0;
    *why = STOP_LENGTH;
    if (kvcache_init(&cache, c, DTYPE_F32, capacity, &err) || forward_state_init(&fs, c, n_prompt, capacity, 1, NULL, &err) ||
        sampler_init(&s, &p->sampling, (size_t)c->vocab_size, &err)) {
        CHECK(0, "plain loop: %s", err.msg);
        return 0;
    }
    SeqInput seq = {.tokens = prompt, .n_tokens = n_prompt, .cache = &cache, .want = LOGITS_LAST};
    gpt2_forward(&model, &fs, &seq, 1, &err);
    while (generated < max_new) {
        if (n_hist >= (size_t)c->n_ctx) {
            *why = STOP_CONTEXT;
            break;
        }
        int32_t next = sampler_sample(&s, fs.logits, hist, n_hist);
        if (next == eot && !p->ignore_eos) {
            *why = STOP_EOS;
            break;
        }
        hist[n_hist++] = next;
        out[generated++] = next;
        if (generated == max_new || n_hist >= (size_t)c->n_ctx) continue;
        SeqInput step = {.tokens = &hist[n_hist - 1], .n_tokens = 1, .cache = &cache, .want = LOGITS_LAST};
        gpt2_forward(&model, &fs, &step, 1, &err);
    }
    kvcache_free(&cache);
    forward_state_free(&fs);
    sampler_free(&s);
    free(hist);
    return generated;
}

// Runs seqs[0..n) through one engine until all stop; returns 0 or -1.
static int run_engine(Engine *e, Sequence **seqs, size_t n) {
    GptError err = {{0}};
    for (int steps = 0; steps < 10000; steps++) {
        int running = 0;
        for (size_t i = 0; i < n; i++) running |= seqs[i]->stop == STOP_NONE;
        if (!running) return 0;
        if (engine_step(e, seqs, n, &err) != 0) {
            CHECK(0, "engine_step: %s", err.msg);
            return -1;
        }
    }
    CHECK(0, "the engine did not finish in 10000 steps");
    return -1;
}

static size_t encode(const char *text, int32_t **ids) {
    size_t n = 0;
    GptError err = {{0}};
    CHECK(tokenizer_encode(tok, text, strlen(text), 0, ids, &n, &err) == 0, "%s", err.msg);
    return n;
}

static void test_one_sequence(void) {
    static const struct {
        const char *prompt;
        float temp;
        int top_k;
        float top_p, rep;
        size_t max_new;
        int ignore_eos, force_eot;  // force_eot: make the greedy first token the "eot"
        StopReason want;
    } cases[] = {
        {"The quick brown fox", 0, 0, 1, 1, 30, 0, 0, STOP_LENGTH},
        {"Once upon a time", 0.9f, 40, 0.95f, 1.2f, 40, 1, 0, STOP_LENGTH},
        {"Hello", 1.3f, 0, 1, 1, 25, 1, 0, STOP_LENGTH},
        {"Nothing at all", 0.7f, 0, 0.5f, 1, 0, 0, 0, STOP_LENGTH},      // -n 0
        {"x y z", 0, 0, 1, 1, 500, 1, 0, STOP_CONTEXT},                  // runs into the context
        {"To be, or not", 0, 0, 1, 1, 10, 0, 1, STOP_EOS},
    };
    GptError err = {{0}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int32_t *ids;
        size_t n = encode(cases[k].prompt, &ids);
        GenParams p = {.sampling = {.temperature = cases[k].temp, .top_k = cases[k].top_k, .top_p = cases[k].top_p,
                                    .repeat_penalty = cases[k].rep, .seed = 1000 + k},
                       .max_new = cases[k].max_new, .ignore_eos = cases[k].ignore_eos};
        Engine e;
        Sequence s;
        EngineConfig ec = {.max_seqs = 1, .max_step_tokens = n, .kv_dtype = DTYPE_F32};
        if (engine_init(&e, &model, tok, &ec, &err) != 0 || sequence_init(&s, &e, ids, n, &p, &err) != 0 ||
            engine_admit(&e, &s, &err) != 1) {
            CHECK(0, "case %zu: %s", k, err.msg);
            free(ids);
            continue;
        }
        int32_t eot = e.eot;
        if (cases[k].force_eot) {
            int32_t first[1];
            StopReason w;
            GenParams one = p;
            one.max_new = 1;
            plain_loop(ids, n, &one, -1, first, &w);
            e.eot = eot = first[0];
        }
        Sequence *batch[1] = {&s};
        // what the steps wrote, joined, must be the tokens' text
        char *text = NULL;
        size_t text_len = 0;
        for (int steps = 0; s.stop == STOP_NONE && steps < 2000; steps++) {
            if (engine_step(&e, batch, 1, &err) != 0) break;
            text = realloc(text, text_len + s.out_len + 1);
            if (s.out_len) memcpy(text + text_len, s.out, s.out_len);  // s.out is NULL until the first bytes
            text_len += s.out_len;
        }
        int32_t *want = malloc((cases[k].max_new + 1) * sizeof *want);
        StopReason why;
        size_t n_want = plain_loop(ids, n, &p, eot, want, &why);
        CHECK(s.stop == cases[k].want && why == cases[k].want, "case %zu: stop %s, plain loop %s, want %s", k,
              stop_reason_name(s.stop), stop_reason_name(why), stop_reason_name(cases[k].want));
        CHECK(s.n_generated == n_want && memcmp(s.tokens + n, want, n_want * sizeof *want) == 0,
              "case %zu: the engine's %zu tokens differ from the plain loop's %zu", k, s.n_generated, n_want);
        // The steps' text joined is what one TokenStream makes of the tokens.
        char *decoded = NULL;
        size_t decoded_len = 0;
        TokenStream ts;
        token_stream_init(&ts);
        for (size_t i = 0; i <= n_want; i++) {
            const char *piece;
            size_t len;
            if (i < n_want) token_stream_push(&ts, tok, want[i], &piece, &len, &err);
            else token_stream_flush(&ts, &piece, &len);
            decoded = realloc(decoded, decoded_len + len + 1);
            memcpy(decoded + decoded_len, piece, len);
            decoded_len += len;
        }
        token_stream_free(&ts);
        CHECK(text_len == decoded_len && (text_len == 0 || memcmp(text, decoded, text_len) == 0),
              "case %zu: streamed text (%zu bytes) differs from the tokens' stream (%zu bytes)", k, text_len,
              decoded_len);
        if (cases[k].want == STOP_CONTEXT)
            CHECK(s.n_tokens == (size_t)model.config.n_ctx, "context stop at %zu tokens", s.n_tokens);
        free(decoded);
        free(text);
        free(want);
        free(ids);
        sequence_free(&s, &e);
        sequence_free(&s, &e);  // idempotent
        engine_free(&e);
    }
}

// Runs seqs[0..n) through one engine, admitting them in order as the pool
// allows (a sequence that must wait waits), until all stop. 0 or -1.
static int run_admitting(Engine *e, Sequence **seqs, size_t n) {
    GptError err = {{0}};
    for (int steps = 0; steps < 20000; steps++) {
        int running = 0, waiting = 0;
        for (size_t i = 0; i < n; i++) {
            if (!seqs[i]->admitted && !waiting) {
                int a = engine_admit(e, seqs[i], &err);
                if (a < 0) {
                    CHECK(0, "engine_admit: %s", err.msg);
                    return -1;
                }
                waiting = a == 0;  // in order: the ones after it wait too
            }
            running |= seqs[i]->stop == STOP_NONE;
        }
        if (!running) return 0;
        if (engine_step(e, seqs, n, &err) != 0) {
            CHECK(0, "engine_step: %s", err.msg);
            return -1;
        }
    }
    CHECK(0, "the engine did not finish in 20000 steps");
    return -1;
}

// Sequences stepping together, prompts read in chunks beside the decodes,
// prompts sharing a prefix sharing its blocks, a pool too small for all of
// them at once: each sequence's tokens are exactly those it gets alone.
static void test_batch(void) {
    static const char *prompts[] = {
        "In the beginning",
        "A very long prompt that the engine has to read in several chunks, because the step budget is "
        "small: it shares its steps with the others",
        "1 2 3 4 5",
        "",
        "A very long prompt that the engine has to read in several chunks, because the step budget is "
        "small: it shares its steps with the others, and this one starts like the second",
        "Colorless green ideas sleep furiously",
        "A very long prompt that the engine has to read in several chunks, because",
    };
    enum { NS = sizeof prompts / sizeof *prompts };
    GptError err = {{0}};
    int32_t *want[NS];
    size_t n_want[NS];
    GenParams p[NS];
    for (size_t i = 0; i < NS; i++)
        p[i] = (GenParams){.sampling = {.temperature = i % 2 ? 0.9f : 0.0f, .top_k = i % 3 == 0 ? 20 : 0,
                                        .top_p = 1, .repeat_penalty = 1, .seed = 77 + i},
                           .max_new = 10 + i, .ignore_eos = 1};
    // alone: one engine per sequence, the whole prompt in one step
    for (size_t i = 0; i < NS; i++) {
        int32_t *ids;
        size_t n = encode(prompts[i], &ids);
        Engine e1;
        Sequence s;
        EngineConfig c1 = {.max_seqs = 1, .max_step_tokens = 128, .kv_dtype = DTYPE_F32};
        CHECK(engine_init(&e1, &model, tok, &c1, &err) == 0, "%s", err.msg);
        if (n == 0) ids[n++] = e1.eot;
        CHECK(sequence_init(&s, &e1, ids, n, &p[i], &err) == 0 && engine_admit(&e1, &s, &err) == 1, "%s", err.msg);
        Sequence *one[1] = {&s};
        run_engine(&e1, one, 1);
        n_want[i] = s.n_tokens;
        want[i] = malloc(s.n_tokens * sizeof *want[i]);
        memcpy(want[i], s.tokens, s.n_tokens * sizeof *want[i]);
        sequence_free(&s, &e1);
        engine_free(&e1);
        free(ids);
    }
    // together, three ways
    struct {
        size_t step_tokens, kv_blocks;
        int share;
        const char *what;
    } ways[] = {
        {8, 0, 0, "chunks of 8 beside the decodes"},
        {8, 0, 1, "chunks of 8, prefixes shared"},
        {24, 12, 1, "a pool of 12 blocks: sequences wait for blocks"},
    };
    for (size_t w = 0; w < sizeof ways / sizeof *ways; w++) {
        Engine e;
        Sequence together[NS], *ptr[NS];
        EngineConfig c = {.max_seqs = NS, .max_step_tokens = ways[w].step_tokens, .kv_dtype = DTYPE_F32,
                          .kv_blocks = ways[w].kv_blocks, .share_prefixes = ways[w].share};
        CHECK(engine_init(&e, &model, tok, &c, &err) == 0, "%s", err.msg);
        for (size_t i = 0; i < NS; i++) {
            CHECK(sequence_init(&together[i], &e, want[i], n_want[i] - p[i].max_new, &p[i], &err) == 0, "%s", err.msg);
            ptr[i] = &together[i];
        }
        run_admitting(&e, ptr, NS);
        size_t reused = 0;
        for (size_t i = 0; i < NS; i++) {
            Sequence *t = &together[i];
            CHECK(t->stop == STOP_LENGTH && t->n_tokens == n_want[i] &&
                      memcmp(t->tokens, want[i], n_want[i] * sizeof(int32_t)) == 0,
                  "%s: sequence %zu: %s after %zu tokens; its tokens differ from the sequence alone", ways[w].what, i,
                  stop_reason_name(t->stop), t->n_generated);
            CHECK(t->prefill_tokens + t->prefix_reused == t->n_prompt, "%s: sequence %zu prefilled %zu + shared %zu of %zu",
                  ways[w].what, i, t->prefill_tokens, t->prefix_reused, t->n_prompt);
            reused += t->prefix_reused;
            sequence_free(t, &e);
        }
        // prompts 4 and 6 start with prompt 1's first 16 or more tokens
        if (ways[w].share) CHECK(reused >= 32, "%s: %zu prompt positions shared", ways[w].what, reused);
        KVPoolStats ps = kvpool_stats(e.kv);
        CHECK(ps.held == 0 && ps.reserved == 0, "%s: %zu blocks still held, %zu reserved", ways[w].what, ps.held,
              ps.reserved);
        if (ways[w].kv_blocks) CHECK(ps.peak_held <= ways[w].kv_blocks, "%s: peak %zu blocks", ways[w].what, ps.peak_held);
        // blocks touched: at least the most held at once, at most the pool
        CHECK(ps.touched >= ps.peak_held && ps.touched <= ps.n_blocks && ps.peak_held > 0,
              "%s: %zu blocks touched, peak held %zu, pool %zu", ways[w].what, ps.touched, ps.peak_held, ps.n_blocks);
        engine_free(&e);
    }
    // a sequence that alone needs more than the pool is refused, not kept waiting
    Engine e;
    Sequence s;
    EngineConfig c = {.max_seqs = 1, .max_step_tokens = 8, .kv_dtype = DTYPE_F32, .kv_blocks = 1};
    CHECK(engine_init(&e, &model, tok, &c, &err) == 0, "%s", err.msg);
    CHECK(sequence_init(&s, &e, want[1], 20, &p[1], &err) == 0, "%s", err.msg);
    CHECK(engine_admit(&e, &s, &err) == -1 && strstr(err.msg, "budget"), "too big for the pool: %s", err.msg);
    sequence_free(&s, &e);
    engine_free(&e);
    for (size_t i = 0; i < NS; i++) free(want[i]);
}

static void test_score(const cJSON *refs) {
    const cJSON *c;
    int k = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetObjectItem(refs, "models"), "tiny")) {
        const cJSON *jids = cJSON_GetObjectItem(c, "ids");
        size_t n = (size_t)cJSON_GetArraySize(jids);
        int32_t *ids = malloc(n * sizeof *ids);
        double *lp = malloc(n * sizeof *lp);
        for (size_t i = 0; i < n; i++) ids[i] = (int32_t)cJSON_GetArrayItem(jids, (int)i)->valueint;
        GptError err = {{0}};
        ScoreStats st = {0};
        CHECK(score_tokens(&(ScoreConfig){.model = &model, .stride = 0, .kv_dtype = DTYPE_F32, .use_blas = 0}, ids, n, lp, &st, &err) == 0, "%s", err.msg);
        size_t kv = st.kv_bytes;
        double worst = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            double want = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "prompt_token_logprobs"), (int)i)->valuedouble;
            if (fabs(lp[i] - want) > worst) worst = fabs(lp[i] - want);
        }
        CHECK(worst < 1e-4, "tiny prompt %d: a score differs from transformers' by %g", k, worst);
        CHECK(kv == (n + 15) / 16 * 16 * kvcache_bytes_per_token(&model.config, DTYPE_F32), "score cache %zu bytes", kv);
        free(ids);
        free(lp);
        k++;
    }
    GptError err = {{0}};
    int32_t one = 0;
    double lp;
    CHECK(score_tokens(&(ScoreConfig){.model = &model, .stride = 0, .kv_dtype = DTYPE_F32, .use_blas = 0}, &one, 0, &lp, NULL, &err) != 0, "an empty text must be refused");

    // A text longer than the context (tiny: 128) in windows every 50 tokens:
    // each token is scored once, in the window that first reaches it,
    // exactly as scoring that window alone scores it.
    enum { N = 300, STRIDE = 50, CTX = 128 };
    int32_t ids[N];
    double all[N], part[CTX];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 7919 + 13) % 50257);
    ScoreStats st;
    CHECK(score_tokens(&(ScoreConfig){.model = &model, .stride = 0, .kv_dtype = DTYPE_F32, .use_blas = 0}, ids, N, all, NULL, &err) != 0 && strstr(err.msg, "context"),
          "too long a text without a stride must be refused: %s", err.msg);
    CHECK(score_tokens(&(ScoreConfig){.model = &model, .stride = CTX + 1, .kv_dtype = DTYPE_F32, .use_blas = 0}, ids, N, all, NULL, &err) != 0, "a stride past the context");
    CHECK(score_tokens(&(ScoreConfig){.model = &model, .stride = STRIDE, .kv_dtype = DTYPE_F32, .use_blas = 0}, ids, N, all, &st, &err) == 0, "%s", err.msg);
    CHECK(st.windows == 5 && st.tokens_run == 128 * 4 + 100, "windows %zu, tokens run %zu", st.windows, st.tokens_run);
    size_t prev_end = 1, checked = 0;
    int same = 1;
    for (size_t b = 0; prev_end < N; b += STRIDE) {
        size_t e = b + CTX < N ? b + CTX : N;
        score_tokens(&(ScoreConfig){.model = &model, .stride = 0, .kv_dtype = DTYPE_F32, .use_blas = 0}, ids + b, e - b, part, NULL, &err);
        for (size_t t = prev_end > b + 1 ? prev_end : b + 1; t < e; t++, checked++)
            same &= memcmp(&all[t - 1], &part[t - b - 1], sizeof(double)) == 0;
        prev_end = e;
    }
    CHECK(same && checked == N - 1, "windowed scores differ from each window alone (%zu checked)", checked);
}

// The engine's thread choice (ThreadChoice) probes one thread after 8
// decode steps and may switch any time after: a sampled run of 120 tokens
// on 2 threads goes through solo steps and is the plain loop's, token for
// token.
static void test_thread_choice(void) {
    GptError err = {{0}};
    ThreadPool *pool = threadpool_create(2, &err);
    int32_t *ids;
    size_t n = encode("It was the best of times", &ids);
    GenParams p = {.sampling = {.temperature = 0.8f, .top_p = 0.95f, .repeat_penalty = 1, .seed = 77}, .max_new = 120,
                   .ignore_eos = 1};
    int32_t want[120];
    StopReason why;
    size_t n_want = plain_loop(ids, n, &p, -1, want, &why);
    Engine e;
    Sequence s;
    EngineConfig ec = {.max_seqs = 1, .max_step_tokens = n, .kv_dtype = DTYPE_F32, .pool = pool};
    if (!pool || engine_init(&e, &model, tok, &ec, &err) != 0 || sequence_init(&s, &e, ids, n, &p, &err) != 0 ||
        engine_admit(&e, &s, &err) != 1) {
        CHECK(0, "thread choice: %s", err.msg);
        threadpool_free(pool);
        free(ids);
        return;
    }
    Sequence *batch[1] = {&s};
    run_engine(&e, batch, 1);
    ThreadPoolStats st = threadpool_stats(pool);
    CHECK(s.n_generated == n_want && !memcmp(s.tokens + n, want, n_want * sizeof *want) && st.solo_runs > 0 &&
              e.threads.solo_steps >= 4,
          "thread choice: %zu tokens (want %zu), equal %d; %zu solo runs, %zu solo steps", s.n_generated, n_want,
          s.n_generated == n_want && !memcmp(s.tokens + n, want, n_want * sizeof *want), st.solo_runs,
          e.threads.solo_steps);
    sequence_free(&s, &e);
    // a step with a prompt runs on every thread even while decode steps
    // run on one: its runs are none of them solo, and the choice stays
    threadpool_set_solo(pool, 1);
    Sequence s2;
    ThreadPoolStats before = threadpool_stats(pool);
    if (sequence_init(&s2, &e, ids, n, &p, &err) == 0 && engine_admit(&e, &s2, &err) == 1) {
        Sequence *one[1] = {&s2};
        CHECK(engine_step(&e, one, 1, &err) == 0, "a prompt's step: %s", err.msg);
        ThreadPoolStats after = threadpool_stats(pool);
        CHECK(after.runs > before.runs && after.solo_runs == before.solo_runs && threadpool_is_solo(pool) &&
                  s2.n_generated == 1 && s2.tokens[n] == want[0],
              "a prompt's step while decode runs solo: %zu runs, %zu of them solo; solo after: %d; first token %d, "
              "want %d", after.runs - before.runs, after.solo_runs - before.solo_runs, threadpool_is_solo(pool),
              s2.n_generated ? s2.tokens[n] : -1, want[0]);
        sequence_free(&s2, &e);
    } else {
        CHECK(0, "thread choice, a second sequence: %s", err.msg);
    }
    engine_free(&e);
    CHECK(!threadpool_is_solo(pool), "the engine leaves its pool as it came");
    threadpool_free(pool);
    free(ids);
}

int main(void) {
    const char *dir = getenv("CKPT_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tiny", dir && *dir ? dir : "build/ckpt");
    GptError err = {{0}};
    if (model_load(&model, path, &err) != 0 || !(tok = tokenizer_load("models", &err))) {
        CHECK(0, "%s", err.msg);
        return check_exit("test_generate");
    }
    test_one_sequence();
    test_thread_choice();
    test_batch();
    char *text;
    size_t len;
    if (file_read_all("tests/fixtures/public_refs.json", &text, &len, &err) == 0) {
        cJSON *refs = cJSON_Parse(text);
        test_score(refs);
        cJSON_Delete(refs);
        free(text);
    } else {
        CHECK(0, "%s", err.msg);
    }
    tokenizer_free(tok);
    model_free(&model);
    return check_exit("test_generate");
}
