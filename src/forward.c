/*
 * forward.c - the GPT-2 forward pass.
 *
 * Shapes, used in every comment below:
 *   T   new tokens in this call (all sequences stacked)    n   new tokens of one sequence
 *   C   channels (n_embd, 768)       NH  heads (12)        HS  head size (C / NH, 64)
 *   L   layers (12)                  V   vocabulary (50257)  F   MLP width (n_inner, 4C = 3072)
 *   P   positions already in a sequence's cache             Tk  P + n, keys attended over
 *
 * Per block, in Hugging Face GPT-2's order (pre-LayerNorm):
 *   x += attn(ln_1(x)) @ W_proj + b_proj
 *   x += act(ln_2(x) @ W_fc + b_fc) @ W_fcproj + b_fcproj
 * then ln_f and logits = ln_f(x) @ wte^T (the output layer tied to wte), or
 * @ lm_head^T when the model's own. act is the config's activation (GELU's
 * tanh form in GPT-2), and attn scales q . k by gpt2_attn_scale (model.h).
 *
 * What it does not do: sample, tokenize, own the cache's memory, or know how a
 * weight is stored (matmul.h does).
 */
#include "forward.h"

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/blas.h"
#include "base/bytes.h"
#include "kernels/matmul.h"
#include "base/memory.h"
#include "kernels/vecmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// scratch memory

int forward_state_init(ForwardState *s, const GPT2Config *cfg, size_t max_tokens,
                       size_t max_ctx, size_t max_logit_rows, ThreadPool *pool, GptError *err) {
    memset(s, 0, sizeof *s);
    if (max_tokens < 1 || max_ctx < 1 || max_ctx > (size_t)cfg->n_ctx)
        return gpt_error(err, "forward: bad scratch sizes (tokens %zu, context %zu)",
                         max_tokens, max_ctx);
    if (cfg->n_embd / cfg->n_head > 256)
        return gpt_error(err, "forward: head size %d; attention handles up to 256", cfg->n_embd / cfg->n_head);
    size_t C = (size_t)cfg->n_embd, V = (size_t)cfg->vocab_size, T = max_tokens, F = gpt2_mlp_width(cfg);
    size_t threads = (size_t)threadpool_size(pool);
    // matmul's scratch per thread: one group of rows of the widest input (F or C)
    size_t mm_floats = matmul_scratch_floats(T < MATMUL_GROUP ? T : MATMUL_GROUP, F > C ? F : C);
    // Each buffer starts on a 64-byte boundary (16 floats).
    size_t sizes[8] = {T * C, T * C, T * 3 * C, T * C, T * F, threads * ATTENTION_QUERY_BLOCK * round_up(max_ctx, 16),
                       max_logit_rows * V, threads * mm_floats};
    size_t total = 0;
    for (int i = 0; i < 8; i++) total += round_up(sizes[i], 16);
    float *block = memory_alloc_large(total * sizeof(float));
    if (!block) return gpt_error(err, "forward: out of memory for %zu scratch floats", total);
    float **slots[8] = {&s->x, &s->ln, &s->qkv, &s->attn, &s->fc, &s->scores, &s->logits, &s->matmul_scratch};
    float *p = block;
    for (int i = 0; i < 8; i++) {
        *slots[i] = p;
        p += round_up(sizes[i], 16);
    }
    s->block = block;
    s->bytes = total * sizeof(float);
    s->max_tokens = max_tokens;
    s->max_ctx = max_ctx;
    s->max_logit_rows = max_logit_rows;
    s->matmul_scratch_floats = mm_floats;
    s->pool = pool;
    s->isa = cpu_best_isa();
    return 0;
}

int forward_state_use_blas(ForwardState *s, const GPT2Config *cfg, GptError *err) {
    size_t HS = (size_t)(cfg->n_embd / cfg->n_head);
    if (s->use_blas) return 0;
    if (blas_load(err) != 0) return -1;
    size_t bytes = blas_attention_floats(s->max_tokens, s->max_ctx, HS, threadpool_size(s->pool)) * sizeof(float);
    s->blas_scratch = malloc(bytes);
    if (!s->blas_scratch) return gpt_error(err, "forward: out of memory for the OpenBLAS attention's scratch");
    s->bytes += bytes;
    s->use_blas = 1;
    return 0;
}

void forward_state_free(ForwardState *s) {
    if (!s) return;
    free(s->lora_u);
    free(s->lora_rows);
    free(s->blas_scratch);
    free(s->block);
    memset(s, 0, sizeof *s);
}

