/*
 * sampler.c - logits -> next token id, following Hugging Face's order of
 * logits processing (see sampler.h for the exact semantics of each filter).
 *
 * What it does: logit_bias and the penalties on the logits (the repetition
 * penalty alone in place; with the bias or the presence/frequency penalties,
 * all of them on a copy in the scratch), then one pass
 * that turns the surviving logits into unnormalized weights exp((l - max)/T)
 * in double, then the filters on that candidate list, then one draw.
 * Greedy stops at the argmax. Where every weight counts (temperature alone,
 * or top-p without top-k), the answer is first decided from vector
 * approximations of the weights, and only when their error bounds prove it
 * is the answer the exact weights give; otherwise (about once in a million
 * draws) the exact computation runs. The tokens are the same either way.
 * What it does not: it never sorts the whole vocabulary when a filter is on.
 * top-k finds its threshold with a size-k min-heap (O(V log k)); top-p finds
 * the bucket of a logit histogram where the nucleus ends, then the cut inside
 * that bucket by quickselect (expected O(n) in all); min-p is one comparison
 * per candidate. The test keeps a plain full-sort version of all of it.
 *
 * The RNG is xoshiro256** seeded through splitmix64; the same seed gives the
 * same tokens on every machine. The sampler keeps no global state.
 */
#include "sampler.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/memory.h"
#include "kernels/sampler_kernels.h"

// ---------------------------------------------------------------------------
// RNG

uint64_t sampler_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// splitmix64 is a bijection of its counter, so four consecutive outputs are
// never all zero: the all-zero state, a fixed point of xoshiro, can't occur.
void sampler_rng_seed(SamplerRng *r, uint64_t seed) {
    uint64_t state = seed;
    for (int i = 0; i < 4; i++) r->s[i] = sampler_splitmix64(&state);
}

