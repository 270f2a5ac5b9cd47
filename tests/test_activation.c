/*
 * test_activation.c - the MLP's activations (src/kernels/activation.h)
 * against their formulas in double (activation_reference: libm's exp and
 * erfc), over the whole float range, and bit for bit against themselves on
 * ragged lengths.
 *
 * The error of a result is counted in ulps of the reference where the
 * reference is a normal float, and in units of the smallest subnormal
 * (2^-149, the spacing there) where it is below FLT_MIN. The bounds, each
 * the measured worst rounded up (the measurement in a comment beside it):
 *   - gelu (erf), quick_gelu, silu compute in double and round once, so
 *     every result is within 0.5 ulp plus the approximations' ~1e-13
 *     relative: bound 0.501 ulp (and 0.501 units below FLT_MIN). An
 *     exhaustive run over all 2^32 floats measured the same.
 *   - relu is exact.
 *   - gelu_new (tanh form) is GPT-2's float kernel, whose bits may not
 *     change; its error grows in the negative tail, where u = sqrt(2/pi)
 *     (x + 0.044715 x^3) is rounded to float and e^(2u) multiplies that
 *     rounding by |2u|, and below x = -10.03 exp_approx saturates (x / e^88
 *     in place of a value that is 0 or subnormal). Bounds by region below.
 *
 * Which versions run: the kernels are CPU_CLONES loops, and the program
 * runs the one its CPU picks when it starts; the project has no switch that
 * forces the baseline or the AVX2 clone, so this program compares the
 * picked clone's vector body with its own scalar tail (ragged lengths,
 * pieces) and with the double formulas. The three clones (each built alone
 * from a copy of activation.c) and forward.c's gelu_forward were compared
 * bit for bit over all 2^32 floats by hand when the kernels were written:
 * no difference (commit message).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/activation.h"
#include "kernels/cpu.h"

static const char *const names[ACTIVATION_COUNT] = {"gelu_new", "gelu", "quick_gelu", "relu", "silu"};

// The worst error of one kernel over a set of inputs, and where.
typedef struct {
    double ulps;       // worst error in ulps where the reference is normal
    float ulps_x;
    double sub;        // worst error in units of 2^-149 where it is not
    float sub_x;
} Worst;

// got's error against want in ulps (want normal) or units of 2^-149.
static void measure(Worst *w, float x, float got, double want) {
    if (fabs(want) >= FLT_MIN) {
        double ulp = ldexp(1.0, ilogb(want) - 23);
        double e = fabs((double)got - want) / ulp;
        if (e > w->ulps || e != e) {
            w->ulps = e != e ? INFINITY : e;
            w->ulps_x = x;
        }
    } else {
        double e = fabs((double)got - want) / ldexp(1.0, -149);
        if (e > w->sub || e != e) {
            w->sub = e != e ? INFINITY : e;
            w->sub_x = x;
        }
    }
}

// Runs kernel a over in[n] (a copy) and adds the errors against the
// reference to w for the inputs in [lo, hi].
static void sweep(Activation a, const float *in, size_t n, float lo, float hi, Worst *w) {
    float *out = malloc(n * sizeof *out);
    memcpy(out, in, n * sizeof *out);
    activation_kernel(a)(out, n);
    for (size_t i = 0; i < n; i++)
        if (in[i] >= lo && in[i] <= hi) measure(w, in[i], out[i], activation_reference(a, in[i]));
    free(out);
}

// The inputs: [-10, 10] every 2^-12, then both signs of a log-spaced sweep
// from the smallest subnormal to FLT_MAX (ratio 1.00005: 1.9 million a
// sign), and the subnormals' and normals' edges.
static float *inputs(size_t *n) {
    size_t cap = 8 << 20, k = 0;
    float *x = malloc(cap * sizeof *x);
    for (int i = -10 * 4096; i <= 10 * 4096; i++) x[k++] = (float)i / 4096.0f;
    for (double v = 1.4e-45; v <= FLT_MAX; v *= 1.00005) {
        x[k++] = (float)v;
        x[k++] = -(float)v;
    }
    const float edges[] = {FLT_MAX, FLT_MIN, nextafterf(FLT_MIN, 0), 0x1p-149f, 0x1p-140f, 0x1p-127f, 0x1.fffffep-127f};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        x[k++] = edges[i];
        x[k++] = -edges[i];
    }
    *n = k;
    return x;
}

static void report(const char *what, const Worst *w) {
    printf("  %-26s worst %.4f ulp (x = %.9g), %.4f x 2^-149 below FLT_MIN (x = %.9g)\n", what, w->ulps,
           (double)w->ulps_x, w->sub, (double)w->sub_x);
}

static void test_accuracy(void) {
    size_t n;
    float *x = inputs(&n);
    printf("activations against the double formulas, %zu inputs:\n", n);
    // The kernels that round a double once.
    const Activation rounded[] = {ACTIVATION_GELU_ERF, ACTIVATION_QUICK_GELU, ACTIVATION_SILU};
    for (size_t i = 0; i < 3; i++) {
        Worst w = {0};
        sweep(rounded[i], x, n, -INFINITY, INFINITY, &w);
        report(names[rounded[i]], &w);
        // measured 0.5000 ulp and 0.5000 units for all three, here and over all 2^32 floats
        CHECK(w.ulps <= 0.501, "%s(%.9g): error %.4f ulp, want <= 0.501", names[rounded[i]], (double)w.ulps_x, w.ulps);
        CHECK(w.sub <= 0.501, "%s(%.9g): error %.4f x 2^-149, want <= 0.501", names[rounded[i]], (double)w.sub_x,
              w.sub);
    }
    Worst r = {0};
    sweep(ACTIVATION_RELU, x, n, -INFINITY, INFINITY, &r);
    report("relu", &r);
    CHECK(r.ulps == 0 && r.sub == 0, "relu(%.9g) / relu(%.9g) not exact", (double)r.ulps_x, (double)r.sub_x);

    // gelu_new by region: the error grows with |2u| as the tail goes on.
    struct {
        float lo, hi;
        double ulps, sub;  // bounds
    } region[] = {
        // measured here / over all 2^32 floats by hand:
        {0.0f, INFINITY, 2, 1},      // 1.70 / 1.95 ulp; 0.5 below FLT_MIN
        {-1.0f, -0.0f, 3, 1},        // 2.23 / 2.69 ulp
        {-3.0f, -1.0f, 17, 1},       // 14.0 / 16.5 ulp
        {-10.0f, -3.0f, 260, 1},     // 193 / 251 ulp (|2u| up to 87)
    };
    for (size_t i = 0; i < sizeof region / sizeof *region; i++) {
        Worst w = {0};
        sweep(ACTIVATION_GELU_TANH, x, n, region[i].lo, region[i].hi, &w);
        char what[64];
        snprintf(what, sizeof what, "gelu_new on [%g, %g]", region[i].lo, region[i].hi);
        report(what, &w);
        CHECK(w.ulps <= region[i].ulps, "gelu_new(%.9g): error %.4f ulp, want <= %g", (double)w.ulps_x, w.ulps,
              region[i].ulps);
        CHECK(w.sub <= region[i].sub, "gelu_new(%.9g): error %.4f x 2^-149, want <= %g", (double)w.sub_x, w.sub,
              region[i].sub);
    }
    // Below -10.03 exp_approx saturates (2u < -88), and the kernel gives
    // x / (1 + e^88) (e^88 as exp_approx makes it) in place of a value 0 or
    // subnormal: what matters is that it stays that small, |x| * 6.1e-39.
    float *out = malloc(n * sizeof *out);
    memcpy(out, x, n * sizeof *out);
    activation_gelu_tanh(out, n);
    double worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(x[i] < -10.0f)) continue;
        double e = fabs((double)out[i] - activation_reference(ACTIVATION_GELU_TANH, x[i])) / -(double)x[i];
        if (e > worst) {
            worst = e;
            worst_x = x[i];
        }
    }
    // measured 6.05e-39 here and over all floats
    printf("  %-26s worst |error| / |x| %.3g (x = %.9g)\n", "gelu_new below -10", worst, (double)worst_x);
    CHECK(worst <= 6.1e-39, "gelu_new(%.9g): |error| / |x| = %.3g, want <= 6.1e-39", (double)worst_x, worst);
    free(out);
    free(x);
}

// Values the kernels must get right by name, in every kernel.
static void test_special(void) {
    for (int a = 0; a < ACTIVATION_COUNT; a++) {
        ActivationFn f = activation_kernel(a);
        CHECK(f != NULL, "activation_kernel(%d) is NULL", a);
        if (!f) continue;
        float v[6] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN};
        f(v, 6);
        CHECK(v[0] == 0 && !signbit(v[0]), "%s(0) = %g, want +0", names[a], (double)v[0]);
        CHECK(v[1] == 0, "%s(-0) = %g, want 0", names[a], (double)v[1]);
        CHECK(v[2] == INFINITY, "%s(inf) = %g, want inf", names[a], (double)v[2]);
        CHECK(isnan(v[4]) && isnan(v[5]), "%s(NaN) = %g, %g, want NaN", names[a], (double)v[4], (double)v[5]);
        // -inf: 0 for all but gelu_new (which saturates: x / e^88)
        if (a != ACTIVATION_GELU_TANH)
            CHECK(v[3] == 0, "%s(-inf) = %g, want 0", names[a], (double)v[3]);
        else
            CHECK(v[3] == -INFINITY, "gelu_new(-inf) = %g: GPT-2's kernel gives -inf (x / e^88)", (double)v[3]);
    }
    CHECK(activation_kernel(ACTIVATION_COUNT) == NULL, "activation_kernel(ACTIVATION_COUNT) is not NULL");
    // A few values from the formulas by hand: gelu(1) = Phi(1) = 0.841344746,
    // gelu(-1) = -0.158655254, silu(1) = 1 / (1 + 1/e) = 0.731058579,
    // quick_gelu(1) = 1 / (1 + e^-1.702) = 0.845795766.
    float g[2] = {1.0f, -1.0f}, s = 1.0f, q = 1.0f;
    activation_gelu_erf(g, 2);
    activation_silu(&s, 1);
    activation_quick_gelu(&q, 1);
    CHECK(g[0] == 0.841344746f && g[1] == -0.158655254f, "gelu(+-1) = %.9g, %.9g", (double)g[0], (double)g[1]);
    CHECK(s == 0.731058579f, "silu(1) = %.9g", (double)s);
    CHECK(q == 0.845795766f, "quick_gelu(1) = %.9g", (double)q);
}

// Each kernel on n = 1..67 values, whole, one at a time and in pieces of
// every size from 1 to 7 (pieces start anywhere, so vector bodies, peels
// and scalar tails all meet each value): the same bits, and nothing past n
// written.
static void test_ragged(void) {
    enum { N = 67, GUARD = 5 };
    const float awkward[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -2.5f, 3.0e38f, -3.0e38f, 1e-40f, -1e-40f,
                             0x1p-149f, -0x1p-149f, 14.4f, -14.4f, -9.3f, 88.0f, -88.0f, -100.0f,
                             INFINITY, -INFINITY, NAN, 0.044715f, -0.7f, 6.0f, -6.0f, 1e-20f, -1e-20f};
    float in[N + GUARD];
    uint32_t seed = 12345;
    for (int i = 0; i < N + GUARD; i++) {
        seed = seed * 1664525u + 1013904223u;
        float r = ((float)(seed >> 8) / (float)(1 << 24) - 0.5f) * 24.0f;  // [-12, 12)
        in[i] = i % 3 == 0 ? awkward[(i / 3) % (sizeof awkward / sizeof *awkward)] : r;
    }
    for (int a = 0; a < ACTIVATION_COUNT; a++) {
        ActivationFn f = activation_kernel(a);
        int bad = 0;
        for (size_t n = 1; n <= N && !bad; n++) {
            float whole[N + GUARD], one[N + GUARD], piece[N + GUARD];
            memcpy(whole, in, sizeof whole);
            memcpy(one, in, sizeof one);
            memcpy(piece, in, sizeof piece);
            f(whole, n);
            for (size_t i = 0; i < n; i++) f(one + i, 1);
            for (size_t i = 0, k = 1; i < n; k = k % 7 + 1) {
                size_t m = n - i < k ? n - i : k;
                f(piece + i, m);
                i += m;
            }
            for (size_t i = 0; i < N + GUARD; i++) {
                uint32_t w, o, p;
                memcpy(&w, whole + i, 4);
                memcpy(&o, one + i, 4);
                memcpy(&p, piece + i, 4);
                if (w != o || w != p) {
                    CHECK(0, "%s, n %zu, [%zu] (x = %.9g): whole 0x%08x, one by one 0x%08x, in pieces 0x%08x",
                          names[a], n, i, (double)in[i], w, o, p);
                    bad = 1;
                    break;
                }
                if (i >= n && memcmp(whole + i, in + i, 4) != 0) {
                    CHECK(0, "%s, n %zu: wrote [%zu]", names[a], n, i);
                    bad = 1;
                    break;
                }
            }
        }
        CHECK(!bad, "%s: ragged lengths", names[a]);
    }
}

int main(void) {
    printf("cpu_best_isa: %s (the kernels' clone was picked from CPUID when the program started)\n",
           cpu_isa_name(cpu_best_isa()));
    test_special();
    test_ragged();
    test_accuracy();
    return check_exit("test_activation");
}
