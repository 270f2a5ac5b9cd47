/*
 * matmul_avx512.c - AVX-512 (F/BW/VL/DQ) + F16C + FMA kernels
 * (matmul_kernels.h). Every function carries cpu.h's TARGET_AVX512, so the
 * file builds with plain -O2 for baseline x86-64 (and to nothing
 * elsewhere); matmul.c calls in here only where the CPU supports it.
 *
 * Arithmetic per output element = the canonical one: one zmm accumulator
 * per (b, n), vfmadd over k in steps of 16 (K tail: zero-masked lanes), the
 * fixed reduction tree, then + bias, then + old out. Q8: per block of 32,
 * vpmaddwd of the sign-extended weights and the int16 activations (16
 * exact pair sums), converted, one vfmadd with the block's dw * dx. Q4: per
 * group of 4 blocks (one 64-byte load of a row), the low nibbles (AND) and
 * the high ones (shift, AND) times the int8 activations, 8 products per
 * int32 lane: vpdpbusd twice with VNNI (matmul_rows_avx512_vnni), else
 * vpmaddubsw twice + vpmaddwd, from the nibble offset's correction
 * (-8 sum xq, made with the activations); converted, one vfmadd with the
 * lanes' dw * dx (the Q4 section). Q6: the same, the group's 64 bytes of
 * low 4 bits joined by their top 2 bits from its next 32 (unpack_q6), the
 * offset -32 sum xq.
 *
 * Speed (the rules; the measurements behind them: docs/performance.md;
 * none of this changes a result). Decode (B = 1) is bound by reading the
 * weights once: bytes of W / memory bandwidth per token; from B = 8 rows
 * the FMA pipes are the bound (16 lanes x pipes x clock multiply-adds).
 *
 * NAPKIN BOUND of a compute-bound tile, per core type. P 512-bit FMA
 * pipes of latency L (cycles) need P x L independent accumulator chains
 * to stay busy: Zen 4 (a zmm FMA takes both 256-bit pipes: P = 1, L = 4)
 * 4; Zen 5 (two full 512-bit pipes) and Xeons with two (ports 0 and 5) 2 x
 * 4 = 8. An R x C tile has R C chains (the canonical arithmetic allows no
 * more: one chain per output, so unrolling k adds none, it only saves
 * loop overhead), 16 to 24 here: every tile meets it. Each k step loads R
 * weight and C activation vectors and prefetches R lines for R C FMAs:
 * (R + C) / 2 cycles on the two 512-bit load pipes these cores have,
 * against R C / P cycles of FMAs (4x4: 4 against 8 at P = 2; 6x4 and 4x6:
 * 5 against 12; 8x3: 5.5 against 12), so the loads fit too, and the
 * front end (8 wide on Zen 5, about 50 instructions a step) as well. What
 * binds at P = 2 is where the vectors come from: the activations stream
 * from L2 at C x 64 bytes per R C FMAs, 128 / R bytes a cycle at P = 2
 * (R = 4: 32, half of what L2 gives L1; R = 6: 21), and the weight rows
 * come from L1 only while a tile's R rows fit beside that stream: hence
 * the k-blocks (below), whose size is a variant's (12 KiB; "w" 24 KiB;
 * "f" none). Then the end of each output: the reduction tree is 4 adds
 * and 4 shuffles per output one at a time, against K / 16 FMAs (48 at K =
 * 768: 24 cycles at P = 2), so the tiles of R C a multiple of 8 reduce 16
 * (or 8) outputs side by side (tree16: 45 instructions per 16 outputs).
 * Not used: an FMA with a memory operand ({1to16} broadcast of one
 * activation) is the outer-product form, which sums each output over k in
 * another order than the canonical lanes (other bits than the reference);
 * and no vector of a tile feeds a single FMA, which a memory operand would
 * save a load for. The static schedule: tests/bench/mca.sh (llvm-mca).
 *  - A tile is R weight rows x C batch rows (R C zmm accumulators). Every
 *    weight vector is loaded and widened once per tile and feeds C FMAs.
 *  - The hardware prefetchers lose much bandwidth as soon as the inner loop
 *    walks several address streams at once, even streams that hit L1
 *    (R adjacent W rows at B = 1 are such streams). Hence: (a) for B > 1
 *    the activations are first repacked into one linear stream
 *    (xp[k/16][c][16] per batch chunk, zero-padded, in the caller's
 *    scratch); (b) for small B the R rows of a tile are taken from R
 *    far-apart parts of [n0, n1) ("split" tiles: R independent linear
 *    streams); (c) for B >= 8 (compute-bound) tiles of R adjacent rows, and
 *    a software prefetch walks the *next* tile linearly (prefetcht1, into
 *    L2, not T0; at least 16 KiB ahead).
 *  - For B > C the same R weight rows are re-read for the next C batch
 *    rows; they are then in L1/L2, so memory sees W once per call. Where
 *    R rows exceed 12 KiB (the default; a variant's own size, see the
 *    napkin bound) the compute-bound tiles run
 *    in k-blocks (rows_kblocked), so that the rows stay in L1 and only the
 *    activations stream from L2. A k-block costs the accumulators' store
 *    and reload per batch chunk and cuts the activations' stream into
 *    pieces, so on two pipes blocks of 12 KiB lose where the rows (6 x
 *    768 floats: 18 KiB) would fit L1 whole. Napkin: a 4 x 4 tile loads 4 activation
 *    vectors per 16 FMAs, 16 bytes per FMA; at two 512-bit FMAs a cycle
 *    that is 32 of L2's 64 bytes a cycle, and with the weights from L2 as
 *    well (mlp.c_proj, K = 3072, 48 KiB of rows) all 64. At one FMA a
 *    cycle L2 keeps up either way, and the k-blocks neither help nor hurt.
 *  - Q8: the activations are quantized once per call into scratch, in the
 *    tiles' order; the scale products dw * dx of the next 16 blocks are
 *    made once per tile (one vector multiply per weight row and batch row),
 *    so that each block costs a broadcast load. Q8 takes the tile shapes
 *    of the other dtypes: split rows at B = 1 (R streams, as for F32),
 *    4 x 4 from B = 4 (no other shape tried did better).
 *  - B = 1 (decode), F32 and Q8: 4 split rows, each prefetched 1 KiB ahead
 *    by hand. Q8 is near its compute limit there (widen, vpmaddwd, convert
 *    and FMA per 32 bytes of weights, about as fast as one core streams
 *    them), so the loads come in bursts the hardware prefetchers follow
 *    late. F16 and BF16 keep 2 split rows without a prefetch (4 rows did
 *    worse, with the prefetch or without).
 *  - 2 <= B < 4 (a few sequences decoding together, speculation's short
 *    verify steps): still bound by reading W once, so the same 4 split
 *    rows, prefetched by hand too, 1 KiB ahead for F32 and Q8, 2 KiB for
 *    F16 and BF16 (F32 at 2 KiB loses at B = 2).
 *  - gcc -O2 does not fully unroll small loops over __m512 arrays by itself
 *    (stack spills): each such loop carries #pragma GCC unroll.
 */
#include "kernels/matmul_kernels.h"

#if defined(__x86_64__)

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cpu.h"

#define AI INLINE_AVX512