// ----------------------------------------------------------------------------
// kernels

void layernorm_forward(float *out, const float *inp, const float *weight,
                       const float *bias, size_t T, size_t C, float eps) {
    for (size_t t = 0; t < T; t++) {
        const float *x = inp + t * C;
        float *y = out + t * C;
        // Two passes in double: the mean first, then the variance around it,
        // so large means cost no precision.
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (size_t i = 0; i < C; i++) sum += x[i];
        float mean = (float)(sum / (double)C);
        double var = 0.0;
#pragma omp simd reduction(+ : var)
        for (size_t i = 0; i < C; i++) {
            double d = (double)x[i] - mean;
            var += d * d;
        }
        float rstd = (float)(1.0 / sqrt(var / (double)C + (double)eps));
#pragma omp simd
        for (size_t i = 0; i < C; i++) y[i] = (x[i] - mean) * rstd * weight[i] + bias[i];
    }
}

// Below this many rows (decode), layernorm and the cache writes run on the
// caller's thread alone: waking the others costs more than they save.
enum { FEW_ROWS = 8 };

// layernorm_forward over the rows of x, a share of them for each thread
// (each row's result is its own: the same bits).
typedef struct {
    float *out;
    const float *inp, *weight, *bias;
    size_t T, C;
    float eps;
} LayerNormJob;

static void layernorm_task(void *arg, int thread, int n_threads) {
    const LayerNormJob *j = arg;
    size_t begin, end;
    thread_range(j->T, 1, thread, n_threads, &begin, &end);
    if (begin < end)
        layernorm_forward(j->out + begin * j->C, j->inp + begin * j->C, j->weight, j->bias, end - begin, j->C, j->eps);
}

static void layernorm_pool(ThreadPool *pool, float *out, const float *inp, const float *weight, const float *bias,
                           size_t T, size_t C, float eps) {
    LayerNormJob j = {out, inp, weight, bias, T, C, eps};
    if (T < FEW_ROWS) layernorm_task(&j, 0, 1);  // not worth waking the threads
    else threadpool_run(pool, layernorm_task, &j);
}

// activation_pool (forward.h): a share of x for each thread.
typedef struct {
    ActivationFn f;
    float *x;
    size_t n;
} ActivationJob;

static void activation_task(void *arg, int thread, int n_threads) {
    const ActivationJob *j = arg;
    size_t begin, end;
    thread_range(j->n, 16, thread, n_threads, &begin, &end);
    if (begin < end) j->f(j->x + begin, end - begin);
}

void activation_pool(ThreadPool *pool, ActivationFn f, float *x, size_t n) {
    ActivationJob j = {f, x, n};
    threadpool_run(pool, activation_task, &j);
}

// ----------------------------------------------------------------------------
// attention

// One layer's attention for every new token of every sequence in the call.
typedef struct {
    const ForwardState *s;
    const SeqInput *seqs;
    size_t n_seqs, layer, C, NH;
    float scale;       // of q . k (gpt2_attn_scale)
    size_t skip_from;  // sequences with this many new tokens or more are done already (OpenBLAS)
} AttentionJob;

// Part p of n_parts takes every n_parts-th item, an item being a block of
// up to ATTENTION_QUERY_BLOCK consecutive tokens of one sequence and one
// head, in the order sequence, head, block: one attention_queries call,
// which loads each key and value once for its tokens, and a part's next
// items (the same head) find them in its thread's cache. Dealt out one by
// one, not in runs: in a causal prefill a later token attends over more
// positions, and a thread given the second half of the tokens had 3 times
// the work of the other (prefill of 512 tokens on 2 threads). A prefill has
// 4 parts a thread, taken as the threads come free (threadpool_run_parts),
// decode one part a thread.
static void attention_part(void *arg, int part, int n_parts, int thread) {
    const AttentionJob *j = arg;
    size_t HS = j->C / j->NH, item = 0, row = 0;
    float *scores = j->s->scores + (size_t)thread * ATTENTION_QUERY_BLOCK * round_up(j->s->max_ctx, 16);
    for (size_t i = 0; i < j->n_seqs; row += j->seqs[i].n_tokens, i++) {
        size_t n = j->seqs[i].n_tokens, P = j->seqs[i].cache->n_tokens;
        if (n >= j->skip_from) continue;
        for (size_t h = 0; h < j->NH; h++)
            for (size_t t = 0; t < n; t += ATTENTION_QUERY_BLOCK, item++) {
                if (item % (size_t)n_parts != (size_t)part) continue;
                size_t nq = n - t < ATTENTION_QUERY_BLOCK ? n - t : ATTENTION_QUERY_BLOCK;
                // the query at position P + t + i sees keys 0 .. P + t + i
                attention_queries(j->s->isa, j->s->attn + (row + t) * j->C + h * HS, j->C,
                                  j->s->qkv + (row + t) * 3 * j->C + h * HS, 3 * j->C, nq, j->seqs[i].cache,
                                  j->layer, h, P + t + 1, j->scale, scores);
            }
    }
}

