/*
 * matmul.c - see matmul.h; the kernels are in matmul_{scalar,avx2,avx512}.c
 * (matmul_kernels.h).
 *
 * Napkin math for the bound: a product reads every element of W once; with
 * one row of inp (decode) that is all the work there is, so its speed limit
 * is memory bandwidth / bytes of W. With T rows (prefill) each element of W
 * does T multiply-adds, and the cores' FMA rate is the limit, as long as W
 * is not read from memory too often: matmul() reads it once per group of
 * MATMUL_GROUP rows.
 *
 * MATMUL_GROUP = 32: past 16 rows the kernels run near the cores' FMA
 * rate (16 lanes x FMA pipes x clock), and a group of 32 reads each weight
 * once per 32 FMAs: at one 16-lane FMA a cycle, 2 bytes of float32
 * weights a cycle (6 GB/s at 3 GHz), which a core's share of memory
 * bandwidth sustains even for matrices far beyond the caches. Larger
 * groups help little, and hurt at large K: a group's packed activations
 * (rows x K x 4 bytes, 1.6 MiB at 64 x 6400) then spill out of L2 (the
 * measurements: docs/performance.md).
 *
 * Threads: with several groups, a part is a group (or a slice of one)
 * that whichever thread is free takes (threadpool_run_parts): the work of
 * a prefill is then shared out as it goes, and a thread the machine holds
 * up for a while (another process on its core) costs the run only that
 * while, not the whole of its fixed share. Memory sees W once per group
 * either way.
 */
#include "kernels/matmul.h"

#include <stdint.h>
#include <string.h>

#include "kernels/matmul_kernels.h"

// ----------------------------------------------------------------------------
// which kernels

const char *matmul_isa_in_use(void) { return cpu_isa_name(cpu_best_isa()); }

// Enough for the AVX-512 kernels' packed activations (B x K rounded up to
// 16 floats), for Q8's int16 activations and their scales (2 + 4/32 bytes
// per input, K rounded up to 32) and for Q4's groups (Q4XGroup: 256 bytes
// per 128 inputs, K rounded up to 128): 4 bytes per input, K rounded to 32,
// and at least a group of 64 floats per row.
size_t matmul_scratch_floats(size_t B, size_t K) {
    size_t q8 = q8_row_quants(K), q4 = q4_groups(K) * (sizeof(Q4XGroup) / sizeof(float));
    size_t packed = matmul_avx2_packed_floats(B, K);  // AVX2's packed variant
    size_t most = B * (q8 > q4 ? q8 : q4);
    return (packed > most ? packed : most + 15) / 16 * 16;
}

// AVX2's kernels and names, one per variant (matmul_kernels.h)
typedef void (*RowsFn)(float *, const float *, const Weight *, const float *, size_t, size_t, size_t, int, float *);
#if defined(__x86_64__)
#define AVX2_FN(R, C, H) MATMUL_AVX2_FN(R, C, H),
static const RowsFn avx2_variants[MATMUL_AVX2_VARIANT_COUNT] = {MATMUL_AVX2_VARIANTS(AVX2_FN)};
#endif
#define AVX2_NAME(R, C, H) #R "x" #C #H,
static const char *const avx2_names[MATMUL_AVX2_VARIANT_COUNT] = {MATMUL_AVX2_VARIANTS(AVX2_NAME)};
#if defined(__x86_64__)
#define AVX512_FN(R, C, KB, S) MATMUL_AVX512_FN(R, C, S),
static const RowsFn avx512_variants[MATMUL_AVX512_VARIANT_COUNT] = {MATMUL_AVX512_VARIANTS(AVX512_FN)};
#endif
#define AVX512_NAME(R, C, KB, S) #R "x" #C #S,
static const char *const avx512_names[MATMUL_AVX512_VARIANT_COUNT] = {MATMUL_AVX512_VARIANTS(AVX512_NAME)};

int matmul_variant_count(CpuIsa isa) {
    return isa == CPU_AVX2 ? MATMUL_AVX2_VARIANT_COUNT : isa == CPU_AVX512 ? MATMUL_AVX512_VARIANT_COUNT : 1;
}

const char *matmul_variant_name(CpuIsa isa, int v) {
    if (v < 0 || v >= matmul_variant_count(isa)) return NULL;
    return isa == CPU_AVX2 ? avx2_names[v] : isa == CPU_AVX512 ? avx512_names[v] : "one";
}