// Tile shapes (R weight rows x up to C batch rows) by batch size:
enum {
    R_1 = 2,                  // B == 1: 2 split rows (F16, BF16)
    R_1Q = 4, PFS_1Q = 1024,  //   F32 and Q8: 4 split rows, each prefetched this far ahead
    R_M = 4, C_M = 3,         // 2 <= B < 4: 4 split rows x 3, each row prefetched
    PFS_M = 1024, PFS_MH = 2048,  //   this far ahead (F32, Q8; F16 and BF16)
    R_4F = 3, C_4F = 4,       // F32, 4 <= B < 8: 3 split rows x 4, per-row prefetch
    PFS_4F = 4096,            //   that many bytes ahead
    R_2 = 4, C_2 = 4,         // otherwise: 4 adjacent rows x 4 (compute-bound; the
                              //   variants, matmul_kernels.h, take other shapes here)
    PF_DIST = 16384,          // adjacent-row tiles: prefetch the next tile this far ahead
    RMAX = 8, CMAX = 6,       // the largest R and C of any tile
    ACC_MAX = 24,             // the most accumulators of any tile (of 32 zmm; the rest
                              //   hold the vectors a step loads)
};
#define PF_HINT _MM_HINT_T1   // into L2, not L1 (T0 runs slower)

// 16 weights of one row from element k as exact float32 (F32, F16, BF16).
AI __m512 load_w(DType dt, const char *row, size_t k) {
    switch (dt) {
    case DTYPE_F32: return _mm512_loadu_ps((const float *)(const void *)row + k);
    case DTYPE_F16:
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)(const void *)row + k)));
    case DTYPE_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)(const void *)row + k))),
            16));
    case DTYPE_Q8:
    case DTYPE_Q4:
    case DTYPE_Q6: break;  // tile_blocked, tile_q4
    }
    return _mm512_setzero_ps();
}

// The same for the K tail: lanes not in m are +0.0f and are not read.
AI __m512 load_w_tail(DType dt, const char *row, size_t k, __mmask16 m) {
    switch (dt) {
    case DTYPE_F32: return _mm512_maskz_loadu_ps(m, (const float *)(const void *)row + k);
    case DTYPE_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)(const void *)row + k));
    case DTYPE_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)(const void *)row + k)), 16));
    case DTYPE_Q8:
    case DTYPE_Q4:
    case DTYPE_Q6: break;
    }
    return _mm512_setzero_ps();
}

AI __mmask16 tail_mask(size_t left) {  // lanes [0, min(left, 16))
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

// The canonical tree: lane i + lane i+8, then 8 -> 4 -> 2 -> 1.
AI float hsum(__m512 a) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

// The end of every output of a tile (weight rows n, n + rs, ... x batch
// rows b0 ..): the canonical tree, + bias, + the old value.
AI void finish_tile(int R, int C, __m512 acc[RMAX][CMAX], size_t n, size_t rs, size_t b0, size_t N, float *out,
                    const float *bias, int accumulate) {
#pragma GCC unroll 8
    for (int c = 0; c < C; c++)
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            float s = hsum(acc[r][c]);
            if (bias) s = s + bias[n + (size_t)r * rs];
            float *o = out + (b0 + (size_t)c) * N + n + (size_t)r * rs;
            *o = accumulate ? *o + s : s;
        }
}

// The canonical tree for 16 accumulators at once, the same adds: each step
// adds the two halves of every accumulator's previous sums, two or four
// accumulators side by side in a vector. Step 1 (lanes i + i+8) of a and b:
// [a 0..7 | b 0..7] + [a 8..15 | b 8..15].
AI __m512 tree_step1(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}
// step 2 (i + i+4) of two step-1 results: 128-bit quarter k of the result is
// accumulator k's 4 sums (a's two, then b's two).
AI __m512 tree_step2(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}
// step 3 (i + i+2) within each quarter: [a 0+2, a 1+3, b 0+2, b 1+3]
AI __m512 tree_step3(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}
// step 4 (0 + 1) within each pair: [a 0+1, a 2+3, b 0+1, b 2+3]
AI __m512 tree_step4(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The canonical trees of 16 accumulators (a[4 j + k], j, k < 4) side by
// side: lane 4 k + j of the result is the sum of a[4 j + k]. With 8 (a[0
// .. 7]), lanes 4 k and 4 k + 1 (j < 2) are theirs; the others repeat them.
AI __m512 tree16(const __m512 *a, int n8) {
    const __m512 g0 = tree_step2(tree_step1(a[0], a[1]), tree_step1(a[2], a[3]));
    const __m512 g1 = tree_step2(tree_step1(a[4], a[5]), tree_step1(a[6], a[7]));
    const __m512 h0 = tree_step3(g0, g1);
    if (n8) return tree_step4(h0, h0);
    const __m512 g2 = tree_step2(tree_step1(a[8], a[9]), tree_step1(a[10], a[11]));
    const __m512 g3 = tree_step2(tree_step1(a[12], a[13]), tree_step1(a[14], a[15]));
    return tree_step4(h0, tree_step3(g2, g3));
}

// finish_tile for a tile of R adjacent weight rows x C batch rows with R C
// a multiple of 8: the trees of 16 (then 8) accumulators side by side
// (tree16: 15 vector adds and 30 shuffles for 16 outputs, against 16 x 4
// adds and 8 shuffles, most of them 128-bit or narrower, one by one), then
// + bias and + the old value, one output at a time. The same operations
// per output as finish_tile.
AI void finish_tile_side(int R, int C, __m512 acc[RMAX][CMAX], size_t n, size_t b0, size_t N, float *out,
                         const float *bias, int accumulate) {
    __m512 a[RMAX * CMAX];
    float sums[RMAX * CMAX + 8] __attribute__((aligned(64)));
#pragma GCC unroll 8
    for (int c = 0; c < C; c++)
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) a[c * R + r] = acc[r][c];
#pragma GCC unroll 4
    for (int i = 0; i + 8 <= R * C; i += 16) {
        const int n8 = R * C - i < 16;
        __m512 s = tree16(a + i, n8);
        float t[16] __attribute__((aligned(64)));
        _mm512_store_ps(t, s);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)  // with n8, j = 2, 3 repeat 0, 1 past the tile's sums
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) sums[i + 4 * j + k] = t[4 * k + j];
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) {
        float *o = out + (b0 + (size_t)c) * N + n;
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            float s = sums[c * R + r];
            if (bias) s = s + bias[n + (size_t)r];
            o[r] = accumulate ? o[r] + s : s;
        }
    }
}

// finish_tile for a tile of 4 adjacent weight rows x 4 batch rows: the 16
// trees side by side (15 vector adds instead of 64 narrow ones), so that
// quarter c of the result is batch row c's 4 outputs n .. n + 3; then +
// bias and + the old values, 4 at a time. The same operations per output.
AI void finish_tile_4x4(__m512 acc[RMAX][CMAX], size_t n, size_t b0, size_t N, float *out, const float *bias,
                        int accumulate) {
    __m512 g[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) g[r] = tree_step2(tree_step1(acc[r][0], acc[r][1]), tree_step1(acc[r][2], acc[r][3]));
    __m512 s = tree_step4(tree_step3(g[0], g[1]), tree_step3(g[2], g[3]));
    if (bias) s = _mm512_add_ps(s, _mm512_broadcast_f32x4(_mm_loadu_ps(bias + n)));
    float sums[16] __attribute__((aligned(64)));
    _mm512_store_ps(sums, s);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        float *o = out + (b0 + (size_t)c) * N + n;
        __m128 v = _mm_load_ps(sums + 4 * c);
        if (accumulate) v = _mm_add_ps(_mm_loadu_ps(o), v);
        _mm_storeu_ps(o, v);
    }
}