// The new tokens' keys and values of one layer into their caches, head h
// by the thread h mod n_threads (a head's keys and values of a block are
// runs of their own: no two threads write one cache line).
typedef struct {
    const SeqInput *seqs;
    size_t n_seqs, layer, C, NH;
    const float *qkv;
} KVStoreJob;

static void kvstore_task(void *arg, int thread, int n_threads) {
    const KVStoreJob *j = arg;
    size_t HS = j->C / j->NH;
    for (size_t h = (size_t)thread; h < j->NH; h += (size_t)n_threads)
        for (size_t i = 0, row = 0; i < j->n_seqs; i++)
            for (size_t t = 0; t < j->seqs[i].n_tokens; t++, row++) {
                const float *k = j->qkv + row * 3 * j->C + j->C + h * HS;  // (HS), the value C after it
                kvcache_store(j->seqs[i].cache, j->layer, h, j->seqs[i].cache->n_tokens + t, k, k + j->C);
            }
}

// 1 if no element of x (n) is NaN or infinite: 0 * x is 0 for every
// finite x and NaN otherwise, and a NaN stays in the sum.
static int all_finite(const float *x, size_t n) {
    float z = 0.0f;
#pragma omp simd reduction(+ : z)
    for (size_t i = 0; i < n; i++) z += 0.0f * x[i];
    return z == 0.0f;
}

// ----------------------------------------------------------------------------
// the model

// out (+)= inp @ W^T + bias: through OpenBLAS when the state says so and the
// call qualifies (blas_matmul), else our kernels.
static void product(const ForwardState *s, float *out, const float *inp, const Weight *W, const float *bias,
                    size_t T, int accumulate, const MatmulContext *mm) {
    if (s->use_blas && blas_matmul(out, inp, W, bias, T, accumulate, s->pool)) return;
    matmul(out, inp, W, bias, T, accumulate, mm);
}

// out(T,N) = act(inp @ W^T + bias): the activation on each part of the
// product as it is made (matmul_then), the same bits as a pass over out
// afterwards (each is elementwise: activation.h).
static void product_activation(const ForwardState *s, float *out, const float *inp, const Weight *W,
                               const float *bias, size_t T, ActivationFn act, const MatmulContext *mm) {
    if (s->use_blas && blas_matmul(out, inp, W, bias, T, 0, s->pool)) {
        activation_pool(s->pool, act, out, T * W->n_out);
        return;
    }
    matmul_then(out, inp, W, bias, T, 0, mm, act);
}

// ----------------------------------------------------------------------------
// run-time adapters (SeqInput.lora)

// A row of a call and the adapter's change to the matrix of the product.
typedef struct {
    size_t t;
    const LoraMatrix *m;
} LoraRow;

typedef struct {
    const LoraRow *rows;
    size_t n, rmax;     // rows; u holds rmax values a row
    const float *inp;   // (T, n_in)
    float *out;         // (T, n_out)
    float *u;           // (n, rmax) A inp(t)
    size_t n_in, n_out;
} LoraJob;

// u(i, j) = A_j . inp(t_i): the items (row, j) dealt out in runs.
static void lora_down_part(void *arg, int part, int n_parts, int thread) {
    (void)thread;
    const LoraJob *j = arg;
    size_t items = j->n * j->rmax, lo = items * (size_t)part / (size_t)n_parts,
           hi = items * (size_t)(part + 1) / (size_t)n_parts;
    for (size_t it = lo; it < hi; it++) {
        const LoraRow *r = &j->rows[it / j->rmax];
        size_t k = it % j->rmax;
        if (k >= r->m->r) continue;
        const float *a = r->m->a + k * j->n_in, *x = j->inp + r->t * j->n_in;
        // 16 lanes (lane c % 16 takes product c, in order), then their fixed tree
        float lane[16] = {0};
        size_t c = 0;
        for (; c + 16 <= j->n_in; c += 16)
            for (int q = 0; q < 16; q++) lane[q] += a[c + q] * x[c + q];
        for (int q = 0; c < j->n_in; c++, q++) lane[q] += a[c] * x[c];
        j->u[it] = lane16_sum(lane);
    }
}