int matmul_variant_find(CpuIsa isa, const char *name) {
    for (int v = 0; v < matmul_variant_count(isa); v++)
        if (strcmp(matmul_variant_name(isa, v), name) == 0) return v;
    return -1;
}

int matmul_variant_applies(CpuIsa isa, int v, DType dt) {
    const char *name = matmul_variant_name(isa, v);
    char kind = name ? name[strlen(name) - 1] : 0;
    if (!name) return 0;
    if (isa == CPU_AVX512) return v == 0 || !dtype_is_grouped(dt);
    return v == 0 || !dtype_is_blocked(dt) || (kind != 'h' && kind != 'p');
}

int matmul_plan_variant(const MatmulPlan *plan, CpuIsa isa, const Weight *W) {
    if (!plan || plan->isa != isa) return 0;
    for (int i = 0; i < plan->n && i < MATMUL_PLAN_MAX; i++) {
        const MatmulChoice *c = &plan->choice[i];
        if (c->dtype == W->dtype && c->K == W->n_in && c->N == W->n_out) return c->variant;
    }
    return plan->fallback;
}

void matmul_rows_route(CpuIsa isa, int vnni, int variant, float *out, const float *inp, const Weight *W,
                       const float *bias, size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    // Q8's and Q4's vector kernels quantize the activations into scratch;
    // without it, only the scalar kernel can (block by block, again for
    // every output).
    if (dtype_is_blocked(W->dtype) && !scratch) isa = CPU_SCALAR;
    if (variant < 0 || variant >= matmul_variant_count(isa)) variant = 0;
#if defined(__x86_64__)
    if (W->dtype == DTYPE_Q8 && W->q8_int8) {  // Q8 x int8: one kernel per ISA, no variants
        if (isa == CPU_AVX512) matmul_rows_avx512_q8_int8(vnni, out, inp, W, bias, B, n0, n1, accumulate, scratch);
        else if (isa == CPU_AVX2) matmul_rows_avx2_q8_int8(out, inp, W, bias, B, n0, n1, accumulate, scratch);
        else matmul_rows_scalar(out, inp, W, bias, B, n0, n1, accumulate, scratch);
        return;
    }
    switch (isa) {
    case CPU_AVX512:
        if (vnni) matmul_rows_avx512_vnni(out, inp, W, bias, B, n0, n1, accumulate, scratch);
        else avx512_variants[variant](out, inp, W, bias, B, n0, n1, accumulate, scratch);
        return;
    case CPU_AVX2:
        avx2_variants[variant](out, inp, W, bias, B, n0, n1, accumulate, scratch);
        return;
    case CPU_SCALAR: break;
    }
#endif
    (void)isa, (void)vnni, (void)variant;  // off x86-64, only the scalar kernel
    matmul_rows_scalar(out, inp, W, bias, B, n0, n1, accumulate, scratch);
}

// The default variant (0) unless told (matmul() passes its plan's).
static void rows_variant(CpuIsa isa, int variant, float *out, const float *inp, const Weight *W, const float *bias,
                         size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    // VNNI serves Q4, Q6 and Q8 x int8 only; asking costs a few loads (cpu.h)
    const int vnni = isa == CPU_AVX512 && weight_is_grouped(W) && cpu_has_avx512_vnni();
    matmul_rows_route(isa, vnni, variant, out, inp, W, bias, B, n0, n1, accumulate, scratch);
}

void matmul_rows(CpuIsa isa, float *out, const float *inp, const Weight *W, const float *bias,
                 size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    rows_variant(isa, 0, out, inp, W, bias, B, n0, n1, accumulate, scratch);
}

// ----------------------------------------------------------------------------
// matmul

typedef struct {
    Product p;
    CpuIsa isa;
    int variant;           // of isa's kernels, for groups of MATMUL_PLAN_MIN_ROWS rows or more
    float *scratch;        // NULL, or thread i's at scratch + i * scratch_stride
    size_t scratch_stride;
    size_t n_slices;       // each group of rows of inp cut into this many slices of W's rows
    void (*then)(float *x, size_t n);  // NULL, or run on each part's outputs
} MatmulJob;