// One tile: weight rows n, n + rs, ... (R of them) x batch rows [b0, b0+C),
// over the inputs [k0, k1) (k0 a multiple of 16; k1 = K or a multiple of
// 16). R and C are constants after inlining, so the arrays live in
// registers. xp: the packed activations of this batch chunk ([k/16][c][16],
// zero-padded to a multiple of 16), or NULL to read the rows of inp in
// place. saved: NULL when [k0, k1) = [0, K); else the accumulators
// (R x C vectors) between the k-blocks of rows_kblocked: they start at zero
// when k0 = 0, else from saved, and go back to saved unless k1 = K, when the
// tile finishes. Storing an accumulator and loading it again changes no bit:
// each output is the same chain of FMAs in the same order.
// PACKED (a constant): xp is not NULL (tile() below decides), so that the
// loop keeps no pointers to the rows of inp in the general registers;
// else xp decides at run time.
AI void tile_packed_or_not(DType dt, int R, int C, int PFS, int PACKED, const WD *W, size_t n, size_t rs, size_t b0,
                           float *out, const float *inp, const float *xp, const float *bias, int accumulate, size_t k0,
                           size_t k1, __m512 *saved) {
    const size_t K = W->K, N = W->N, es = esize(dt);
    const char *wr[RMAX];
    const float *xr[CMAX];
    __m512 acc[RMAX][CMAX];

#pragma GCC unroll 8
    for (int r = 0; r < R; r++) wr[r] = W->w + (n + (size_t)r * rs) * W->ldw * es;
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) xr[c] = PACKED ? NULL : inp + (b0 + (size_t)c) * K;
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) acc[r][c] = saved && k0 > 0 ? saved[r * C + c] : _mm512_setzero_ps();

// x vector of batch row c at element k (a full vector)
#define XV(c, k) (PACKED || xp ? _mm512_load_ps(xp + (k) * (size_t)C + 16 * (size_t)(c)) : _mm512_loadu_ps(xr[c] + (k)))

    size_t k = k0;
    for (; k + 16 <= k1; k += 16) {
        if (rs == 1 && (R > 1 || C > 1)) {  // walk the next tile linearly (see the top)
            const size_t tb = (size_t)R * W->ldw * es;
            const uintptr_t next = (uintptr_t)wr[0] + (tb > PF_DIST ? tb : (size_t)PF_DIST) + k * (size_t)R * es;
#pragma GCC unroll 8
            for (size_t off = 0; off < (size_t)R * 16 * es; off += 64)
                _mm_prefetch((const char *)(next + off), PF_HINT);
        }
        if (PFS && rs != 1) {  // split tiles: each row is its own stream
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
#pragma GCC unroll 2
                for (size_t off = 0; off < 16 * es; off += 64)
                    _mm_prefetch((const char *)((uintptr_t)wr[r] + k * es + off + (size_t)PFS), PF_HINT);
        }
        if (R > C) {  // C activation vectors held, each weight vector used as it is loaded
            __m512 xv[CMAX];
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) xv[c] = XV(c, k);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                __m512 wv = load_w(dt, wr[r], k);
                // one load into a register: else gcc folds it into each of
                // the C FMAs as a memory operand, C loads of one vector (8x3:
                // 27 loads a step, over the load pipes' 12 cycles at P = 2)
                __asm__("" : "+v"(wv));
#pragma GCC unroll 8
                for (int c = 0; c < C; c++) acc[r][c] = _mm512_fmadd_ps(wv, xv[c], acc[r][c]);
            }
        } else {  // R weight vectors held
            __m512 wv[RMAX];
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) wv[r] = load_w(dt, wr[r], k);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                const __m512 xv = XV(c, k);
#pragma GCC unroll 8
                for (int r = 0; r < R; r++) acc[r][c] = _mm512_fmadd_ps(wv[r], xv, acc[r][c]);
            }
        }
    }
    // K tail (< 16 left): one more step in which lanes k >= K see w = x = +0.
    if (k < k1) {
        const __mmask16 m = tail_mask(K - k);
        __m512 wv[RMAX];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) wv[r] = load_w_tail(dt, wr[r], k, m);
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const __m512 xv = PACKED || xp ? XV(c, k) : _mm512_maskz_loadu_ps(m, xr[c] + k);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r][c] = _mm512_fmadd_ps(wv[r], xv, acc[r][c]);
        }
    }
#undef XV

    if (saved && k1 < K) {
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) saved[r * C + c] = acc[r][c];
        return;
    }
    if (R == 4 && C == 4 && rs == 1) {  // the default's compute-bound tile: 16 trees side by side
        finish_tile_4x4(acc, n, b0, N, out, bias, accumulate);
    } else if (rs == 1 && R * C % 8 == 0) {  // a variant's tile (or its tails): 16 or 8 side by side
        finish_tile_side(R, C, acc, n, b0, N, out, bias, accumulate);
    } else {
        finish_tile(R, C, acc, n, rs, b0, N, out, bias, accumulate);
    }
}

AI void tile(DType dt, int R, int C, int PFS, const WD *W, size_t n, size_t rs, size_t b0, float *out,
             const float *inp, const float *xp, const float *bias, int accumulate, size_t k0, size_t k1,
             __m512 *saved) {
    // the compute-bound tiles (16 accumulators or more) have a packed instance of their own
    if (xp && R * C >= 16) tile_packed_or_not(dt, R, C, PFS, 1, W, n, rs, b0, out, inp, xp, bias, accumulate, k0, k1, saved);
    else tile_packed_or_not(dt, R, C, PFS, 0, W, n, rs, b0, out, inp, xp, bias, accumulate, k0, k1, saved);
}

// ---- activation packing ----------------------------------------------------

AI size_t kpad(size_t K) { return (K + 15) / 16 * 16; }

// How many batch rows the tile at b0 takes when rem rows are left, with
// tiles of at most CM rows: CM, then 4 (when CM > 4), then the rest (< 4).
AI size_t chunk_rows(size_t rem, size_t CM) { return rem >= CM ? CM : CM > 4 && rem >= 4 ? 4 : rem; }

// Packs inp (B, K) into dst in the chunks of chunk_rows(): the chunk at b0
// with C rows lies at dst + b0 * kpad(K), laid out [k/16][c][16], zeros
// past K.
TARGET_AVX512 static void pack_x(float *dst, const float *inp, size_t B, size_t K, size_t CM) {
    const size_t Kp = kpad(K);
    for (size_t b0 = 0, C; b0 < B; b0 += C) {
        C = chunk_rows(B - b0, CM);
        float *chunk = dst + b0 * Kp;
        for (size_t k = 0; k < Kp; k += 16) {
            const __mmask16 m = tail_mask(K > k ? K - k : 0);
            for (size_t c = 0; c < C; c++)
                _mm512_store_ps(chunk + k * C + 16 * c, _mm512_maskz_loadu_ps(m, inp + (b0 + c) * K + k));
        }
    }
}

// ---- Q8 ----------------------------------------------------------------------

