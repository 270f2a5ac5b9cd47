/*
 * test_speculate.c - speculative decoding gives exactly the plain run:
 *   - kvcache_truncate: kept positions stay, a shared block is copied before
 *     it is written again, and no prompt shares positions that were cut;
 *   - for every weight dtype of the model and of the draft, greedy and
 *     sampled with several seeds, top-k / top-p / min-p, the repetition
 *     penalty, stop strings, an f16 KV cache, -n and <|endoftext|> ending
 *     inside a run of accepted guesses, the context limit: speculation
 *     emits the plain run's tokens and text, stops for the same reason with
 *     the same positions held, and leaves the RNG where the plain run does;
 *   - a draft that always agrees (the model drafting for itself: every row
 *     of a verify step has the bits of a one-token step, so every guess is
 *     accepted), one that never does (the tiny checkpoint drafting for the
 *     124M-shaped one), a q8 draft of the demo model, and prompt lookup;
 *   - a grammar (a JSON Schema, a regular expression, a GBNF grammar; greedy
 *     and sampled): every draft gives the plain constrained run, "grammar"
 *     stops included, inside a run of accepted guesses too; guesses the
 *     grammar's mask forbids (<|endoftext|> before the text can end, tokens
 *     it cannot read), given to the check directly, are rejected and the
 *     run is still the plain one; a draft model's guesses are all tokens
 *     the grammar reads, and lookup's end before the first it cannot.
 * The plain run is the engine stepping one token at a time (test_generate
 * holds it to the loop the command line ran, and that to transformers).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine.h"
#include "grammar/regex.h"
#include "grammar/schema.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "paths.h"
#include "speculate.h"

static Tokenizer *tok;

enum { MAX_OUT = 1100, MAX_TEXT = 1 << 16 };

// What one run produced.
typedef struct {
    int32_t tokens[MAX_OUT];
    size_t n;
    char text[MAX_TEXT];
    size_t text_len;
    StopReason stop;
    size_t positions;
    SamplerRng rng;  // where the sequence's RNG was left
    size_t proposed, accepted, verify_steps, decode_steps;
} Run;

typedef struct {
    const Model *draft;  // a draft model, or NULL
    size_t lookup_n;     // or prompt lookup
    size_t k;            // guesses per step; 0: the plain run
    const Run *forbid;   // or guesses with one the grammar forbids (forbidden_step)
} Spec;

// A check whose guesses are the plain run's next tokens with one the
// grammar's mask forbids among them: the `step % k`th guess, <|endoftext|>
// on odd steps where the text cannot end yet, else the first token from a
// rotating start whose mask bit is clear, at the state the guesses before
// it lead to. The check must reject it and emit the plain run's token.
static int forbidden_step(Engine *e, Sequence *s, const Spec *spec, size_t step, GptError *err) {
    size_t k = sequence_verify_room(s, e), V = (size_t)e->model->config.vocab_size;
    if (k > spec->k) k = spec->k;
    if (k == 0 || !s->grammar) return engine_step_verify(e, s, NULL, 0, err);
    const Run *p = spec->forbid;
    size_t at = s->n_generated, bad = step % k;
    int32_t guesses[16];
    for (size_t i = 0; i < k; i++) guesses[i] = at + i < p->n ? p->tokens[at + i] : 0;
    GrammarMatcher *m = grammar_matcher_copy(s->grammar, err);
    uint64_t *mask = malloc(GRAMMAR_MASK_WORDS(V) * sizeof *mask);
    int rc = -1;
    if (!m || !mask) goto done;
    for (size_t i = 0; i < bad; i++) {  // the plain run's tokens: the grammar reads them
        size_t nb;
        const unsigned char *b = tokenizer_token_bytes(e->tok, guesses[i], &nb);
        if (!b || grammar_matcher_feed(m, b, nb, err) != 0) {
            bad = i;  // past the plain run's end: forbid here
            break;
        }
    }
    if (grammar_masker_fill(s->masker, m, mask, err) < 0) goto done;
    int32_t t = -1;
    if (step % 2 && !grammar_matcher_can_end(m)) t = e->eot;
    for (size_t j = 0; t < 0 && j < V; j++) {
        size_t id = (step * 7919 + j) % V;
        if (!((mask[id / 64] >> (id % 64)) & 1)) t = (int32_t)id;
    }
    CHECK(t >= 0 && !((mask[t / 64] >> (t % 64)) & 1), "step %zu: no forbidden token", step);
    guesses[bad] = t;
    rc = engine_step_verify(e, s, guesses, k, err);
done:
    grammar_matcher_free(m);
    free(mask);
    return rc;
}

// Generates from prompt with the engine: plainly (spec->k == 0) or
// speculating. eot >= 0 replaces <|endoftext|>, so that a test can make a
// common token end the text. Returns 0 or -1.
static int generate(const Model *m, const int32_t *prompt, size_t n_prompt, const GenParams *gp, DType kv,
                    int32_t eot, const Spec *spec, Run *r) {
    GptError err = {{0}};
    Engine e;
    Sequence s;
    Draft d = {0};
    memset(r, 0, sizeof *r);
    EngineConfig ec = {.max_seqs = 1, .max_step_tokens = n_prompt, .kv_dtype = kv, .max_verify = spec->k};
    int rc = -1;
    if (engine_init(&e, m, tok, &ec, &err) != 0) {
        CHECK(0, "engine_init: %s", err.msg);
        return -1;
    }
    if (eot >= 0) e.eot = eot;
    if (sequence_init(&s, &e, prompt, n_prompt, gp, &err) != 0 || engine_admit(&e, &s, &err) != 1) {
        CHECK(0, "sequence: %s", err.msg);
        goto done;
    }
    size_t positions = s.cache.max_positions;
    if (spec->k && !spec->forbid && (spec->draft ? draft_init_model(&d, spec->draft, &gp->sampling, positions, spec->k, NULL, &err)
                                : draft_init_lookup(&d, spec->lookup_n, positions, spec->k, &err)) != 0) {
        CHECK(0, "draft: %s", err.msg);
        goto done;
    }
    Sequence *one[1] = {&s};
    for (int steps = 0; !s.stop && steps < 5000; steps++) {
        if ((spec->forbid ? forbidden_step(&e, &s, spec, (size_t)steps, &err)
             : spec->k    ? speculate_step(&e, &s, &d, spec->k, &err)
                          : engine_step(&e, one, 1, &err)) != 0) {
            CHECK(0, "step: %s", err.msg);
            goto done;
        }
        if (r->text_len + s.out_len > MAX_TEXT) {
            CHECK(0, "text longer than %d bytes", MAX_TEXT);
            goto done;
        }
        memcpy(r->text + r->text_len, s.out, s.out_len);
        r->text_len += s.out_len;
    }
    r->n = s.n_generated < MAX_OUT ? s.n_generated : MAX_OUT;
    memcpy(r->tokens, s.tokens + n_prompt, r->n * sizeof *r->tokens);
    r->stop = s.stop;
    r->positions = s.positions;
    r->rng = s.sampler.rng;
    r->proposed = s.proposed;
    r->accepted = s.accepted;
    r->verify_steps = s.verify_steps;
    r->decode_steps = s.decode_steps;
    rc = 0;
done:
    draft_free(&d);
    sequence_free(&s, &e);
    engine_free(&e);
    return rc;
}

// Checks that a speculative run equals the plain one; returns 1 if so.
static int same_run(const Run *plain, const Run *spec, const char *what) {
    int ok = plain->n == spec->n && !memcmp(plain->tokens, spec->tokens, plain->n * sizeof *plain->tokens) &&
             plain->text_len == spec->text_len && !memcmp(plain->text, spec->text, plain->text_len) &&
             plain->stop == spec->stop && plain->positions == spec->positions &&
             !memcmp(&plain->rng, &spec->rng, sizeof plain->rng);
    size_t first = 0;
    while (first < plain->n && first < spec->n && plain->tokens[first] == spec->tokens[first]) first++;
    CHECK(ok, "%s: plain %zu tokens (%s, %zu positions), speculative %zu (%s, %zu); first difference at %zu%s", what,
          plain->n, stop_reason_name(plain->stop), plain->positions, spec->n, stop_reason_name(spec->stop),
          spec->positions, first, memcmp(&plain->rng, &spec->rng, sizeof plain->rng) ? "; the RNG moved differently" : "");
    return ok;
}

static size_t encode(const char *text, int32_t **ids) {
    GptError err = {{0}};
    size_t n = 0;
    if (tokenizer_encode(tok, text, strlen(text), 0, ids, &n, &err) != 0) CHECK(0, "encode: %s", err.msg);
    return n;
}

// ---------------------------------------------------------------------------
// kvcache_truncate

static void fill_position(KVCache *c, size_t pos, float value) {
    float k[64], v[64];
    for (size_t d = 0; d < c->head_size; d++) k[d] = v[d] = value + (float)d;
    for (size_t l = 0; l < c->n_layer; l++)
        for (size_t h = 0; h < c->n_head; h++) kvcache_store(c, l, h, pos, k, v);
}

static float key_at(const KVCache *c, size_t pos) {
    const float *keys = kvcache_block_keys(c, pos / KV_BLOCK, c->n_layer - 1, c->n_head - 1);
    return keys[pos % KV_BLOCK];  // dimension 0
}

static void test_truncate(const GPT2Config *cfg) {
    GptError err = {{0}};
    KVPool *p = kvpool_create(cfg, DTYPE_F32, 16, &err);
    CHECK(p != NULL, "pool: %s", err.msg);
    if (!p) return;
    int32_t prompt[40];
    for (int i = 0; i < 40; i++) prompt[i] = 100 + i;
    // A: a 40-token prompt, computed and registered; 3 blocks
    KVCache a, b, c;
    kvcache_attach(&a, p, 64, &err);
    kvpool_reserve(p, 4);
    CHECK(kvcache_grow(&a, 40) == 0, "grow a");
    for (size_t i = 0; i < 40; i++) fill_position(&a, i, (float)i);
    a.n_tokens = 40;
    kvcache_register_prompt(&a, prompt, 40);
    kvcache_mark_filled(&a);
    // B shares A's first two whole blocks and copies the third's positions
    kvcache_attach(&b, p, 64, &err);
    kvpool_reserve(p, 4);
    size_t whole;
    int wait;
    size_t matched = kvcache_share_prefix(&b, prompt, 40, &whole, &wait);
    CHECK(matched == 39 && whole == 2 && !wait, "b shares %zu positions, %zu whole blocks", matched, whole);
    CHECK(b.block_ids[0] == a.block_ids[0] && b.block_ids[1] == a.block_ids[1], "b holds a's blocks");
    size_t held = kvpool_stats(p).held;
    // Cutting B back into its second (shared) block: copied, A untouched.
    size_t copies = 0;
    b.n_tokens = 39;
    CHECK(kvcache_truncate(&b, 20, &copies) == 0, "truncate b");
    CHECK(copies == 1 && b.n_tokens == 20, "copies %zu, n_tokens %zu", copies, b.n_tokens);
    CHECK(b.block_ids[0] == a.block_ids[0] && b.block_ids[1] != a.block_ids[1], "block 1 copied, block 0 shared");
    CHECK(kvpool_stats(p).held == held + 1, "held %zu -> %zu", held, kvpool_stats(p).held);
    int kept = 1;
    for (size_t i = 0; i < 20; i++) kept &= key_at(&b, i) == (float)i;
    CHECK(kept, "b's kept positions are a's");
    fill_position(&b, 20, 1000.0f);  // B writes past the cut; A must not see it
    CHECK(key_at(&a, 20) == 20.0f && key_at(&b, 20) == 1000.0f, "a %g, b %g at 20", key_at(&a, 20), key_at(&b, 20));
    // Cutting A to 10, inside block 0, which B still shares: A gets a copy,
    // B keeps the block; A's block 1 (its own now) forgets its prompt, so a
    // later prompt shares block 0 (B's) and nothing of A's past the cut.
    uint32_t a0 = a.block_ids[0];
    CHECK(kvcache_truncate(&a, 10, &copies) == 0 && copies == 1, "truncate a: %zu copies", copies);
    CHECK(a.block_ids[0] != a0 && b.block_ids[0] == a0, "a copied block 0, b kept it");
    kvcache_attach(&c, p, 64, &err);
    kvpool_reserve(p, 4);
    matched = kvcache_share_prefix(&c, prompt, 40, &whole, &wait);
    CHECK(matched <= 16 && !wait, "c shares %zu positions after a was cut to 10", matched);
    CHECK(kvcache_truncate(&a, 11, &copies) != 0, "truncating past n_tokens is refused");
    kvcache_free(&c);
    kvcache_free(&b);
    kvcache_free(&a);
    CHECK(kvpool_stats(p).held == 0, "every block back: %zu held", kvpool_stats(p).held);
    kvpool_free(p);
}

// ---------------------------------------------------------------------------
// runs

typedef struct {
    const char *name;
    GenParams gp;
    DType kv;
} Setting;

static GenParams params(float temp, uint64_t seed, size_t max_new) {
    GenParams g = {.sampling = {.temperature = temp, .top_p = 1.0f, .repeat_penalty = 1.0f, .seed = seed},
                   .max_new = max_new};
    return g;
}

// Every setting, for model m and each of the drafts; `self` is the index of
// a draft identical to m (every guess accepted), or -1.
static void check_settings(const char *model_name, const Model *m, const Spec *drafts, const char *const *draft_names,
                           size_t n_drafts, int self, const char *prompt_text, size_t max_new, int quick) {
    static const char *const stops[] = {" the", ",\n"};
    Setting all[] = {
        {"greedy", params(0.0f, 0, max_new), DTYPE_F32},
        {"temp 1 seed 1", params(1.0f, 1, max_new), DTYPE_F32},
        {"temp 1 seed 2", params(1.0f, 2, max_new), DTYPE_F32},
        {"temp 0.7 seed 3", params(0.7f, 3, max_new), DTYPE_F32},
        {"top-k 40 seed 4", params(0.9f, 4, max_new), DTYPE_F32},
        {"top-p 0.9 seed 5", params(1.0f, 5, max_new), DTYPE_F32},
        {"min-p 0.05 seed 6", params(1.0f, 6, max_new), DTYPE_F32},
        {"repeat penalty 1.3 greedy", params(0.0f, 0, max_new), DTYPE_F32},
        {"repeat penalty 1.2 seed 7", params(0.8f, 7, max_new), DTYPE_F32},
        {"stop strings seed 8", params(0.8f, 8, max_new), DTYPE_F32},
        {"f16 kv seed 9", params(1.0f, 9, max_new), DTYPE_F16},
        {"f16 kv greedy", params(0.0f, 0, max_new), DTYPE_F16},
    };
    all[4].gp.sampling.top_k = 40;
    all[5].gp.sampling.top_p = 0.9f;
    all[6].gp.sampling.min_p = 0.05f;
    all[7].gp.sampling.repeat_penalty = 1.3f;
    all[8].gp.sampling.repeat_penalty = 1.2f;
    all[9].gp.stops = stops;
    all[9].gp.n_stops = 2;
    size_t n_settings = quick ? 3 : sizeof all / sizeof *all;
    int32_t *ids = NULL;
    size_t n_prompt = encode(prompt_text, &ids);
    for (size_t si = 0; si < n_settings; si++) {
        Setting *st = &all[si];
        Run *plain = malloc(sizeof *plain), *spec = malloc(sizeof *spec);
        Spec none = {0};
        if (generate(m, ids, n_prompt, &st->gp, st->kv, -1, &none, plain) != 0) {
            free(plain), free(spec);
            continue;
        }
        for (size_t di = 0; di < n_drafts; di++) {
            char what[256];
            snprintf(what, sizeof what, "%s, %s draft, %s, k %zu", model_name, draft_names[di], st->name, drafts[di].k);
            if (generate(m, ids, n_prompt, &st->gp, st->kv, -1, &drafts[di], spec) != 0) continue;
            same_run(plain, spec, what);
            if (drafts[di].draft) CHECK(spec->verify_steps > 0 && spec->proposed > 0, "%s: no guesses checked", what);
            // A draft that is the model: only the step that stopped may lose guesses.
            if ((int)di == self)
                CHECK(spec->proposed - spec->accepted <= drafts[di].k, "%s: %zu of %zu guesses accepted", what,
                      spec->accepted, spec->proposed);
        }
        free(plain);
        free(spec);
    }
    free(ids);
}

// <|endoftext|> and -n ending inside a run of accepted guesses, and the end
// of the context, with a draft that always agrees (the model itself).
static void check_stops(const char *model_name, const Model *m, const char *prompt_text) {
    int32_t *ids = NULL;
    size_t n_prompt = encode(prompt_text, &ids);
    Spec self = {.draft = m, .k = 4};
    Run *plain = malloc(sizeof *plain), *spec = malloc(sizeof *spec);
    char what[256];
    // -n inside a run: 4 guesses + 1 per step, 1 from the prefill; 13 ends mid-step.
    for (size_t max_new = 1; max_new <= 13; max_new += 3) {
        GenParams gp = params(1.0f, 11, max_new);
        Spec none = {0};
        generate(m, ids, n_prompt, &gp, DTYPE_F32, -1, &none, plain);
        generate(m, ids, n_prompt, &gp, DTYPE_F32, -1, &self, spec);
        snprintf(what, sizeof what, "%s: -n %zu", model_name, max_new);
        if (same_run(plain, spec, what)) CHECK(spec->stop == STOP_LENGTH && spec->n == max_new, "%s", what);
    }
    // <|endoftext|> inside a run: the plain run's 7th token made the end.
    GenParams gp = params(0.9f, 12, 40);
    Spec none = {0};
    generate(m, ids, n_prompt, &gp, DTYPE_F32, -1, &none, plain);
    if (plain->n >= 7) {
        int32_t eot = plain->tokens[6];
        size_t first = 0;
        while (plain->tokens[first] != eot) first++;
        generate(m, ids, n_prompt, &gp, DTYPE_F32, eot, &none, plain);
        generate(m, ids, n_prompt, &gp, DTYPE_F32, eot, &self, spec);
        snprintf(what, sizeof what, "%s: <|endoftext|> = token %d", model_name, eot);
        if (same_run(plain, spec, what))
            CHECK(spec->stop == STOP_EOS && spec->n == first && spec->verify_steps >= 1, "%s: %s after %zu", what,
                  stop_reason_name(spec->stop), spec->n);
    }
    free(ids);
    // The context: a prompt 20 tokens short of it, 100 tokens asked for.
    size_t ctx = (size_t)m->config.n_ctx;
    int32_t *long_ids = malloc(ctx * sizeof *long_ids);
    for (size_t i = 0; i < ctx - 20; i++) long_ids[i] = (int32_t)(1000 + (i * 37) % 5000);
    for (int greedy = 0; greedy < 2; greedy++) {
        GenParams g = params(greedy ? 0.0f : 1.0f, 13, 100);
        generate(m, long_ids, ctx - 20, &g, DTYPE_F32, -1, &none, plain);
        generate(m, long_ids, ctx - 20, &g, DTYPE_F32, -1, &self, spec);
        snprintf(what, sizeof what, "%s: the end of the context (%s)", model_name, greedy ? "greedy" : "sampled");
        if (same_run(plain, spec, what))
            CHECK(spec->stop == STOP_CONTEXT && spec->n == 20 && spec->positions == ctx - 1, "%s: %s, %zu tokens, %zu positions", what,
                  stop_reason_name(spec->stop), spec->n, spec->positions);
    }
    free(long_ids);
    free(plain);
    free(spec);
}

// Prompt lookup on a text that repeats its prompt: the guesses pay off.
static void check_lookup(const Model *m) {
    const char *text = "In the beginning God created the heaven and the earth. And the earth was without form, and "
                       "void; and darkness was upon the face of the deep. In the beginning God created the heaven";
    int32_t *ids = NULL;
    size_t n = encode(text, &ids);
    Run *plain = malloc(sizeof *plain), *spec = malloc(sizeof *spec);
    GenParams gp = params(0.0f, 0, 30);
    gp.sampling.repeat_penalty = 1.0f;
    Spec none = {0};
    for (size_t lookup_n = 1; lookup_n <= 3; lookup_n++) {
        Spec lk = {.lookup_n = lookup_n, .k = 6};
        generate(m, ids, n, &gp, DTYPE_F32, -1, &none, plain);
        generate(m, ids, n, &gp, DTYPE_F32, -1, &lk, spec);
        char what[64];
        snprintf(what, sizeof what, "demo: --lookup %zu", lookup_n);
        same_run(plain, spec, what);
        CHECK(spec->decode_steps < plain->decode_steps, "%s: %zu model steps, plain %zu", what, spec->decode_steps,
              plain->decode_steps);
    }
    // The lookup itself: the tokens after the last earlier occurrence.
    Draft d;
    GptError err = {{0}};
    int32_t toks[] = {5, 6, 7, 1, 2, 5, 6, 8, 9, 5, 6}, out[4];
    draft_init_lookup(&d, 2, 64, 4, &err);
    int got = draft_propose(&d, toks, 11, 4, NULL, NULL, out, &err);
    CHECK(got == 4 && out[0] == 8 && out[1] == 9 && out[2] == 5 && out[3] == 6, "lookup of [5 6]: %d guesses, %d %d",
          got, out[0], out[1]);
    got = draft_propose(&d, toks, 11, 1, NULL, NULL, out, &err);
    CHECK(got == 1 && out[0] == 8, "one guess: %d, %d", got, out[0]);
    got = draft_propose(&d, toks, 3, 4, NULL, NULL, out, &err);
    CHECK(got == 0, "no earlier occurrence: %d guesses", got);
    draft_free(&d);
    free(ids);
    free(plain);
    free(spec);
}

// ---------------------------------------------------------------------------
// a grammar

// The three kinds of constraint, each with a finite language (every string
// and number bounded) so that the runs end with "grammar".
static const char *const SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":10},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"king\",\"the\"]},\"maxItems\":3}},"
    "\"required\":[\"name\",\"age\",\"tags\"]}";
static const char *const REGEX = "(yes|no|maybe), [0-9]{1,3} (apples|pears)( and [a-z]{1,8})?[.]";
// "the" straddles the literal and the class: tokens across both are allowed
static const char *const GBNF = "root ::= \"And \" word (\" \" word){0,4} \".\"\nword ::= [a-z]{1,7}\n";

static Grammar *compile_constraint(int which, GptError *err) {
    char *text = which == 0 ? schema_to_gbnf(SCHEMA, strlen(SCHEMA), err)
                 : which == 1 ? regex_to_gbnf(REGEX, strlen(REGEX), err)
                              : strdup(GBNF);
    if (!text) return NULL;
    Grammar *g = grammar_compile(text, strlen(text), NULL, err);
    free(text);
    return g;
}

// Constrained runs: every draft, and guesses the grammar forbids, give the
// plain constrained run; the model drafting for itself loses guesses only
// on the step that stopped, a "grammar" stop inside its run of guesses.
static void check_grammar(const Model *m, const Model *q8, const Model *tiny) {
    static const char *const kinds[] = {"json schema", "regex", "gbnf"};
    GptError err = {{0}};
    GrammarVocab *vocab = sequence_grammar_vocab(tok, (size_t)m->config.vocab_size, &err);
    CHECK(vocab != NULL, "vocab: %s", err.msg);
    int32_t *ids = NULL;
    size_t n_prompt = encode("And it came to pass, when the king", &ids);
    Run *plain = malloc(sizeof *plain), *spec = malloc(sizeof *spec);
    for (int which = 0; which < 3 && vocab; which++) {
        Grammar *g = compile_constraint(which, &err);
        CHECK(g != NULL, "%s: %s", kinds[which], err.msg);
        if (!g) continue;
        Setting all[] = {
            {"greedy", params(0.0f, 0, 80), DTYPE_F32},
            {"temp 1 seed 1", params(1.0f, 1, 80), DTYPE_F32},
            {"temp 1 seed 2", params(1.0f, 2, 80), DTYPE_F32},
            {"temp 0.8 seed 3", params(0.8f, 3, 80), DTYPE_F32},
            {"top-p 0.9 seed 4", params(1.0f, 4, 80), DTYPE_F32},
        };
        all[4].gp.sampling.top_p = 0.9f;
        for (size_t si = 0; si < sizeof all / sizeof *all; si++) {
            Setting *st = &all[si];
            st->gp.grammar = g;
            st->gp.grammar_vocab = vocab;
            Spec none = {0};
            if (generate(m, ids, n_prompt, &st->gp, st->kv, -1, &none, plain) != 0) continue;
            CHECK(plain->stop == STOP_GRAMMAR, "%s, %s: the plain run stopped by %s", kinds[which], st->name,
                  stop_reason_name(plain->stop));
            Spec drafts[] = {{.draft = m, .k = 4}, {.draft = q8, .k = 4}, {.draft = tiny, .k = 3},
                             {.lookup_n = 1, .k = 4}, {.lookup_n = 2, .k = 5}, {.forbid = plain, .k = 3},
                             {.forbid = plain, .k = 1}};
            const char *names[] = {"itself", "q8", "tiny", "lookup 1", "lookup 2", "forbidden guesses",
                                   "a forbidden guess"};
            for (size_t di = 0; di < sizeof drafts / sizeof *drafts; di++) {
                char what[256];
                snprintf(what, sizeof what, "%s, %s, %s draft, k %zu", kinds[which], st->name, names[di], drafts[di].k);
                if (generate(m, ids, n_prompt, &st->gp, st->kv, -1, &drafts[di], spec) != 0) continue;
                same_run(plain, spec, what);
                if (di == 0)  // itself: a guess is lost only on the step that stopped
                    CHECK(spec->proposed > 0 && spec->proposed - spec->accepted <= drafts[di].k,
                          "%s: %zu of %zu guesses accepted", what, spec->accepted, spec->proposed);
                if (drafts[di].forbid)  // every check held a guess it had to reject
                    CHECK(spec->verify_steps > 0 && spec->proposed - spec->accepted >= spec->verify_steps,
                          "%s: %zu verify steps, %zu of %zu guesses accepted", what, spec->verify_steps, spec->accepted,
                          spec->proposed);
            }
        }
        grammar_free(g);
    }
    free(plain);
    free(spec);
    free(ids);
    grammar_vocab_free(vocab);
}

// What the drafts propose under a grammar, directly: a draft model's
// guesses are tokens the grammar reads in order, never <|endoftext|>, and
// end where nothing can follow; lookup's end before the first token the
// grammar cannot read, and after the one where nothing can follow.
static void check_grammar_proposals(const Model *m, const Model *q8) {
    GptError err = {{0}};
    size_t V = (size_t)m->config.vocab_size;
    GrammarVocab *vocab = sequence_grammar_vocab(tok, V, &err);
    Grammar *schema = compile_constraint(0, &err);
    const char *digits = "root ::= [0-9]{1,3}", *many = "root ::= [0-9]{1,6}";
    Grammar *g3 = grammar_compile(digits, strlen(digits), NULL, &err);
    Grammar *g6 = grammar_compile(many, strlen(many), NULL, &err);
    int32_t eot = tokenizer_eot_id(tok);
    GrammarMasker *mk = vocab && schema ? grammar_masker_new(schema, vocab, eot, NULL, &err) : NULL;
    GrammarMatcher *start = schema ? grammar_matcher_new(schema, &err) : NULL;
    CHECK(vocab && schema && g3 && g6 && mk && start, "setup: %s", err.msg);
    if (!vocab || !schema || !g3 || !g6 || !mk || !start) goto done;
    int32_t *ids = NULL;
    size_t n = encode("And it came to pass, when the king", &ids);
    Draft d;
    if (draft_init_model(&d, q8, &(SamplerParams){.temperature = 1.0f, .top_p = 1.0f, .repeat_penalty = 1.0f},
                         n + 64, 8, NULL, &err) == 0) {
        DraftGrammar dg = {.state = start, .masker = mk, .tok = tok, .eos = eot, .vocab = V};
        for (int seed = 0; seed < 6; seed++) {
            double u[8];
            int32_t out[8];
            for (int i = 0; i < 8; i++) u[i] = fmod(0.137 * (seed * 8 + i + 1), 1.0);
            int got = draft_propose(&d, ids, n, 8, u, &dg, out, &err);
            GrammarMatcher *w = grammar_matcher_copy(start, &err);
            int ok = got == 8 && w;
            for (int i = 0; ok && i < got; i++) {
                size_t nb;
                const unsigned char *b = tokenizer_token_bytes(tok, out[i], &nb);
                ok = out[i] != eot && b && nb > 0 && grammar_matcher_feed(w, b, nb, &err) == 0;
            }
            CHECK(ok, "q8 draft under a schema, seed %d: %d guesses, each one the grammar reads", seed, got);
            grammar_matcher_free(w);
        }
    } else {
        CHECK(0, "draft: %s", err.msg);
    }
    draft_free(&d);
    free(ids);
    // lookup: "1" "1" "x" "2" follow the earlier "1" "2"
    int32_t one = -1, two = -1, x = -1, *t = NULL;
    if (encode("1", &t) == 1) one = t[0];
    free(t);
    if (encode("2", &t) == 1) two = t[0];
    free(t);
    if (encode("x", &t) == 1) x = t[0];
    free(t);
    CHECK(one >= 0 && two >= 0 && x >= 0, "single-character tokens");
    int32_t toks[] = {one, two, one, one, x, two, one, two}, toks2[] = {one, two, one, one, one, one, one, one, two}, out[4];
    draft_init_lookup(&d, 2, 64, 4, &err);
    GrammarMasker *mk6 = grammar_masker_new(g6, vocab, eot, NULL, &err), *mk3 = grammar_masker_new(g3, vocab, eot, NULL, &err);
    GrammarMatcher *s6 = grammar_matcher_new(g6, &err), *s3 = grammar_matcher_new(g3, &err);
    DraftGrammar d6 = {.state = s6, .masker = mk6, .tok = tok, .eos = eot, .vocab = V};
    DraftGrammar d3 = {.state = s3, .masker = mk3, .tok = tok, .eos = eot, .vocab = V};
    int got = draft_propose(&d, toks, 8, 4, NULL, NULL, out, &err);
    CHECK(got == 4 && out[2] == x, "lookup without a grammar: %d guesses", got);
    got = draft_propose(&d, toks, 8, 4, NULL, &d6, out, &err);
    CHECK(got == 2 && out[0] == one && out[1] == one, "lookup under [0-9]{1,6}: %d guesses, want 2 (x is not a digit)", got);
    got = draft_propose(&d, toks2, 9, 4, NULL, &d6, out, &err);
    CHECK(got == 4, "lookup of digits under [0-9]{1,6}: %d guesses, want 4", got);
    got = draft_propose(&d, toks2, 9, 4, NULL, &d3, out, &err);
    CHECK(got == 3, "lookup under [0-9]{1,3}: %d guesses, want 3 (nothing follows the third)", got);
    draft_free(&d);
    grammar_masker_free(mk6);
    grammar_masker_free(mk3);
    grammar_matcher_free(s6);
    grammar_matcher_free(s3);
done:
    grammar_matcher_free(start);
    grammar_masker_free(mk);
    grammar_free(g3);
    grammar_free(g6);
    grammar_free(schema);
    grammar_vocab_free(vocab);
}

static int load(Model *m, const char *path, int dtype) {
    GptError err = {{0}};
    WeightOptions wo = {.matrix_dtype = dtype};
    if (model_load_with(m, path, &wo, &err) != 0) {
        CHECK(0, "%s: %s", path, err.msg);
        return -1;
    }
    return 0;
}

int main(void) {
    GptError err = {{0}};
    if (!(tok = tokenizer_load("models", &err))) {
        CHECK(0, "tokenizer: %s", err.msg);
        return check_exit("test_speculate");
    }
    const char *prompt = "And it came to pass, when the king";
    // The demo model, stored F16: drafts of itself in every dtype, the tiny
    // checkpoint, and itself.
    Model demo = {0}, demo_q8 = {0}, demo_bf16 = {0}, demo_f32 = {0}, tiny = {0};
    if (load(&demo, "models/demo.bin", -1) || load(&demo_q8, "models/demo.bin", DTYPE_Q8) ||
        load(&demo_bf16, "models/demo.bin", DTYPE_BF16) || load(&demo_f32, "models/demo.bin", DTYPE_F32) ||
        load(&tiny, ckpt("tiny"), -1))
        return check_exit("test_speculate");
    test_truncate(&tiny.config);
    {
        Spec drafts[] = {{.draft = &demo, .k = 4}, {.draft = &demo_q8, .k = 4}, {.draft = &demo_q8, .k = 1},
                         {.draft = &demo_bf16, .k = 7}, {.draft = &tiny, .k = 3}, {.lookup_n = 2, .k = 5}};
        const char *names[] = {"itself", "q8", "q8", "bf16", "tiny", "lookup 2"};
        check_settings("demo f16", &demo, drafts, names, 6, 0, prompt, 40, 0);
    }
    {
        Spec drafts[] = {{.draft = &demo_f32, .k = 4}, {.draft = &demo_q8, .k = 4}, {.draft = &demo, .k = 5}};
        const char *names[] = {"itself", "q8", "f16"};
        check_settings("demo f32", &demo_f32, drafts, names, 3, 0, prompt, 40, 0);
    }
    {
        Spec drafts[] = {{.draft = &demo_q8, .k = 4}, {.draft = &demo, .k = 2}};
        const char *names[] = {"itself", "f16"};
        check_settings("demo q8", &demo_q8, drafts, names, 2, 0, prompt, 40, 0);
        Spec bdrafts[] = {{.draft = &demo_bf16, .k = 3}, {.draft = &demo_q8, .k = 3}};
        const char *bnames[] = {"itself", "q8"};
        check_settings("demo bf16", &demo_bf16, bdrafts, bnames, 2, 0, prompt, 40, 1);
    }
    // The demo model's own q8 guesses its greedy tokens almost always (the
    // two differ by q8's rounding alone): acceptance, measured, 100% here.
    {
        int32_t *ids = NULL;
        size_t n = encode(prompt, &ids);
        GenParams gp = params(0.0f, 0, 60);
        Spec q8 = {.draft = &demo_q8, .k = 4};
        Run *r = malloc(sizeof *r);
        if (generate(&demo, ids, n, &gp, DTYPE_F32, -1, &q8, r) == 0)
            CHECK(r->proposed > 0 && r->accepted >= 0.9 * (double)r->proposed,
                  "demo, q8 draft, greedy: %zu of %zu guesses accepted", r->accepted, r->proposed);
        free(r);
        free(ids);
    }
    check_stops("demo", &demo, prompt);
    check_stops("demo q8", &demo_q8, prompt);
    check_lookup(&demo);
    check_grammar(&demo, &demo_q8, &tiny);
    check_grammar_proposals(&demo, &demo_q8);
    // The tiny checkpoint in each dtype, drafted by itself and by q8.
    static const int dtypes[] = {DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_Q8};
    Model tiny_q8 = {0};
    load(&tiny_q8, ckpt("tiny"), DTYPE_Q8);
    for (size_t i = 0; i < 4; i++) {
        Model t = {0};
        if (load(&t, ckpt("tiny"), dtypes[i]) != 0) continue;
        Spec drafts[] = {{.draft = &t, .k = 4}, {.draft = &tiny_q8, .k = 3}};
        const char *names[] = {"itself", "q8"};
        char name[32];
        snprintf(name, sizeof name, "tiny %s", dtype_name((DType)dtypes[i]));
        check_settings(name, &t, drafts, names, 2, 0, "Hello, world", 30, 1);
        model_free(&t);
    }
    check_stops("tiny", &tiny, "Hello, world");
    // A draft that never agrees: the tiny checkpoint for the 124M-shaped one.
    Model big = {0};
    if (load(&big, ckpt("gpt2-124M-shaped"), -1) == 0) {
        Spec drafts[] = {{.draft = &tiny, .k = 3}};
        const char *names[] = {"tiny (unrelated)"};
        check_settings("124M-shaped", &big, drafts, names, 1, -1, "The quick brown fox", 12, 1);
        model_free(&big);
    }
    model_free(&tiny_q8);
    model_free(&tiny);
    model_free(&demo_f32);
    model_free(&demo_bf16);
    model_free(&demo_q8);
    model_free(&demo);
    tokenizer_free(tok);
    return check_exit("test_speculate");
}