// Part p: group p / n_slices of MATMUL_GROUP rows of inp (the last may be
// shorter) over slice p % n_slices of W's rows (multiples of 16). Each
// output is computed by one kernel call whose result does not depend on
// the slice, the group or the other rows in it (matmul_kernels.h), so
// neither do the bits, whichever thread runs which part.
static void matmul_part(void *arg, int part, int n_parts, int thread) {
    (void)n_parts;
    const MatmulJob *j = arg;
    const Product *p = &j->p;
    size_t K = p->W->n_in, N = p->W->n_out, n0, n1;
    size_t t0 = (size_t)part / j->n_slices * MATMUL_GROUP;
    thread_range(N, 16, (int)((size_t)part % j->n_slices), (int)j->n_slices, &n0, &n1);
    if (n0 >= n1) return;
    size_t B = p->T - t0 < MATMUL_GROUP ? p->T - t0 : MATMUL_GROUP;
    float *scratch = j->scratch ? j->scratch + (size_t)thread * j->scratch_stride : NULL;
    const int variant = B >= MATMUL_PLAN_MIN_ROWS ? j->variant : 0;
    rows_variant(j->isa, variant, p->out + t0 * N, p->inp + t0 * K, p->W, p->bias, B, n0, n1, p->accumulate, scratch);
    if (j->then)  // while the part's outputs are in cache
        for (size_t b = 0; b < B; b++) j->then(p->out + (t0 + b) * N + n0, n1 - n0);
}

// How the work is cut. One group of rows (decode, small batches): a slice
// of W per thread, the split that streams W best when memory is the limit.
// Several groups (compute is the limit): parts that the threads take as
// they come free, at least 4 per thread, so that a thread the machine holds
// up (a noisy neighbour, an interrupt) hands its share to the others
// instead of keeping them waiting: whole groups when there are enough of
// them (each thread packs only its groups' activations, each once), else
// each group in slices (packed once per slice). One group stays one slice
// per thread: finer slices of it help a busy machine about as much as they
// cost a quiet one (docs/performance.md).
static size_t slices_per_group(size_t n_groups, int n_threads) {
    if (n_threads <= 1) return 1;
    if (n_groups <= 1) return (size_t)n_threads;
    size_t want = 4 * (size_t)n_threads;
    return n_groups >= want ? 1 : (want + n_groups - 1) / n_groups;
}

void matmul_then(float *out, const float *inp, const Weight *W, const float *bias, size_t T, int accumulate,
                 const MatmulContext *ctx, void (*then)(float *x, size_t n)) {
    if (T == 0 || W->n_out == 0) return;
    ThreadPool *pool = ctx ? ctx->pool : NULL;
    size_t n_groups = (T + MATMUL_GROUP - 1) / MATMUL_GROUP;
    const CpuIsa isa = ctx ? ctx->isa : cpu_best_isa();
    MatmulJob job = {{out, inp, W, bias, T, accumulate}, isa, matmul_plan_variant(ctx ? ctx->plan : NULL, isa, W),
                     NULL, 0, slices_per_group(n_groups, threadpool_size(pool)), then};
    // Scratch only if every thread's slice is big enough and 64-byte aligned.
    size_t need = matmul_scratch_floats(T < MATMUL_GROUP ? T : MATMUL_GROUP, W->n_in);
    if (ctx && ctx->scratch && ctx->scratch_floats_per_thread >= need &&
        ctx->scratch_floats_per_thread % 16 == 0 && (uintptr_t)ctx->scratch % 64 == 0) {
        job.scratch = ctx->scratch;
        job.scratch_stride = ctx->scratch_floats_per_thread;
    }
    threadpool_run_parts(pool, matmul_part, &job, (int)(n_groups * job.n_slices));
}

void matmul(float *out, const float *inp, const Weight *W, const float *bias, size_t T, int accumulate,
            const MatmulContext *ctx) {
    matmul_then(out, inp, W, bias, T, accumulate, ctx, NULL);
}

// ----------------------------------------------------------------------------
// reference

void matmul_reference(float *out, const float *inp, const Weight *W, const float *bias,
                      size_t T, int accumulate) {
    size_t K = W->n_in, N = W->n_out;
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < N; j++) {
            double sum = bias ? bias[j] : 0.0;
            for (size_t i = 0; i < K; i++) sum += (double)inp[t * K + i] * weight_at(W, i, j);
            out[t * N + j] = (float)(accumulate ? out[t * N + j] + sum : sum);
        }
}