static inline uint64_t rotl64(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t sampler_rng_next(SamplerRng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

// The top 53 bits: every value is a multiple of 2^-53, so the result is
// exact in double and strictly below 1.
double sampler_rng_uniform(SamplerRng *r) {
    return (double)(sampler_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t sampler_random_seed(void) {
    uint64_t seed = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
        unsigned char *p = (unsigned char *)&seed;
        size_t got = 0;
        while (got < sizeof seed) {
            ssize_t n = read(fd, p + got, sizeof seed - got);
            if (n <= 0) break;
            got += (size_t)n;
        }
        close(fd);
        if (got == sizeof seed) return seed;
    }
    // No entropy source: time and pid still differ between runs; splitmix
    // spreads their few changing bits over the whole word.
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t mix = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^
                   ((uint64_t)getpid() << 42);
    return sampler_splitmix64(&mix);
}

// ---------------------------------------------------------------------------
// Parameters and lifetime

int sampler_params_validate(const SamplerParams *p, GptError *err) {
    // Written as !(ok) so that NaN fails every check.
    if (!(p->temperature >= 0))
        return gpt_error(err, "temperature %g: must be >= 0", p->temperature);
    if (isinf(p->temperature))
        return gpt_error(err, "temperature %g: must be finite", p->temperature);
    if (p->top_k < 0)
        return gpt_error(err, "top_k %d: must be >= 0", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return gpt_error(err, "top_p %g: must be in (0, 1]", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return gpt_error(err, "min_p %g: must be in [0, 1]", p->min_p);
    if (!(p->repeat_penalty > 0))
        return gpt_error(err, "repeat_penalty %g: must be > 0",
                         p->repeat_penalty);
    if (isinf(p->repeat_penalty))
        return gpt_error(err, "repeat_penalty %g: must be finite",
                         p->repeat_penalty);
    if (!(fabsf(p->presence_penalty) <= SAMPLER_PENALTY_MAX))
        return gpt_error(err, "presence_penalty %g: must be in [-2, 2]", p->presence_penalty);
    if (!(fabsf(p->frequency_penalty) <= SAMPLER_PENALTY_MAX))
        return gpt_error(err, "frequency_penalty %g: must be in [-2, 2]", p->frequency_penalty);
    if (p->n_bias > SAMPLER_BIAS_MAX)
        return gpt_error(err, "logit_bias: %zu entries: at most %d", p->n_bias, SAMPLER_BIAS_MAX);
    for (size_t i = 0; i < p->n_bias; i++) {
        const SamplerBias *b = &p->bias[i];
        if (b->id < 0) return gpt_error(err, "logit_bias: token id %d: must be >= 0", (int)b->id);
        if (!(fabsf(b->bias) <= SAMPLER_BIAS_LIMIT))
            return gpt_error(err, "logit_bias: token %d: bias %g must be in [-100, 100]", (int)b->id, b->bias);
        // at most 300 entries: the quadratic search costs nothing
        for (size_t j = 0; j < i; j++)
            if (p->bias[j].id == b->id) return gpt_error(err, "logit_bias: token id %d given twice", (int)b->id);
    }
    return 0;
}

// The checks that need the vocabulary: every logit_bias id below it.
static int check_bias_ids(const SamplerParams *p, size_t vocab_size, GptError *err) {
    for (size_t i = 0; i < p->n_bias; i++)
        if ((size_t)p->bias[i].id >= vocab_size)
            return gpt_error(err, "logit_bias: token id %d: must be below the vocabulary size %zu", (int)p->bias[i].id,
                             vocab_size);
    return 0;
}

int sampler_scratch_init(SamplerScratch *s, size_t vocab_size, GptError *err) {
    memset(s, 0, sizeof *s);
    if (vocab_size == 0 || vocab_size > (size_t)INT32_MAX)
        return gpt_error(err, "sampler: vocabulary size %zu: must be in 1..%d",
                         vocab_size, INT32_MAX);
    if (vocab_size > SIZE_MAX / sizeof(SamplerCand))
        return gpt_error(err, "sampler: vocabulary size %zu is too large",
                         vocab_size);
    s->vocab_size = vocab_size;
    s->isa = cpu_best_isa();
    // The six arrays in one block of address space, zero-filled (seen and
    // count start at zero), whose pages are taken as they are first
    // touched: on huge pages where the kernel gives them, so that a run's
    // first draws fault a few times rather than once per 4 KiB (a fresh
    // page costs microseconds on a virtual machine; a grammar's first mask
    // pass writes `adjusted` whole)
    size_t V = vocab_size, at = 0, size[6] = {V * sizeof *s->cand, V * sizeof *s->sorted, V * sizeof *s->heap,
                                              V * sizeof *s->seen, V * sizeof *s->adjusted, V * sizeof *s->count};
    size_t start[6];
    for (int i = 0; i < 6; i++) {
        start[i] = at;
        at += (size[i] + 63) & ~(size_t)63;
    }
    s->block_bytes = at;
    unsigned char *b = s->block = memory_reserve(at);
    if (b) {
        s->cand = (SamplerCand *)(void *)(b + start[0]);
        s->sorted = (SamplerCand *)(void *)(b + start[1]);
        s->heap = (float *)(void *)(b + start[2]);
        s->seen = b + start[3];
        s->adjusted = (float *)(void *)(b + start[4]);
        s->count = (uint32_t *)(void *)(b + start[5]);
    }
    s->bytes = size[0] + size[1] + size[2] + size[3] + size[4] + size[5];
    if (!b) {
        sampler_scratch_free(s);
        return gpt_error(err, "sampler: out of memory for a vocabulary of %zu",
                         vocab_size);
    }
    return 0;
}

void sampler_scratch_free(SamplerScratch *s) {
    if (!s) return;
    memory_release(s->block, s->block_bytes);
    memset(s, 0, sizeof *s);
}

int sampler_init_shared(Sampler *s, const SamplerParams *p, SamplerScratch *scratch,
                        GptError *err) {
    memset(s, 0, sizeof *s);
    if (sampler_params_validate(p, err) != 0 || check_bias_ids(p, scratch->vocab_size, err) != 0) return -1;
    s->params = *p;
    s->shared = scratch;
    s->n_prompt = SAMPLER_PROMPT_UNSET;
    sampler_rng_seed(&s->rng, p->seed);
    return 0;
}

int sampler_init(Sampler *s, const SamplerParams *p, size_t vocab_size,
                 GptError *err) {
    memset(s, 0, sizeof *s);
    if (sampler_params_validate(p, err) != 0) return -1;
    if (sampler_scratch_init(&s->own, vocab_size, err) != 0 || check_bias_ids(p, vocab_size, err) != 0) return -1;
    s->params = *p;
    s->n_prompt = SAMPLER_PROMPT_UNSET;
    sampler_rng_seed(&s->rng, p->seed);
    return 0;
}

void sampler_set_prompt(Sampler *s, size_t n_prompt) { s->n_prompt = n_prompt; }

void sampler_free(Sampler *s) {
    if (!s) return;
    // A shared scratch belongs to whoever made it.
    sampler_scratch_free(&s->own);
    s->shared = NULL;
}

// ---------------------------------------------------------------------------
// The filters

// The scratch a sampler draws with. (Not a pointer kept in the struct: a
// Sampler may be copied.)
static SamplerScratch *scratch_of(Sampler *s) { return s->shared ? s->shared : &s->own; }

// CTRL's rule as HF applies it: gather the logits of the history ids, scale,
// scatter back. A repeated id is gathered from the original logit each time,
// so it is penalized once, not once per occurrence; `seen` enforces that here.
static void apply_repeat_penalty(Sampler *sp, float *logits,
                                 const int32_t *history, size_t n_history) {
    float pen = sp->params.repeat_penalty;
    if (pen == 1.0f || n_history == 0) return;
    SamplerScratch *s = scratch_of(sp);
    size_t V = s->vocab_size;
    for (size_t i = 0; i < n_history; i++) {
        int32_t id = history[i];
        if (id < 0 || (size_t)id >= V || s->seen[id]) continue;
        s->seen[id] = 1;
        float l = logits[id];
        logits[id] = l < 0 ? l * pen : l / pen;
    }
    // Clearing only what was set keeps the cost O(history), not O(V).
    for (size_t i = 0; i < n_history; i++) {
        int32_t id = history[i];
        if (id >= 0 && (size_t)id < V) s->seen[id] = 0;
    }
}

// OpenAI's presence and frequency penalties over the generated ids, those
// after the prompt: l[t] -= count[t] * frequency + (count[t] > 0) * presence,
// in double, rounded to float once (so a plain reference in double gets the
// same bits). Counted first, then each distinct id adjusted once and its
// count cleared: O(generated), never O(V).
static void apply_presence_frequency(Sampler *sp, float *logits, const int32_t *history, size_t n_history) {
    double fp = sp->params.frequency_penalty, pp = sp->params.presence_penalty;
    if ((fp == 0 && pp == 0) || sp->n_prompt >= n_history) return;
    SamplerScratch *s = scratch_of(sp);
    size_t V = s->vocab_size;
    const int32_t *gen = history + sp->n_prompt;
    size_t n = n_history - sp->n_prompt;
    for (size_t i = 0; i < n; i++)
        if (gen[i] >= 0 && (size_t)gen[i] < V) s->count[gen[i]]++;
    for (size_t i = 0; i < n; i++) {
        int32_t id = gen[i];
        if (id < 0 || (size_t)id >= V || s->count[id] == 0) continue;
        logits[id] = (float)((double)logits[id] - ((double)s->count[id] * fp + pp));
        s->count[id] = 0;
    }
}

// The logits to draw from: the caller's with the repetition penalty in place
// when it is the only adjustment (as it always was), else a copy in the
// scratch with, in order, logit_bias, the repetition penalty and the
// presence/frequency penalties (sampler.h says why this order). The copy
// leaves the caller's row raw, which its log-probabilities need. Either way
// every path after this one (greedy, the approximate draws, the filters)
// reads the same adjusted logits: the fields cannot make them disagree.
static const float *adjust_logits(Sampler *sp, float *logits, const int32_t *history, size_t n_history) {
    const SamplerParams *P = &sp->params;
    if (sp->n_prompt == SAMPLER_PROMPT_UNSET) sp->n_prompt = n_history;
    if (P->n_bias == 0 && P->presence_penalty == 0.0f && P->frequency_penalty == 0.0f && !sp->mask) {
        apply_repeat_penalty(sp, logits, history, n_history);
        return logits;
    }
    SamplerScratch *s = scratch_of(sp);
    size_t V = s->vocab_size;
    float *l = s->adjusted;
    if (sp->mask) {  // the grammar first: -inf stays -inf through every later step
#if defined(__x86_64__)
        if (s->isa == CPU_AVX512) sampler_mask_logits_avx512(logits, sp->mask, V, l);
        else
#endif
            sampler_mask_logits(logits, sp->mask, V, l);
    } else {
        memcpy(l, logits, V * sizeof *l);
    }
    // the double sum rounded to float is the float sum (double holds more
    // than twice float's digits, so rounding twice is harmless): written in
    // double only to read as the reference's formula
    for (size_t i = 0; i < P->n_bias; i++) {
        int32_t id = P->bias[i].id;
        if (id >= 0 && (size_t)id < V) l[id] = (float)((double)l[id] + (double)P->bias[i].bias);
    }
    apply_repeat_penalty(sp, l, history, n_history);
    apply_presence_frequency(sp, l, history, n_history);
    return l;
}

static void heap_sift_down(float *h, size_t n, size_t i) {
    for (;;) {
        size_t m = i, a = 2 * i + 1, b = a + 1;
        if (a < n && h[a] < h[m]) m = a;
        if (b < n && h[b] < h[m]) m = b;
        if (m == i) return;
        float t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
}

// The largest of x[0..n) that is not NaN (-inf if none): a block of logits
// whose max fails a test fails it in every element, so a scan may skip it.
enum { SKIP_BLOCK = 64 };
static inline float block_max(const float *x, size_t n) {
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (size_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

// The k-th largest non-NaN logit (k < V), kept in a size-k min-heap whose
// root is the smallest of the k largest so far. -inf if fewer than k logits
// are non-NaN, so that everything usable is kept. Once the heap is full, a
// logit changes it only if it is above the root, and the root only rises:
// a block of logits none of which is above the root is skipped whole.
static float top_k_threshold(float *heap, const float *logits, size_t V,
                             size_t k) {
    size_t n = 0;
    for (size_t i = 0; i < V; i++) {
        if (n == k && i % SKIP_BLOCK == 0 && i + SKIP_BLOCK <= V &&
            !(block_max(logits + i, SKIP_BLOCK) > heap[0])) {
            i += SKIP_BLOCK - 1;
            continue;
        }
        float l = logits[i];
        if (isnan(l)) continue;
        if (n < k) {
            // sift up
            size_t j = n++;
            heap[j] = l;
            while (j > 0 && heap[(j - 1) / 2] > heap[j]) {
                float t = heap[j]; heap[j] = heap[(j - 1) / 2];
                heap[(j - 1) / 2] = t;
                j = (j - 1) / 2;
            }
        } else if (l > heap[0]) {
            heap[0] = l;
            heap_sift_down(heap, k, 0);
        }
    }
    return n < k ? -INFINITY : heap[0];
}

// The order top-p walks: descending probability, ties by ascending id. The
// scaled logit orders exactly like the probability and is finer (two logits
// far below the max can share a weight of 0 but not a logit).
static inline int cand_before(const SamplerCand *a, const SamplerCand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void cand_swap(SamplerCand *a, SamplerCand *b) {
    SamplerCand t = *a; *a = *b; *b = t;
}

// The nucleus of a[0..m) without sorting it: returns j >= 1 and permutes a so
// that a[0..j) are the kept tokens and a[j-1] is the last of them in
// cand_before order. acc is the weight of the tokens before all of a (kept
// already); a token is kept while the weight before it is < limit, and
// acc < limit on entry. Quickselect on that rule: partition around a pivot,
// and the weight of the part before the pivot says on which side the cut lies.
// Expected O(m); only the final short range is sorted.
static size_t nucleus(SamplerCand *a, size_t m, double acc, double limit) {
    size_t lo = 0, hi = m;  // kept: a[0..lo); the cut lies in [lo, hi]
    while (hi - lo > 16) {
        // Median of three into a[hi-1]: sorted or reversed input stays O(m).
        size_t mid = lo + (hi - lo) / 2, last = hi - 1;
        if (cand_before(&a[mid], &a[lo])) cand_swap(&a[mid], &a[lo]);
        if (cand_before(&a[last], &a[lo])) cand_swap(&a[last], &a[lo]);
        if (cand_before(&a[mid], &a[last])) cand_swap(&a[mid], &a[last]);
        const SamplerCand piv = a[last];
        size_t q = lo;
        double mass = 0.0;
        for (size_t i = lo; i < last; i++)
            if (cand_before(&a[i], &piv)) {
                mass += a[i].weight;
                cand_swap(&a[i], &a[q++]);
            }
        cand_swap(&a[q], &a[last]);
        if (acc + mass >= limit) {
            hi = q;  // the pivot already starts at or after the cut
        } else {
            acc += mass + a[q].weight;  // a[lo..q] all kept
            lo = q + 1;
        }
    }
    for (size_t i = lo + 1; i < hi; i++)  // insertion sort of <= 16
        for (size_t j = i; j > lo && cand_before(&a[j], &a[j - 1]); j--)
            cand_swap(&a[j], &a[j - 1]);
    size_t j = lo;
    while (j < hi && acc < limit) acc += a[j++].weight;
    return j;
}

// Histogram resolution for top-p: TOPP_PER_UNIT buckets per unit of scaled
// logit, TOPP_BUCKETS in all; everything below -TOPP_BUCKETS/TOPP_PER_UNIT
// (weight < e^-32) shares the last bucket.
#define TOPP_PER_UNIT 16.0
#define TOPP_BUCKETS 512

static inline size_t topp_bucket(double logit) {
    double x = -logit * TOPP_PER_UNIT;  // logit <= 0
    return x < TOPP_BUCKETS - 1 ? (size_t)x : TOPP_BUCKETS - 1;
}

// Keeps the nucleus of cand[0..n) in place (ascending id order survives);
// z is the sum of their weights. Returns the new count.
//
// A radix step, then quickselect. The bucket of a token is monotone in the
// top-p order (descending logit), so every token of a bucket comes before
// every token of the buckets below it. Let B be the first bucket where the
// cumulative weight reaches the limit: a token below B has at least all of
// buckets 0..B before it and is out; a token above B has less than the limit
// before it and is in. Only B's tokens need ordering, and nucleus() finds the
// cut among them without sorting. Two O(n) passes in all; the comparisons
// with the limit differ from a full sort's running sum only by the order of
// the additions (~1e-16 relative), far inside SAMPLER_TOP_P_EPS.
static size_t top_p_filter(Sampler *sp, size_t n, double z) {
    SamplerCand *cand = scratch_of(sp)->cand, *sel = scratch_of(sp)->sorted;
    double limit = ((double)sp->params.top_p - SAMPLER_TOP_P_EPS) * z;
    if (!(limit > 0)) {
        // HF keeps at least one token (min_tokens_to_keep = 1): the first.
        size_t best = 0;
        for (size_t i = 1; i < n; i++)
            if (cand_before(&cand[i], &cand[best])) best = i;
        cand[0] = cand[best];
        return 1;
    }
    double mass[TOPP_BUCKETS] = {0};
    for (size_t i = 0; i < n; i++) mass[topp_bucket(cand[i].logit)] += cand[i].weight;
    size_t B = 0;
    double acc = 0.0;  // weight of buckets 0..B-1, all kept
    while (B < TOPP_BUCKETS - 1 && acc + mass[B] < limit) acc += mass[B++];
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (topp_bucket(cand[i].logit) == B) sel[m++] = cand[i];
    // m >= 1: bucket 0 holds the argmax (logit 0), and B > 0 only when the
    // buckets before it fell short of the limit, so B holds weight.
    const SamplerCand last = sel[nucleus(sel, m, acc, limit) - 1];
    // The nucleus is every token at or before `last` in the order; filtering
    // by that key keeps cand in id order without a re-sort.
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!cand_before(&last, &cand[i])) cand[k++] = cand[i];
    return k;
}

// The first index of the largest logit and its value (NaN never counts; all
// NaN or -inf gives index 0 and -inf): what the loop
//     for (i = 0; i < V; i++) if (x[i] > max) { max = x[i]; imax = i; }
// gives, in two vectorized passes. The max is exact in any order (NaN never
// wins a comparison), the first element equal to it is the loop's (the
// strict > keeps the first of a tie; +0 and -0 compare equal, and the loop
// keeps whichever zero came first), and its value is the loop's max.
CPU_CLONES static size_t argmax(const float *x, size_t V, float *max) {
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (size_t i = 0; i < V; i++) m = x[i] > m ? x[i] : m;
    *max = m;
    if (m == -INFINITY) return 0;
    // the first block of 64 that holds it, then the place in the block
    enum { BLOCK = 64 };
    size_t b = 0;
    for (; b + BLOCK <= V; b += BLOCK) {
        int hit = 0;
#pragma omp simd reduction(| : hit)
        for (size_t i = b; i < b + BLOCK; i++) hit |= x[i] == m;
        if (hit) break;
    }
    size_t i = b;
    while (x[i] != m) i++;  // it is there: in this block, or in the tail
    *max = x[i];
    return i;
}

// The scaled logits sl[i] = (l[i] - lmax) / T, in double (exact: every
// float fits, and the difference of two floats this close is exact too).
CPU_CLONES static void scaled_logits(double *sl, const float *l, size_t V, float lmax, double T) {
    if (T == 1.0) {  // x / 1 is x: no division
#pragma omp simd
        for (size_t i = 0; i < V; i++) sl[i] = (double)l[i] - (double)lmax;
        return;
    }
#pragma omp simd
    for (size_t i = 0; i < V; i++) sl[i] = ((double)l[i] - (double)lmax) / T;
}

// Temperature sampling with no filter, exactly: what the candidate list and
// the inverse CDF below give, without the list. Each weight exp(sl) is the
// same double, added to the running sum in the same order; cum[i] holds the
// running sum after id i (ids of weight 0, NaN or -inf logits, add nothing
// and repeat the sum before them). The inverse CDF returns the first
// candidate whose running sum exceeds u * z: that is the first id with
// cum[i] > u * z (such an id raised the sum, so it is a candidate; every
// candidate before it had a sum <= the target), found by bisection. The
// last candidate catches a target at or past the final sum, as before.
static int32_t sample_plain_exact(Sampler *sp, const float *logits, float lmax, double u) {
    SamplerScratch *s = scratch_of(sp);
    size_t V = s->vocab_size;
    // (V) doubles in the top-p scratch, which this draw does not use
    double *cum = (double *)(void *)s->sorted;
    scaled_logits(cum, logits, V, lmax, (double)sp->params.temperature);
    double z = 0.0;
    size_t last = 0;
    for (size_t i = 0; i < V; i++) {
        double w = exp(cum[i]);  // NaN stays NaN, -inf gives 0: neither counts
        if (w > 0) {
            z += w;
            last = i;
        }
        cum[i] = z;
    }
    double target = u * z;
    size_t lo = 0, hi = V;  // the first i with cum[i] > target is in [lo, hi]
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (target < cum[mid]) hi = mid;
        else lo = mid + 1;
    }
    return (int32_t)(lo < V ? lo : last);
}

// ---------------------------------------------------------------------------
// The same draw, decided from approximate weights when they prove the answer
//
// sample_plain_exact spends nearly all its time in exp() (50257 calls for
// GPT-2). Its answer is the first id j with cum[j] > t = fl(u * z), and the
// sums are known closely without libm: a vector exp within 1e-12 of exp()
// (exp8 below) gives sums within a relative 1e-12 plus the rounding
// of the sums themselves (at most (n - 1) 2^-53 of the sum, however they
// are added, for n positive terms; libm's own sequential sums obey the same
// bound). So with E_k the exact sum of libm's weights of ids 0..k, A_k our
// approximation of it and e the total relative slack,
//     cum[k] in E_k [1 - g, 1 + g],   E_k in A_k [1 - e, 1 + e],
// and t = u z (1 + 2^-53 at most). If A's crossing j has A_{j-1}, widened by
// every error, still below t narrowed by every error, and A_j narrowed
// above t widened, then cum[j-1] <= t < cum[j]: j is the exact answer. When
// the target lies too close to a boundary to tell (a chance of about 2 e
// per candidate, some 1e-6 a draw for GPT-2), the exact draw runs. Same
// answer, same RNG use, in any case.

enum { APPROX_BLOCK = 256 };  // ids per partial sum

// The vector code of sampler_kernels.h: the approximate weights of
// l[0..n) (scaled: (l - lmax) * inv_t), their sum, and each in out if not
// NULL; of exact scaled logits sl[0..n), into out, and their sum.
typedef double (*ApproxWeightsFn)(const float *l, size_t n, double lmax, double inv_t, double *out);
typedef double (*ApproxSlFn)(const double *sl, size_t n, double *out);


// The vector code each ISA runs (sampler_kernels.h); NULL: none, and then
// every draw is exact.
static const struct {
    ApproxWeightsFn weights;
    ApproxSlFn sl;
} APPROX[CPU_ISA_COUNT] = {
#if defined(__x86_64__)
    [CPU_AVX2] = {sampler_approx_weights_avx2, sampler_approx_sl_avx2},
    [CPU_AVX512] = {sampler_approx_weights_avx512, sampler_approx_sl_avx512},
#endif
};

static int32_t sample_plain(Sampler *sp, const float *logits, float lmax, double u) {
    SamplerScratch *s = scratch_of(sp);
    ApproxWeightsFn weights = APPROX[s->isa].weights;
    size_t V = s->vocab_size;
    if (!weights || V > ((size_t)1 << 40)) return sample_plain_exact(sp, logits, lmax, u);
    double inv_t = 1.0 / (double)sp->params.temperature, dmax = lmax;
    // (blocks) partial sums, then one block's weights, in the top-p scratch
    size_t blocks = (V + APPROX_BLOCK - 1) / APPROX_BLOCK;
    double *part = (double *)(void *)s->sorted, *w = part + blocks;
    double A = 0.0;
    for (size_t b = 0; b < blocks; b++) {
        size_t i0 = b * APPROX_BLOCK, n = V - i0 < APPROX_BLOCK ? V - i0 : APPROX_BLOCK;
        A += part[b] = weights(logits + i0, n, dmax, inv_t, NULL);
    }
    // The slack: 1e-12 for the weights, (V + blocks + 2) 2^-53 for any of
    // the sums (ours, libm's sequential ones, the rounding of u z), both
    // doubled, then twice that as a factor; and the weights below the floor
    // (at most V x 4e-308 in all), added.
    double e = 2 * (1e-12 + (double)(V + blocks + 2) * 0x1p-53), F = 1 + 2 * e, eta = (double)V * 4e-308;
    double t = u * A;
    double before = 0.0;  // A of the ids before block b
    size_t b = 0;
    while (b < blocks && !(t < before + part[b])) before += part[b++];
    if (b == blocks) return sample_plain_exact(sp, logits, lmax, u);
    size_t i0 = b * APPROX_BLOCK, n = V - i0 < APPROX_BLOCK ? V - i0 : APPROX_BLOCK;
    weights(logits + i0, n, dmax, inv_t, w);
    double run = before;
    for (size_t i = 0; i < n; i++) {
        double next = run + w[i];
        if (t < next) {
            // cum[j-1] <= t and t < cum[j], each with every error against it
            double t_lo = u * (A / (F * F) - eta), t_hi = u * (A + eta) * (F * F);
            if ((run + eta) * F <= t_lo && t_hi < next / F - eta) return (int32_t)(i0 + i);
            break;
        }
        run = next;
    }
    return sample_plain_exact(sp, logits, lmax, u);
}

// Top-p (with no top-k) decided from approximate weights when they prove the
// nucleus, the way sample_plain decides a draw. The exact filter keeps the
// tokens, in the top-p order, while a float sum of the weights before each
// is below limit = (p - eps) z; every such sum is a sum of exp()'s weights
// of the tokens before that rank (in some order: buckets, partitions), so
// it is within (n + 600) 2^-53 of the exact sum M_r, and limit within as
// much of (p - eps) Z (Z the exact total). The same filter on approximate
// weights keeps some c tokens; if M_{c-1} (the mass before the last kept)
// is below the limit and M_c (the mass of all c) above it, each by more
// than every error, the exact filter keeps the same c tokens (M_r rises
// with r, so no rank between decides otherwise). Then only those tokens
// need exp(): their weights are recomputed from the same scaled logits, and
// min-p and the draw see exactly what they always did. Returns the count
// kept (in cand, ascending id, exp()'s weights), or 0 when the approximate
// weights cannot tell (then the exact filter runs).
static size_t top_p_certified(Sampler *sp, const float *logits, float lmax) {
    SamplerScratch *s = scratch_of(sp);
    size_t V = s->vocab_size;
    ApproxSlFn weights = APPROX[s->isa].sl;
    double p_eps = (double)sp->params.top_p - SAMPLER_TOP_P_EPS;
    if (!weights || !(p_eps > 0) || V > ((size_t)1 << 40)) return 0;
    // (2V) doubles of the top-p scratch: scaled logits, then weights (the
    // filter reuses the scratch once they are in the candidates)
    double *sl = (double *)(void *)s->sorted, *a = sl + V;
    scaled_logits(sl, logits, V, lmax, (double)sp->params.temperature);
    double A = weights(sl, V, a);
    // Only the tokens whose scaled logit is at least s_min go to the filter:
    // the tokens below it weigh less than (1 - p) A / (2 V) each, less than
    // half the mass the nucleus leaves out all together, so the cut lies
    // above them. (Where it does not, all go.) Any such set is the start of
    // the top-p order, and so is what the filter keeps of it: the
    // certificate below needs nothing else.
    double s_min = log((1.0 - p_eps) * A / (2.0 * (double)V));
    size_t n = 0;
    double kept_mass = 0.0;
    for (int all = 0; all < 2; all++) {
        n = 0;
        kept_mass = 0.0;
        double lo = all ? -INFINITY : s_min;
        for (size_t i = 0; i < V; i++) {  // without branches: which pass is a coin toss
            size_t in = (size_t)(a[i] > 0) & (size_t)(sl[i] >= lo);  // NaN fails both
            s->cand[n] = (SamplerCand){.logit = sl[i], .weight = a[i], .id = (int32_t)i};
            n += in;
            kept_mass += a[i] * (double)in;
        }
        // the filter needs the candidates' mass to pass the limit
        if (all || kept_mass > 1.001 * p_eps * A) break;
    }
    size_t k = n > 1 ? top_p_filter(sp, n, A) : n;
    size_t last = 0;  // the kept token latest in the order
    for (size_t j = 1; j < k; j++)
        if (cand_before(&s->cand[last], &s->cand[j])) last = j;
    double mass = 0.0, before = 0.0;
    for (size_t j = 0; j < k; j++) {
        mass += s->cand[j].weight;
        if (j != last) before += s->cand[j].weight;
    }
    // slack as in sample_plain, for sums of up to 2V + 600 terms
    double e = 2 * (1e-12 + (double)(2 * V + 602) * 0x1p-53), F = 1 + 2 * e, eta = (double)V * 4e-308;
    double L = p_eps * A;
    if (!((before + eta) * F * F + eta < L / (F * F) && mass / (F * F) - eta > (L + eta) * F * F)) return 0;
    for (size_t j = 0; j < k; j++) s->cand[j].weight = exp(s->cand[j].logit);
    return k;
}

// sampler_distribution after the penalty and the max.
static size_t distribution(Sampler *sp, const float *logits, float lmax, size_t imax,
                           const SamplerCand **out, double *total) {
    SamplerScratch *s = scratch_of(sp);
    size_t V = s->vocab_size;
    const SamplerParams *P = &sp->params;
    *out = s->cand;
    *total = 0.0;
    // All NaN/-inf leaves nothing to choose; a +inf makes every finite
    // weight zero and inf - inf NaN. Both mean the forward pass went wrong.
    if (!isfinite(lmax)) return 0;

    if (P->temperature == 0.0f) {
        // The lowest id of a tie won (torch.argmax too).
        s->cand[0] = (SamplerCand){.logit = 0.0, .weight = 1.0,
                                   .id = (int32_t)imax};
        *total = 1.0;
        return 1;
    }

    float thr = -INFINITY;
    if (P->top_k > 0 && (size_t)P->top_k < V)
        thr = top_k_threshold(s->heap, logits, V, (size_t)P->top_k);

    // Scaled logits relative to the max are <= 0, so exp never overflows and
    // a tiny T only underflows to weight 0; computing in double keeps l/T from
    // overflowing float when T is tiny.
    double T = P->temperature;
    size_t n = 0;
    double z = 0.0;
    if (P->top_p < 1.0f && thr == -INFINITY && (n = top_p_certified(sp, logits, lmax)) > 0) goto min_p;
    for (size_t i = 0; i < V; i++) {
        // a block below top-k (or NaN) gives no candidate
        if (i % SKIP_BLOCK == 0 && i + SKIP_BLOCK <= V && !(block_max(logits + i, SKIP_BLOCK) >= thr)) {
            i += SKIP_BLOCK - 1;
            continue;
        }
        float l = logits[i];
        if (!(l >= thr)) continue;  // below top-k, or NaN
        double sl = ((double)l - (double)lmax) / T;
        double w = exp(sl);
        if (!(w > 0)) continue;     // -inf logits, or underflow: probability 0
        s->cand[n++] = (SamplerCand){.logit = sl, .weight = w, .id = (int32_t)i};
        z += w;
    }
    // The argmax has weight exp(0) = 1, so n >= 1 here.

    if (P->top_p < 1.0f && n > 1) n = top_p_filter(sp, n, z);

min_p:
    if (P->min_p > 0.0f) {
        // HF compares probabilities with min_p * max probability; the common
        // normalizer cancels, and the max weight is the argmax's exp(0) = 1,
        // which every earlier filter keeps.
        double wmin = (double)P->min_p;
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!(s->cand[i].weight < wmin)) s->cand[k++] = s->cand[i];
        n = k;
    }

    z = 0.0;
    for (size_t i = 0; i < n; i++) z += s->cand[i].weight;
    *total = z;
    return n;
}

size_t sampler_distribution(Sampler *sp, float *logits_in, const int32_t *history,
                            size_t n_history, const SamplerCand **out,
                            double *total) {
    const float *logits = adjust_logits(sp, logits_in, history, n_history);
    float lmax;
    size_t imax = argmax(logits, scratch_of(sp)->vocab_size, &lmax);
    return distribution(sp, logits, lmax, imax, out, total);
}

int32_t sampler_sample_u(Sampler *s, float *logits_in, const int32_t *history,
                         size_t n_history, double u) {
    const SamplerParams *P = &s->params;
    const float *logits = adjust_logits(s, logits_in, history, n_history);
    float lmax;
    size_t imax = argmax(logits, scratch_of(s)->vocab_size, &lmax);
    if (!isfinite(lmax)) return -1;
    if (P->temperature == 0.0f) return (int32_t)imax;
    size_t V = scratch_of(s)->vocab_size;
    if ((P->top_k == 0 || (size_t)P->top_k >= V) && !(P->top_p < 1.0f) && !(P->min_p > 0.0f))
        return sample_plain(s, logits, lmax, u);
    const SamplerCand *c;
    double z;
    size_t n = distribution(s, logits, lmax, imax, &c, &z);
    if (n == 0) return -1;
    // Inverse CDF in id order. The last token catches a target that rounding
    // pushed to or past the final cumulative sum.
    double target = u * z, cum = 0.0;
    for (size_t i = 0; i < n; i++) {
        cum += c[i].weight;
        if (target < cum) return c[i].id;
    }
    return c[n - 1].id;
}

int32_t sampler_sample(Sampler *s, float *logits, const int32_t *history,
                       size_t n_history) {
    double u = s->params.temperature > 0.0f ? sampler_rng_uniform(&s->rng) : 0.0;
    return sampler_sample_u(s, logits, history, n_history, u);
}
