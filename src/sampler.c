/*
 * sampler.c - logits -> next token id, following Hugging Face's order of
 * logits processing (see sampler.h for the exact semantics of each filter).
 *
 * What it does: the repetition penalty in place on the logits, then one pass
 * that turns the surviving logits into unnormalized weights exp((l - max)/T)
 * in double, then the filters on that candidate list, then one draw.
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
    s->cand = malloc(vocab_size * sizeof *s->cand);
    s->sorted = malloc(vocab_size * sizeof *s->sorted);
    s->heap = malloc(vocab_size * sizeof *s->heap);
    s->seen = calloc(vocab_size, sizeof *s->seen);
    if (!s->cand || !s->sorted || !s->heap || !s->seen) {
        sampler_scratch_free(s);
        return gpt_error(err, "sampler: out of memory for a vocabulary of %zu",
                         vocab_size);
    }
    return 0;
}

void sampler_scratch_free(SamplerScratch *s) {
    if (!s) return;
    free(s->cand);
    free(s->sorted);
    free(s->heap);
    free(s->seen);
    memset(s, 0, sizeof *s);
}

int sampler_init_shared(Sampler *s, const SamplerParams *p, SamplerScratch *scratch,
                        GptError *err) {
    memset(s, 0, sizeof *s);
    if (sampler_params_validate(p, err) != 0) return -1;
    s->params = *p;
    s->shared = scratch;
    sampler_rng_seed(&s->rng, p->seed);
    return 0;
}

int sampler_init(Sampler *s, const SamplerParams *p, size_t vocab_size,
                 GptError *err) {
    memset(s, 0, sizeof *s);
    if (sampler_params_validate(p, err) != 0) return -1;
    if (sampler_scratch_init(&s->own, vocab_size, err) != 0) return -1;
    s->params = *p;
    sampler_rng_seed(&s->rng, p->seed);
    return 0;
}

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

// The k-th largest non-NaN logit (k < V), kept in a size-k min-heap whose
// root is the smallest of the k largest so far. -inf if fewer than k logits
// are non-NaN, so that everything usable is kept.
static float top_k_threshold(float *heap, const float *logits, size_t V,
                             size_t k) {
    size_t n = 0;
    for (size_t i = 0; i < V; i++) {
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

size_t sampler_distribution(Sampler *sp, float *logits, const int32_t *history,
                            size_t n_history, const SamplerCand **out,
                            double *total) {
    SamplerScratch *s = scratch_of(sp);
    size_t V = s->vocab_size;
    const SamplerParams *P = &sp->params;
    *out = s->cand;
    *total = 0.0;
    apply_repeat_penalty(sp, logits, history, n_history);

    float lmax = -INFINITY;
    size_t imax = 0;
    for (size_t i = 0; i < V; i++)
        if (logits[i] > lmax) { lmax = logits[i]; imax = i; }  // NaN never >
    // All NaN/-inf leaves nothing to choose; a +inf makes every finite
    // weight zero and inf - inf NaN. Both mean the forward pass went wrong.
    if (!isfinite(lmax)) return 0;

    if (P->temperature == 0.0f) {
        // Strict > above, so the lowest id of a tie won (torch.argmax too).
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
    for (size_t i = 0; i < V; i++) {
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

int32_t sampler_sample_u(Sampler *s, float *logits, const int32_t *history,
                         size_t n_history, double u) {
    const SamplerCand *c;
    double z;
    size_t n = sampler_distribution(s, logits, history, n_history, &c, &z);
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