// The m <= 32 inputs of a block at x as two vectors (zeros past m); returns
// their largest |x| (exact in any order) and sets *bad when one is NaN or
// infinite. Q8's and Q4's quantizers start with it.
AI float load_x_block(const float *x, size_t m, __m512 *lo, __m512 *hi, int *bad) {
    *lo = _mm512_maskz_loadu_ps(tail_mask(m), x);
    *hi = _mm512_maskz_loadu_ps(tail_mask(m > 16 ? m - 16 : 0), x + 16);
    const __m512 alo = _mm512_abs_ps(*lo), ahi = _mm512_abs_ps(*hi);
    const __m512 big = _mm512_set1_ps(FLT_MAX);
    *bad = (_mm512_cmp_ps_mask(alo, big, _CMP_NLE_UQ) | _mm512_cmp_ps_mask(ahi, big, _CMP_NLE_UQ)) != 0;
    return _mm512_reduce_max_ps(_mm512_max_ps(alo, ahi));
}

// q8_quantize_x_block() for one block of m <= 32 inputs, into dst[0 .. 32).
AI float quantize_x_block(int16_t *dst, const float *x, size_t m) {
    __m512 lo, hi;
    int bad;
    const float amax = load_x_block(x, m, &lo, &hi, &bad);
    if (bad || amax < Q8_X_TINY) {
        _mm512_storeu_si512((void *)dst, _mm512_setzero_si512());
        return bad ? NAN : 0.0f;
    }
    const __m512 inv = _mm512_set1_ps(32767.0f / amax);
    _mm256_storeu_si256((__m256i *)(void *)dst, _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(lo, inv))));
    _mm256_storeu_si256((__m256i *)(void *)(dst + 16),
                        _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(hi, inv))));
    return amax / 32767.0f;
}

// Quantizes inp (B, K) into scratch (matmul_kernels.h): the int16 values of
// the chunk at b0 with C rows (chunk_rows(), tiles of at most CM rows) at
// xq + b0 * Kq laid out [block][c][32], so that a tile reads one stream; the
// scales row-major [b][block].
TARGET_AVX512 static void quantize_x(float *scratch, const float *inp, size_t B, size_t K, size_t CM) {
    const size_t Kq = q8_row_quants(K), nb = Kq / Q8_BLOCK;
    int16_t *xq = (int16_t *)(void *)scratch;
    float *dx = (float *)(void *)((char *)scratch + q8_x_scales_offset(B, K));
    for (size_t b0 = 0, C; b0 < B; b0 += C) {
        C = chunk_rows(B - b0, CM);
        for (size_t c = 0; c < C; c++)
            for (size_t j = 0; j < nb; j++) {
                const size_t k = j * Q8_BLOCK;
                dx[(b0 + c) * nb + j] = quantize_x_block(xq + b0 * Kq + (j * C + c) * Q8_BLOCK,
                                                         inp + (b0 + c) * K + k, K - k < Q8_BLOCK ? K - k : Q8_BLOCK);
            }
    }
}

// The start of a quantized tile (Q8, Q4, Q6): the bytes (wr) and block
// scales (dr) of weight rows n, n + rs, ... (R), and its accumulators zeroed.
AI void start_quant_tile(int R, int C, const WD *W, size_t n, size_t rs, const uint8_t *wr[RMAX],
                         const uint16_t *dr[RMAX], __m512 acc[RMAX][CMAX]) {
    const size_t nb = W->ldd;
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        wr[r] = (const uint8_t *)W->w + (n + (size_t)r * rs) * W->ldw;
        dr[r] = W->d + (n + (size_t)r * rs) * nb;
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
}

// Block j of a Q8 weight row as 32 int16 in k order.
AI __m512i load_block(const uint8_t *row, size_t j) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(row + j * Q8_BLOCK)));
}

// One Q8 tile: weight rows n, n + rs, ... (R) x the C batch rows of
// the chunk at b0 (xq: its quantized activations; dx: the scales of all rows).
// PFS: for split rows (rs > 1), each row prefetched that many bytes ahead
// (0: none).
AI void tile_blocked(DType dt, int R, int C, int PFS, const WD *W, size_t n, size_t rs, size_t b0, float *out,
                     const int16_t *xq, const float *dx, const float *bias, int accumulate) {
    const size_t N = W->N, nb = W->ldd;
    // bytes of one block of a weight row; the prefetch below covers one
    // 64-byte line per row every 64 / bpb blocks
    const size_t bpb = dt == DTYPE_Q8 ? Q8_BLOCK : Q4_BLOCK / 2, pf_every = 64 / bpb;
    const uint8_t *wr[RMAX];
    const uint16_t *dr[RMAX];
    __m512 acc[RMAX][CMAX];
    // dw(n, j) * dx(b, j) for the current 16 blocks
    float sc[RMAX][CMAX][16] __attribute__((aligned(64)));

    start_quant_tile(R, C, W, n, rs, wr, dr, acc);

    for (size_t j = 0; j < nb; j++) {
        if ((j & 15) == 0) {
            const __mmask16 m = tail_mask(nb - j);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const __m512 dw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, dr[r] + j));
#pragma GCC unroll 8
                for (int c = 0; c < C; c++)
                    _mm512_store_ps(sc[r][c], _mm512_mul_ps(dw, _mm512_maskz_loadu_ps(m, dx + (b0 + (size_t)c) * nb + j)));
            }
        }
        if (PFS && rs != 1 && j % pf_every == 0) {  // split rows: each row its own stream
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) _mm_prefetch((const char *)(wr[r] + j * bpb + (size_t)PFS), PF_HINT);
        }
        if (rs == 1 && (R > 1 || C > 1) && j % pf_every == 0) {  // walk the next tile linearly
            const size_t tb = (size_t)R * W->ldw;
            const uintptr_t next = (uintptr_t)wr[0] + (tb > PF_DIST ? tb : (size_t)PF_DIST) + j * (size_t)R * bpb;
#pragma GCC unroll 8
            for (size_t off = 0; off < (size_t)R * 64; off += 64)
                _mm_prefetch((const char *)(next + off), PF_HINT);
        }
#define XQ(c) _mm512_load_si512((const void *)(xq + (j * (size_t)C + (size_t)(c)) * Q8_BLOCK))
#define STEP(r, c, wv, xv)                                                                                       \
    acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(wv, xv)), _mm512_set1_ps(sc[r][c][j & 15]), \
                                acc[r][c])
        if (R > C) {  // as in tile(): the C activation blocks held
            __m512i xv[CMAX];
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) xv[c] = XQ(c);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const __m512i wv = load_block(wr[r], j);
#pragma GCC unroll 8
                for (int c = 0; c < C; c++) STEP(r, c, wv, xv[c]);
            }
        } else {
            __m512i wv[RMAX];
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) wv[r] = load_block(wr[r], j);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                const __m512i xv = XQ(c);
#pragma GCC unroll 8
                for (int r = 0; r < R; r++) STEP(r, c, wv[r], xv);
            }
        }
#undef STEP
#undef XQ
    }

    finish_tile(R, C, acc, n, rs, b0, N, out, bias, accumulate);
}

// ---- Q4 ----------------------------------------------------------------------
// A group of 4 blocks = one 64-byte load per weight row; lane l (quarter l % 4
// of block l / 4) is dword l of the products of its low nibbles with lo and
// of its high nibbles with hi (matmul_kernels.h).