// out(t_i, o) += scale * sum_j B(o, j) u(i, j): the outputs dealt out in
// runs of 64, each summed over j in order.
enum { LORA_RUN = 64 };
static void lora_up_part(void *arg, int part, int n_parts, int thread) {
    (void)thread;
    const LoraJob *j = arg;
    size_t runs = (j->n_out + LORA_RUN - 1) / LORA_RUN, items = j->n * runs;
    for (size_t it = (size_t)part; it < items; it += (size_t)n_parts) {
        const LoraRow *r = &j->rows[it / runs];
        size_t o0 = it % runs * LORA_RUN, n = j->n_out - o0 < LORA_RUN ? j->n_out - o0 : LORA_RUN;
        const float *u = j->u + it / runs * j->rmax;
        float acc[LORA_RUN] = {0};
        for (size_t k = 0; k < r->m->r; k++) {
            const float *restrict bt = r->m->bt + k * j->n_out + o0;
            const float uk = u[k];
            if (n == LORA_RUN) {
#pragma omp simd
                for (size_t o = 0; o < LORA_RUN; o++) acc[o] += bt[o] * uk;
            } else {
                for (size_t o = 0; o < n; o++) acc[o] += bt[o] * uk;
            }
        }
        float *y = j->out + r->t * j->n_out + o0;
        for (size_t o = 0; o < n; o++) y[o] += (float)(r->m->scale * acc[o]);
    }
}

// out(T, n_out) += the changes of matrix k of layer l for the rows of the
// sequences whose adapter changes it. Every value is computed by one part
// in a fixed order: the same bits whatever the batch and the threads. 0,
// or -1 with err set (out of memory).
static int lora_product(ForwardState *s, float *out, const float *inp, const SeqInput *seqs, size_t n_seqs,
                        size_t l, int k, size_t n_in, size_t n_out, GptError *err) {
    LoraRow *rows = s->lora_rows;
    size_t n = 0, rmax = 0;
    for (size_t i = 0, t = 0; i < n_seqs; t += seqs[i].n_tokens, i++) {
        const LoraMatrix *m = seqs[i].lora ? &seqs[i].lora->m[l * 4 + (size_t)k] : NULL;
        if (!m || !m->r) continue;
        for (size_t q = 0; q < seqs[i].n_tokens; q++) rows[n++] = (LoraRow){t + q, m};
        if (m->r > rmax) rmax = m->r;
    }
    if (!n) return 0;
    if (n * rmax > s->lora_u_cap) {
        float *u = realloc(s->lora_u, n * rmax * sizeof *u);
        if (!u) return gpt_error(err, "forward: out of memory for an adapter's products");
        s->lora_u = u, s->lora_u_cap = n * rmax;
    }
    LoraJob job = {rows, n, rmax, inp, out, s->lora_u, n_in, n_out};
    int parts = threadpool_size(s->pool);
    threadpool_run_parts(s->pool, lora_down_part, &job, parts);
    threadpool_run_parts(s->pool, lora_up_part, &job, parts);
    return 0;
}

// Each sequence's rows of x(T,C) that asks for its residual stream into
// its slot k (SeqInput.residual).
static void copy_residual(const ForwardState *s, const SeqInput *seqs, size_t n_seqs, size_t k, size_t C) {
    for (size_t i = 0, row = 0; i < n_seqs; row += seqs[i].n_tokens, i++)
        if (seqs[i].residual)
            memcpy(seqs[i].residual + k * seqs[i].residual_stride, s->x + row * C, seqs[i].n_tokens * C * sizeof(float));
}