// Block i of group x from the m <= 32 inputs at x (m = 0: a block past the
// row: zeros), as q4_quantize_x_block; corr for the stored values' offset.
AI void quantize_q4_block(Q4XGroup *g, int i, const float *x, size_t m, int32_t offset) {
    __m512 lo, hi;
    int bad;
    const float amax = load_x_block(x, m, &lo, &hi, &bad);
    __m512i qlo = _mm512_setzero_si512(), qhi = qlo;
    float dx = bad ? NAN : 0.0f;
    if (!bad && amax >= Q8_X_TINY) {
        const __m512 inv = _mm512_set1_ps(127.0f / amax);
        qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, inv));
        qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, inv));
        dx = amax / 127.0f;
    }
    _mm_store_si128((__m128i *)(void *)(g->lo + 16 * i), _mm512_cvtepi32_epi8(qlo));
    _mm_store_si128((__m128i *)(void *)(g->hi + 16 * i), _mm512_cvtepi32_epi8(qhi));
    // quarter q's 8 activations: dwords 4q .. 4q+3 of qlo + qhi, summed
    __m512i t = _mm512_add_epi32(qlo, qhi);
    t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_CDAB));
    t = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_BADC));
    const __m128i sums = _mm512_castsi512_si128(_mm512_maskz_compress_epi32(0x1111, t));
    _mm_store_si128((__m128i *)(void *)(g->corr + 4 * i), _mm_mullo_epi32(sums, _mm_set1_epi32(-offset)));
    _mm_store_ps(g->dx + 4 * i, _mm_set1_ps(dx));
}

// Quantizes inp (B, K) into scratch as Q4XGroups: the chunk at b0 with C
// rows (chunk_rows(), tiles of at most CM rows) at b0 * G groups, laid out
// [group][c], so that a tile reads one stream.
TARGET_AVX512 static void quantize_x_q4(Q4XGroup *xg, const float *inp, size_t B, size_t K, size_t CM,
                                       int32_t offset) {
    const size_t nb = q8_row_quants(K) / Q8_BLOCK, G = q4_groups(K);
    for (size_t b0 = 0, C; b0 < B; b0 += C) {
        C = chunk_rows(B - b0, CM);
        for (size_t c = 0; c < C; c++)
            for (size_t g = 0; g < G; g++)
                for (int i = 0; i < 4; i++) {
                    const size_t j = 4 * g + (size_t)i, k = j * Q8_BLOCK;
                    quantize_q4_block(xg + b0 * G + g * C + c, i, inp + (b0 + c) * K + k,
                                      j >= nb ? 0 : K - k < Q8_BLOCK ? K - k : Q8_BLOCK, offset);
                }
    }
}

// Lane l's integer p: corr + the products of the unsigned nibbles (wlo, whi)
// with the int8 activations (xlo, xhi), 8 per dword, exact either way
// (WIDE: Q8 x int8's |q| up to 128 without VNNI).
// VNNI: vpdpbusd, written as asm so that this file needs no VNNI target
// (only matmul_rows_avx512_vnni's instance runs it).
AI __m512i q4_dot(int VNNI, int WIDE, __m512i corr, __m512i wlo, __m512i xlo, __m512i whi, __m512i xhi) {
    if (VNNI) {
        __asm__("vpdpbusd %2, %1, %0" : "+v"(corr) : "v"(wlo), "v"(xlo));
        __asm__("vpdpbusd %2, %1, %0" : "+v"(corr) : "v"(whi), "v"(xhi));
        return corr;
    }
    if (WIDE) {  // Q8 x int8: |u x| <= 128 * 127, the pairs fit int16, not the sum of two
        const __m512i one = _mm512_set1_epi16(1);
        return _mm512_add_epi32(_mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(wlo, xlo), one), corr),
                                _mm512_madd_epi16(_mm512_maddubs_epi16(whi, xhi), one));
    }
    // |u x| <= 15 * 127 (Q6: 63 * 127): the pairs, and the sum of two, fit int16 exactly
    const __m512i t = _mm512_add_epi16(_mm512_maddubs_epi16(wlo, xlo), _mm512_maddubs_epi16(whi, xhi));
    return _mm512_add_epi32(_mm512_madd_epi16(t, _mm512_set1_epi16(1)), corr);
}

// A Q6 group's 96 bytes (dtype.h) as Q4's two vectors of unsigned bytes:
// the low 4 bits from the first 64 bytes as Q4's nibbles, the top 2 from
// the 32 after them, broadcast to both halves and rotated into bits 4-5
// (byte t of the second half takes bits 2-3 and 6-7 of byte t: the rotate
// counts differ by half), then masked.
AI void unpack_q6(const uint8_t *group, __m512i *wlo, __m512i *whi) {
    const __m512i v = _mm512_loadu_si512((const void *)group);
    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(group + 64)));
    const __m512i nib = _mm512_set1_epi8(15), top = _mm512_set1_epi8(0x30);
    const __m512i rot_lo = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2), rot_hi = _mm512_setr_epi64(0, 0, 0, 0, 62, 62, 62, 62);
    *wlo = _mm512_or_si512(_mm512_and_si512(v, nib), _mm512_and_si512(_mm512_rolv_epi64(h, rot_lo), top));
    *whi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), nib),
                           _mm512_and_si512(_mm512_rolv_epi64(h, rot_hi), top));
}

// One Q4 (or Q6: dt) tile: weight rows n, n + rs, ... (R) x the C batch
// rows of the chunk whose activation groups are at xg ([group][c]).
// dt DTYPE_Q8: Q8 x int8 (matmul_kernels.h), a group 128 bytes of a row.
AI void tile_q4(DType dt, int VNNI, int R, int C, int PFS, const WD *W, size_t n, size_t rs, size_t b0, float *out,
                const Q4XGroup *xg, const float *bias, int accumulate) {
    const size_t N = W->N, nb = W->ldd, G = (nb + 3) / 4;
    const size_t gb = dt == DTYPE_Q6 ? Q6_GROUP_BYTES : dt == DTYPE_Q8 ? 4 * Q8_BLOCK : 64;
    const uint8_t *wr[RMAX];
    const uint16_t *dr[RMAX];
    __m512 acc[RMAX][CMAX];
    const __m512i nib = _mm512_set1_epi8(15);
    // the scale of block i of the group to lanes 4i .. 4i+3
    const __m512i quarter = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);

    start_quant_tile(R, C, W, n, rs, wr, dr, acc);

    for (size_t g = 0; g < G; g++) {
        // blocks of the group in the row: 4, fewer in the last group (past
        // them: no load; zero weights, scales and activations)
        const size_t in = nb - 4 * g < 4 ? nb - 4 * g : 4;
        if (rs == 1 && (R > 1 || C > 1)) {  // walk the next tile linearly
            const size_t tb = (size_t)R * W->ldw;
            const uintptr_t next = (uintptr_t)wr[0] + (tb > PF_DIST ? tb : (size_t)PF_DIST) + g * (size_t)R * gb;
#pragma GCC unroll 8
            for (size_t off = 0; off < (size_t)R * gb; off += 64)
                _mm_prefetch((const char *)(next + off), PF_HINT);
        }
        if (PFS) {
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                _mm_prefetch((const char *)(wr[r] + gb * g + PFS), PF_HINT);
                if (dt == DTYPE_Q6) _mm_prefetch((const char *)(wr[r] + gb * g + PFS + 64), PF_HINT);
            }
        }
        __m512i wlo[RMAX], whi[RMAX];
        __mmask64 slo[RMAX], shi[RMAX];  // Q8 x int8 without VNNI: the weights' signs
        __m512 dw[RMAX];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m128i d16;
            if (in == 4) d16 = _mm_loadl_epi64((const __m128i *)(const void *)(dr[r] + 4 * g));
            else d16 = _mm_maskz_loadu_epi16((__mmask8)((1u << in) - 1), dr[r] + 4 * g);
            if (dt == DTYPE_Q6) {  // stored in whole groups (past the row: q = 0, against zero activations)
                unpack_q6(wr[r] + gb * g, &wlo[r], &whi[r]);
            } else if (dt == DTYPE_Q8) {  // [blocks 0 1] [blocks 2 3] -> inputs 0..15, 16..31 of each
                const uint8_t *p = wr[r] + gb * g;
                const __m512i a = in >= 2 ? _mm512_loadu_si512((const void *)p)
                                          : _mm512_maskz_loadu_epi8((__mmask64)0xffffffffull, p);
                const __m512i b = in == 4 ? _mm512_loadu_si512((const void *)(p + 64))
                                  : in == 3 ? _mm512_maskz_loadu_epi8((__mmask64)0xffffffffull, p + 64)
                                            : _mm512_setzero_si512();
                const __m512i lo = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(2, 0, 2, 0));
                const __m512i hi = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 1, 3, 1));
                if (VNNI) {  // q + 128, unsigned
                    wlo[r] = _mm512_xor_si512(lo, _mm512_set1_epi8((char)0x80));
                    whi[r] = _mm512_xor_si512(hi, _mm512_set1_epi8((char)0x80));
                } else {  // |q| (128 for -128: right as unsigned), its sign to the activations
                    wlo[r] = _mm512_abs_epi8(lo), slo[r] = _mm512_movepi8_mask(lo);
                    whi[r] = _mm512_abs_epi8(hi), shi[r] = _mm512_movepi8_mask(hi);
                }
            } else {
                const __m512i v = in == 4 ? _mm512_loadu_si512((const void *)(wr[r] + 64 * g))
                                          : _mm512_maskz_loadu_epi8((__mmask64)((1ull << (16 * in)) - 1), wr[r] + 64 * g);
                wlo[r] = _mm512_and_si512(v, nib);
                whi[r] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
            }
            dw[r] = _mm512_permutexvar_ps(quarter, _mm512_castps128_ps512(_mm_cvtph_ps(d16)));
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const Q4XGroup *x = xg + g * (size_t)C + (size_t)c;
            const __m512i xlo = _mm512_load_si512((const void *)x->lo), xhi = _mm512_load_si512((const void *)x->hi);
            const __m512i corr = _mm512_load_si512((const void *)x->corr);
            const __m512 dx = _mm512_load_ps(x->dx);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                __m512i p;
                if (dt == DTYPE_Q8 && !VNNI) {  // |q| x +-xq, corr 0 (run_q4_cfg)
                    const __m512i z = _mm512_setzero_si512();
                    p = q4_dot(0, 1, corr, wlo[r], _mm512_mask_sub_epi8(xlo, slo[r], z, xlo), whi[r],
                               _mm512_mask_sub_epi8(xhi, shi[r], z, xhi));
                } else {
                    p = q4_dot(VNNI, 0, corr, wlo[r], xlo, whi[r], xhi);
                }
                acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw[r], dx), acc[r][c]);
            }
        }
    }

    finish_tile(R, C, acc, n, rs, b0, N, out, bias, accumulate);
}

// R Q4 weight rows (rs apart) from n, all B batch rows in chunks of CM
// (chunk_rows()).
AI void rows_q4(DType dt, int VNNI, int R, int CM, int PFS, const WD *W, size_t n, size_t rs, float *out,
                const Q4XGroup *xg, const float *bias, size_t B, int accumulate) {
    const size_t G = (W->ldd + 3) / 4;
    size_t b = 0;
    for (; b + (size_t)CM <= B; b += (size_t)CM)
        tile_q4(dt, VNNI, R, CM, PFS, W, n, rs, b, out, xg + b * G, bias, accumulate);
    if (CM > 4 && B - b >= 4) {
        tile_q4(dt, VNNI, R, CM > 4 ? 4 : 1, PFS, W, n, rs, b, out, xg + b * G, bias, accumulate);
        b += 4;
    }
    switch (B - b) {
    case 3:
        if (CM > 3) tile_q4(dt, VNNI, R, CM > 3 ? 3 : 1, PFS, W, n, rs, b, out, xg + b * G, bias, accumulate);
        break;
    case 2:
        if (CM > 2) tile_q4(dt, VNNI, R, CM > 2 ? 2 : 1, PFS, W, n, rs, b, out, xg + b * G, bias, accumulate);
        break;
    case 1: tile_q4(dt, VNNI, R, 1, PFS, W, n, rs, b, out, xg + b * G, bias, accumulate); break;
    default: break;
    }
}

// Q4 over [n0, n1): the activations quantized into scratch, then tiles of
// R rows (SPLIT: R far-apart rows, else R adjacent ones) x CM batch rows.
AI void run_q4_cfg(DType dt, int VNNI, int R, int CM, int SPLIT, int PFS, const WD *W, float *out, const float *inp,
                   const float *bias, size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    Q4XGroup *xg = (Q4XGroup *)(void *)scratch;
    // Q8 x int8 without VNNI multiplies signed weights: no offset
    quantize_x_q4(xg, inp, B, W->K, (size_t)CM, dt == DTYPE_Q8 && !VNNI ? 0 : q4_offset(dt));
    size_t n = n0;
    if (SPLIT && R > 1) {
        const size_t part = (n1 - n0) / (size_t)R;
        for (; n < n0 + part; n++) rows_q4(dt, VNNI, R, CM, PFS, W, n, part, out, xg, bias, B, accumulate);
        n = n0 + part * (size_t)R;
    } else {
        for (; n + (size_t)R <= n1; n += (size_t)R) rows_q4(dt, VNNI, R, CM, PFS, W, n, 1, out, xg, bias, B, accumulate);
    }
    for (; n < n1; n++) rows_q4(dt, VNNI, 1, CM, PFS, W, n, 1, out, xg, bias, B, accumulate);  // row tail
}

// Q4's tiles: always R = 4 far-apart rows ("split", see the top), each row
// prefetched Q4_PF_* bytes ahead by hand (prefetcht1): 1 KiB at B = 1,
// where decode is bound by the weights' bytes (4.5 bits a weight) / memory
// bandwidth; 2 KiB at 2 <= B < 4; 1 KiB from B = 4, where it is
// compute-bound (unpacking the nibbles) and the split rows x 4 beat
// adjacent rows.
enum { Q4_R = 4, Q4_PF_1 = 1024, Q4_PF_M = 2048, Q4_PF_2 = 1024 };

AI void run_q4(DType dt, int VNNI, const WD *W, float *out, const float *inp, const float *bias, size_t B, size_t n0,
               size_t n1, int accumulate, float *scratch) {
    if (B == 1)
        run_q4_cfg(dt, VNNI, Q4_R, 1, 1, Q4_PF_1, W, out, inp, bias, B, n0, n1, accumulate, scratch);
    else if (B < 4)
        run_q4_cfg(dt, VNNI, Q4_R, C_M, 1, Q4_PF_M, W, out, inp, bias, B, n0, n1, accumulate, scratch);
    else
        run_q4_cfg(dt, VNNI, Q4_R, C_2, 1, Q4_PF_2, W, out, inp, bias, B, n0, n1, accumulate, scratch);
}