// Everything that can go wrong is checked before any cache is touched.
static int check_batch(const Model *m, const ForwardState *s, const SeqInput *seqs,
                       size_t n_seqs, GptError *err) {
    const GPT2Config *cfg = &m->config;
    size_t T = 0, rows = 0;
    for (size_t i = 0; i < n_seqs; i++) {
        const SeqInput *q = &seqs[i];
        const KVCache *c = q->cache;
        if (!c || c->n_layer != (size_t)cfg->n_layer || c->n_head != (size_t)cfg->n_head ||
            c->head_size * c->n_head != (size_t)cfg->n_embd)
            return gpt_error(err, "forward: sequence %zu has no cache of this model's shape", i);
        if (q->n_tokens > c->capacity - c->n_tokens)
            return gpt_error(err, "forward: sequence %zu: %zu tokens + %zu new exceed the cache's %zu positions",
                             i, c->n_tokens, q->n_tokens, c->capacity);
        if (c->n_tokens + q->n_tokens > s->max_ctx)
            return gpt_error(err, "forward: sequence %zu: %zu positions exceed the scratch's %zu",
                             i, c->n_tokens + q->n_tokens, s->max_ctx);
        for (size_t t = 0; t < q->n_tokens; t++)
            if (q->tokens[t] < 0 || q->tokens[t] >= cfg->vocab_size)
                return gpt_error(err, "forward: token id %d outside the vocabulary [0, %d)",
                                 (int)q->tokens[t], cfg->vocab_size);
        if (q->residual && q->residual_stride < q->n_tokens * (size_t)cfg->n_embd)
            return gpt_error(err, "forward: sequence %zu: residual_stride %zu below its %zu tokens' rows", i,
                             q->residual_stride, q->n_tokens);
        T += q->n_tokens;
        if (q->want == LOGITS_LAST && q->n_tokens > 0) rows += 1;
        if (q->want == LOGITS_ALL) rows += q->n_tokens;
    }
    if (T > s->max_tokens)
        return gpt_error(err, "forward: %zu tokens in one call, scratch holds %zu", T, s->max_tokens);
    if (rows > s->max_logit_rows)
        return gpt_error(err, "forward: %zu logit rows in one call, scratch holds %zu", rows,
                         s->max_logit_rows);
    return 0;
}

int gpt2_forward(const Model *m, ForwardState *s, SeqInput *seqs, size_t n_seqs,
                 GptError *err) {
    if (check_batch(m, s, seqs, n_seqs, err) != 0) return -1;
    const GPT2Config *cfg = &m->config;
    const GPT2Weights *w = &m->weights;
    size_t C = (size_t)cfg->n_embd, NH = (size_t)cfg->n_head, V = (size_t)cfg->vocab_size;
    const MatmulContext mm = {s->pool, s->matmul_scratch, s->matmul_scratch_floats, s->isa, &s->plan};
    const ActivationFn act = activation_kernel(cfg->activation);  // validated: never NULL
    int adapted = 0;  // a sequence has a run-time adapter
    for (size_t i = 0; i < n_seqs; i++) adapted |= seqs[i].lora != NULL;
    if (adapted && !s->lora_rows && !(s->lora_rows = malloc(s->max_tokens * sizeof(LoraRow))))
        return gpt_error(err, "forward: out of memory for an adapter's rows");
    size_t F = gpt2_mlp_width(cfg);

    // x(T,C) = wte[token] + wpe[position]
    size_t T = 0;
    for (size_t i = 0; i < n_seqs; i++) {
        for (size_t t = 0; t < seqs[i].n_tokens; t++, T++) {
            const float *pos = w->wpe + (seqs[i].cache->n_tokens + t) * C;
            float *x = s->x + T * C;
            weight_row(x, &w->wte, (size_t)seqs[i].tokens[t]);
            for (size_t c = 0; c < C; c++) x[c] += pos[c];
        }
    }
    if (T == 0) return 0;
    if (!all_finite(s->x, T * C))
        return gpt_error(err, "forward: the embedding of a token is not finite (NaN or infinite): "
                              "wte or wpe of the model is damaged");
    copy_residual(s, seqs, n_seqs, 0, C);

    for (size_t l = 0; l < (size_t)cfg->n_layer; l++) {
        const GPT2Layer *lw = &w->layers[l];
        layernorm_pool(s->pool, s->ln, s->x, lw->ln1_w, lw->ln1_b, T, C, cfg->ln_eps);
        // qkv(T,3C) = ln(T,C) @ qkv_w(C,3C) + qkv_b
        product(s, s->qkv, s->ln, &lw->qkv_w, lw->qkv_b, T, 0, &mm);
        if (adapted && lora_product(s, s->qkv, s->ln, seqs, n_seqs, l, 0, C, 3 * C, err) != 0) return -1;
        // The new tokens' keys and values go into the caches first; then
        // each (token, head) attends over its sequence's cache.
        KVStoreJob store = {seqs, n_seqs, l, C, NH, s->qkv};
        if (T < FEW_ROWS) kvstore_task(&store, 0, 1);
        else threadpool_run(s->pool, kvstore_task, &store);
        // attn(T,C) = heads side by side
        // A long chunk's attention through OpenBLAS (with --blas), the rest ours.
        size_t skip_from = s->use_blas ? BLAS_MIN_ROWS : SIZE_MAX;
        float scale = gpt2_attn_scale(cfg, l);
        for (size_t i = 0, first = 0; s->use_blas && i < n_seqs; first += seqs[i].n_tokens, i++)
            if (seqs[i].n_tokens >= skip_from)
                blas_attention(s->attn + first * C, s->qkv + first * 3 * C, seqs[i].cache, l, seqs[i].n_tokens, C,
                               scale, s->blas_scratch, s->pool);
        AttentionJob job = {s, seqs, n_seqs, l, C, NH, scale, skip_from};
        int n_threads = threadpool_size(s->pool);
        threadpool_run_parts(s->pool, attention_part, &job, T < FEW_ROWS ? n_threads : 4 * n_threads);
        // x(T,C) += attn(T,C) @ attn_proj_w(C,C) + attn_proj_b
        product(s, s->x, s->attn, &lw->attn_proj_w, lw->attn_proj_b, T, 1, &mm);
        if (adapted && lora_product(s, s->x, s->attn, seqs, n_seqs, l, 1, C, C, err) != 0) return -1;
        layernorm_pool(s->pool, s->ln, s->x, lw->ln2_w, lw->ln2_b, T, C, cfg->ln_eps);
        // fc(T,F) = act(ln(T,C) @ fc_w(C,F) + fc_b); an adapter's change
        // goes in before the activation (the same bits for the other rows:
        // product_activation's are a pass over the product's)
        if (adapted) {
            product(s, s->fc, s->ln, &lw->fc_w, lw->fc_b, T, 0, &mm);
            if (lora_product(s, s->fc, s->ln, seqs, n_seqs, l, 2, C, F, err) != 0) return -1;
            activation_pool(s->pool, act, s->fc, T * F);
        } else {
            product_activation(s, s->fc, s->ln, &lw->fc_w, lw->fc_b, T, act, &mm);
        }
        // x(T,C) += fc(T,F) @ fc_proj_w(F,C) + fc_proj_b
        product(s, s->x, s->fc, &lw->fc_proj_w, lw->fc_proj_b, T, 1, &mm);
        if (adapted && lora_product(s, s->x, s->fc, seqs, n_seqs, l, 3, F, C, err) != 0) return -1;
        // A NaN or an infinity from a damaged weight spreads to everything
        // after it: say where it first appears, not just that the logits are bad.
        if (!all_finite(s->x, T * C))
            return gpt_error(err, "forward: layer %zu gives a non-finite activation (NaN or infinite): "
                                  "a weight of h.%zu is damaged, or too large for float32", l, l);
        copy_residual(s, seqs, n_seqs, l + 1, C);
    }

    // The final layernorm only for the rows whose logits are wanted, gathered
    // into ln(R,C); then one product with the output layer.
    size_t R = 0, row = 0;
    for (size_t i = 0; i < n_seqs; i++) {
        size_t n = seqs[i].n_tokens;
        seqs[i].logits_row = R;
        // the final hidden states: ln_f row by row, the rule of the rows below
        if (seqs[i].hidden) layernorm_forward(seqs[i].hidden, s->x + row * C, w->lnf_w, w->lnf_b, n, C, cfg->ln_eps);
        if (n > 0 && seqs[i].want == LOGITS_LAST) {
            layernorm_forward(s->ln + R * C, s->x + (row + n - 1) * C, w->lnf_w, w->lnf_b, 1, C,
                              cfg->ln_eps);
            R += 1;
        } else if (seqs[i].want == LOGITS_ALL) {
            layernorm_forward(s->ln + R * C, s->x + row * C, w->lnf_w, w->lnf_b, n, C,
                              cfg->ln_eps);
            R += n;
        }
        row += n;
        seqs[i].cache->n_tokens += n;
    }
    // logits(R,V) = ln(R,C) @ out(V,C)^T, out = wte or lm_head
    if (R > 0) product(s, s->logits, s->ln, gpt2_output_weight(w, cfg), NULL, R, 0, &mm);
    if (R > 0 && !all_finite(s->logits, R * V)) {
        size_t bad = 0;
        while (bad < R * V && isfinite(s->logits[bad])) bad++;
        return gpt_error(err, "forward: the logit of token %zu is not finite (NaN or infinite): %s, the output "
                              "layer, is damaged", bad % V, cfg->untied_output ? "lm_head" : "wte");
    }
    return 0;
}