// ---- drivers ---------------------------------------------------------------

// The tile at batch row b0, with the activations as run_cfg prepared them
// (xp: packed floats, Q8's and Q4's int16 values, or NULL; dx: their scales).
AI void tile_at(DType dt, int R, int C, int PFS, const WD *W, size_t n, size_t rs, size_t b0, float *out,
                const float *inp, const void *xp, const float *dx, const float *bias, int accumulate) {
    if (dtype_is_blocked(dt))
        tile_blocked(dt, R, C, PFS, W, n, rs, b0, out, (const int16_t *)xp + b0 * W->Kq, dx, bias, accumulate);
    else
        tile(dt, R, C, PFS, W, n, rs, b0, out, inp, xp ? (const float *)xp + b0 * kpad(W->K) : NULL, bias,
             accumulate, 0, W->K, NULL);
}

// R weight rows (rs apart) from n, all B batch rows in chunks of CM.
AI void rows(DType dt, int R, int CM, int PFS, const WD *W, size_t n, size_t rs, float *out,
             const float *inp, const void *xp, const float *dx, const float *bias, size_t B, int accumulate) {
    size_t b = 0;
    for (; b + (size_t)CM <= B; b += (size_t)CM) tile_at(dt, R, CM, PFS, W, n, rs, b, out, inp, xp, dx, bias, accumulate);
    // batch tail (chunk_rows): the same arithmetic per element, smaller tiles
    if (CM > 4 && B - b >= 4) {
        tile_at(dt, R, CM > 4 ? 4 : 1, PFS, W, n, rs, b, out, inp, xp, dx, bias, accumulate);
        b += 4;
    }
    switch (B - b) {
    case 3:
        if (CM > 3) tile_at(dt, R, CM > 3 ? 3 : 1, PFS, W, n, rs, b, out, inp, xp, dx, bias, accumulate);
        break;
    case 2:
        if (CM > 2) tile_at(dt, R, CM > 2 ? 2 : 1, PFS, W, n, rs, b, out, inp, xp, dx, bias, accumulate);
        break;
    case 1: tile_at(dt, R, 1, PFS, W, n, rs, b, out, inp, xp, dx, bias, accumulate); break;
    default: break;
    }
}

// rows() for the compute-bound tiles of a float dtype (R adjacent rows x CM,
// packed activations) when a tile's R weight rows are more than one L1's
// share (KB_BYTES): K is cut into k-blocks whose R rows stay in L1 while
// every batch chunk of up to KB_CHUNKS x CM rows passes them, each chunk's
// accumulators kept between the blocks (tile()'s saved). Otherwise both the
// weight rows and the activations would stream from L2 (GPT-2's
// mlp.c_proj, K = 3072: 48 KiB of weight rows per tile), which is at L2's
// rate on a core with two FMA pipes. The same FMAs per output in the same order.
enum { KB_BYTES = 12288, KB_CHUNKS = 8 };

// The k-block of R rows when they may take kb bytes (kb = 0: KB_BYTES).
AI size_t kblock(size_t kb, int R, DType dt) { return (kb ? kb : KB_BYTES) / ((size_t)R * esize(dt)) / 16 * 16; }

// rows_kblocked's tile of the C rows at b (C = chunk_rows(), so CM, 4 or
// fewer than 4: each case a tile of constant shape).
AI void tile_kblock(DType dt, int R, int CM, size_t C, const WD *W, size_t n, size_t b, float *out, const float *inp,
                    const float *xp, const float *bias, int accumulate, size_t k0, size_t k1, __m512 *saved) {
    const float *x = xp + b * kpad(W->K);
    if (C == (size_t)CM) tile(dt, R, CM, 0, W, n, 1, b, out, inp, x, bias, accumulate, k0, k1, saved);
    else if (C == 4) tile(dt, R, CM > 4 ? 4 : 1, 0, W, n, 1, b, out, inp, x, bias, accumulate, k0, k1, saved);
    else if (C == 3) tile(dt, R, CM > 3 ? 3 : 1, 0, W, n, 1, b, out, inp, x, bias, accumulate, k0, k1, saved);
    else if (C == 2) tile(dt, R, CM > 2 ? 2 : 1, 0, W, n, 1, b, out, inp, x, bias, accumulate, k0, k1, saved);
    else tile(dt, R, 1, 0, W, n, 1, b, out, inp, x, bias, accumulate, k0, k1, saved);
}

AI void rows_kblocked(DType dt, int R, int CM, size_t kb, const WD *W, size_t n, float *out, const float *inp,
                      const float *xp, const float *bias, size_t B, int accumulate) {
    const size_t K = W->K, KB = kblock(kb, R, dt), span = (size_t)KB_CHUNKS * (size_t)CM;
    // a pass's chunks: KB_CHUNKS of CM rows, or at B's end up to two more
    // (chunk_rows: 4, then fewer)
    __m512 saved[KB_CHUNKS + 2][ACC_MAX];
    for (size_t s0 = 0; s0 < B; s0 += span) {
        const size_t s1 = B - s0 < span ? B : s0 + span;
        for (size_t k0 = 0; k0 < K; k0 += KB) {
            const size_t k1 = K - k0 < KB ? K : k0 + KB;
            size_t i = 0;
            for (size_t b = s0, C; b < s1; b += C, i++) {
                C = chunk_rows(s1 - b, (size_t)CM);
                tile_kblock(dt, R, CM, C, W, n, b, out, inp, xp, bias, accumulate, k0, k1, saved[i]);
            }
        }
    }
}

// Q8 and Q4 need scratch (matmul_rows in matmul.c sees to it); the others use it from B = 2.
// kb: the bytes a tile's weight rows may take before they run in k-blocks
// (0: KB_BYTES).
AI void run_cfg_kb(DType dt, int R, int CM, int SPLIT, int PFS, size_t kb, const WD *W, float *out, const float *inp,
                   const float *bias, size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    const void *xp = NULL;
    const float *dx = NULL;
    if (dtype_is_blocked(dt)) {
        quantize_x(scratch, inp, B, W->K, (size_t)CM);
        xp = scratch;
        dx = (const float *)(const void *)((const char *)scratch + q8_x_scales_offset(B, W->K));
    } else if (B > 1 && scratch) {
        pack_x(scratch, inp, B, W->K, (size_t)CM);
        xp = scratch;
    }
    size_t n = n0;
    if (SPLIT && R > 1) {
        // the R rows of a tile come from R equal parts of [n0, n1): R
        // far-apart linear streams instead of R interleaved ones
        const size_t part = (n1 - n0) / (size_t)R;
        for (; n < n0 + part; n++) rows(dt, R, CM, PFS, W, n, part, out, inp, xp, dx, bias, B, accumulate);
        n = n0 + part * (size_t)R;
    } else if (!dtype_is_blocked(dt) && xp && !SPLIT && W->K > kblock(kb, R, dt)) {
        for (; n + (size_t)R <= n1; n += (size_t)R)
            rows_kblocked(dt, R, CM, kb, W, n, out, inp, (const float *)xp, bias, B, accumulate);
    } else {
        for (; n + (size_t)R <= n1; n += (size_t)R)
            rows(dt, R, CM, PFS, W, n, 1, out, inp, xp, dx, bias, B, accumulate);
    }
    for (; n < n1; n++) rows(dt, 1, CM, PFS, W, n, 1, out, inp, xp, dx, bias, B, accumulate);  // row tail
}

AI void run_cfg(DType dt, int R, int CM, int SPLIT, int PFS, const WD *W, float *out, const float *inp,
                const float *bias, size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    run_cfg_kb(dt, R, CM, SPLIT, PFS, 0, W, out, inp, bias, B, n0, n1, accumulate, scratch);
}

// The default tiles by B; from B_COMPUTE rows, R_2 x C_2.
enum { B_COMPUTE = 8 };
_Static_assert((int)B_COMPUTE == (int)MATMUL_PLAN_MIN_ROWS, "the variants serve the calls of the compute-bound tiles");

AI void run(DType dt, const WD *W, float *out, const float *inp, const float *bias, size_t B, size_t n0,
            size_t n1, int accumulate, float *scratch) {
    if (dtype_is_grouped(dt)) {  // their own tiles (the Q4 section)
        run_q4(dt, 0, W, out, inp, bias, B, n0, n1, accumulate, scratch);
        return;
    }
    if (B == 1 && (dt == DTYPE_F32 || dt == DTYPE_Q8))
        run_cfg(dt, R_1Q, 1, 1, PFS_1Q, W, out, inp, bias, B, n0, n1, accumulate, scratch);
    else if (B == 1)
        run_cfg(dt, R_1, 1, 1, 0, W, out, inp, bias, B, n0, n1, accumulate, scratch);
    else if (B < 4 && (dt == DTYPE_F16 || dt == DTYPE_BF16))
        run_cfg(dt, R_M, C_M, 1, PFS_MH, W, out, inp, bias, B, n0, n1, accumulate, scratch);
    else if (B < 4)
        run_cfg(dt, R_M, C_M, 1, PFS_M, W, out, inp, bias, B, n0, n1, accumulate, scratch);
    else if (B < B_COMPUTE && dt == DTYPE_F32)  // still memory-bound: split rows + prefetch
        run_cfg(dt, R_4F, C_4F, 1, PFS_4F, W, out, inp, bias, B, n0, n1, accumulate, scratch);
    else
        run_cfg(dt, R_2, C_2, 0, 0, W, out, inp, bias, B, n0, n1, accumulate, scratch);
}

// matmul_rows_avx512: run for W's dtype, one instance each (matmul_kernels.h)
MATMUL_ROWS_PER_DTYPE(matmul_rows_avx512, TARGET_AVX512)

// The variants (matmul_kernels.h's MATMUL_AVX512_VARIANTS), one function
// each, matmul_rows_avx512_RxC: the compute-bound calls (B_COMPUTE rows or
// more) of F32, F16, BF16 and Q8 in tiles of R adjacent weight rows x C
// batch rows; everything else as the default (run above, through its
// instance for the dtype).
AI void run_default(DType dt, const WD *W, float *out, const float *inp, const float *bias, size_t B, size_t n0,
                    size_t n1, int accumulate, float *scratch) {
    switch (dt) {
    case DTYPE_F32: matmul_rows_avx512_f32(W, out, inp, bias, B, n0, n1, accumulate, scratch); break;
    case DTYPE_F16: matmul_rows_avx512_f16(W, out, inp, bias, B, n0, n1, accumulate, scratch); break;
    case DTYPE_BF16: matmul_rows_avx512_bf16(W, out, inp, bias, B, n0, n1, accumulate, scratch); break;
    case DTYPE_Q8: matmul_rows_avx512_q8(W, out, inp, bias, B, n0, n1, accumulate, scratch); break;
    case DTYPE_Q4: matmul_rows_avx512_q4(W, out, inp, bias, B, n0, n1, accumulate, scratch); break;
    case DTYPE_Q6: matmul_rows_avx512_q6(W, out, inp, bias, B, n0, n1, accumulate, scratch); break;
    }
}

#define A5_VARIANT(R, C, KB, S)                                                                              \
    _Static_assert(R <= RMAX && C <= CMAX && R * C <= ACC_MAX, "a tile within the registers");              \
    AI void run_##R##x##C##S(DType dt, const WD *W, float *out, const float *inp, const float *bias, size_t B, \
                             size_t n0, size_t n1, int accumulate, float *scratch) {                        \
        if (B >= B_COMPUTE && !dtype_is_grouped(dt) && (R != R_2 || C != C_2 || KB != 0)) /* 4x4: the default */ \
            run_cfg_kb(dt, R, C, 0, 0, (size_t)(KB) * 1024, W, out, inp, bias, B, n0, n1, accumulate, scratch);    \
        else                                                                                                 \
            run_default(dt, W, out, inp, bias, B, n0, n1, accumulate, scratch);                              \
    }                                                                                                        \
    MATMUL_ROWS_PER_DTYPE_RUN(matmul_rows_avx512_##R##x##C##S, TARGET_AVX512, run_##R##x##C##S)
MATMUL_AVX512_VARIANTS(A5_VARIANT)

TARGET_AVX512 static void matmul_rows_avx512_q4_vnni(const WD *W, float *out, const float *inp, const float *bias,
                                                     size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    run_q4(DTYPE_Q4, 1, W, out, inp, bias, B, n0, n1, accumulate, scratch);
}

TARGET_AVX512 static void matmul_rows_avx512_q6_vnni(const WD *W, float *out, const float *inp, const float *bias,
                                                     size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    run_q4(DTYPE_Q6, 1, W, out, inp, bias, B, n0, n1, accumulate, scratch);
}

TARGET_AVX512 static void matmul_rows_avx512_q8i8_vnni(const WD *W, float *out, const float *inp, const float *bias,
                                                       size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    run_q4(DTYPE_Q8, 1, W, out, inp, bias, B, n0, n1, accumulate, scratch);
}

TARGET_AVX512 static void matmul_rows_avx512_q8i8(const WD *W, float *out, const float *inp, const float *bias,
                                                  size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    run_q4(DTYPE_Q8, 0, W, out, inp, bias, B, n0, n1, accumulate, scratch);
}

TARGET_AVX512 void matmul_rows_avx512_q8_int8(int vnni, float *out, const float *inp, const Weight *W,
                                              const float *bias, size_t B, size_t n0, size_t n1, int accumulate,
                                              float *scratch) {
    if (n0 >= n1 || B == 0) return;
    const WD d = weight_walk(W);
    (vnni ? matmul_rows_avx512_q8i8_vnni : matmul_rows_avx512_q8i8)(&d, out, inp, bias, B, n0, n1, accumulate,
                                                                    scratch);
}

// VNNI changes Q4 and Q6 only (vpdpbusd for vpmaddubsw + vpmaddwd: the same integers)
TARGET_AVX512 void matmul_rows_avx512_vnni(float *out, const float *inp, const Weight *W, const float *bias,
                                           size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    if (!dtype_is_grouped(W->dtype)) {
        matmul_rows_avx512(out, inp, W, bias, B, n0, n1, accumulate, scratch);
        return;
    }
    if (n0 >= n1 || B == 0) return;
    const WD d = weight_walk(W);
    (W->dtype == DTYPE_Q6 ? matmul_rows_avx512_q6_vnni : matmul_rows_avx512_q4_vnni)(&d, out, inp, bias, B, n0, n1,
                                                                                     accumulate, scratch);
}

#endif
