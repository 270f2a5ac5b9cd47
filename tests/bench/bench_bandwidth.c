/*
 * bench_bandwidth.c - the memory read bandwidth now, on 1 and 2 threads: the
 * read loop of bench_util.h over 1 GiB, best of 3 passes each; and, given a
 * model, the bound of a decode step built as gpt builds it.
 *
 *   bench_bandwidth          ->  "read bandwidth 1 thread 27.9 GB/s, 2 threads 54.1 GB/s"
 *   bench_bandwidth MODEL    ->  that, then per thread count a line:
 *       "fork-join read, 2 threads: 49 products, 51.2 GB/s = 103.4 tok/s"
 *
 * The fork-join read goes over the model's matrices in the order a decode
 * step multiplies by them (each layer's four, then wte for the logits),
 * each cut into one part per thread on gpt's own pool and joined, as its
 * matmul does with one row: what a decode could reach if its kernels did
 * nothing but read, with its joins (best of 5 passes). Against the plain
 * loop it shows what the joins cost; against a decode, what the rest does.
 *
 * On a shared VM the 2-thread figures change from minute to minute (on a
 * 2-vCPU Zen 4, 34 or 54 GB/s, by where the host runs the vCPUs), and a
 * decode of one sequence follows them: make bench measures them beside
 * each decode it holds against them, not once at the start.
 */
#include "bench_util.h"
#include "model/loader.h"
#include "model/model.h"
#include "base/threads.h"

typedef struct {
    const unsigned char *data;
    size_t bytes;
    uint64_t sum[64];  // one a part (at most 64 threads)
} Halves;

// Part `part` of n_parts of the matrix: 4 independent sums, as read_job.
static void read_part(void *arg, int part, int n_parts, int thread) {
    (void)thread;
    Halves *h = arg;
    size_t words = h->bytes / 8, begin, end;
    thread_range(words, 8, part, n_parts, &begin, &end);
    const uint64_t *w = (const uint64_t *)h->data;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = begin; i + 4 <= end; i += 4) {
        a += w[i];
        b += w[i + 1];
        c += w[i + 2];
        d += w[i + 3];
    }
    h->sum[part] = a ^ b ^ c ^ d;
}

int main(int argc, char **argv) {
    size_t n_words = ((size_t)1 << 30) / sizeof(uint64_t);
    uint64_t *buf = malloc(n_words * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "bench_bandwidth: out of memory for 1 GiB\n");
        return 1;
    }
    for (size_t i = 0; i < n_words; i++) buf[i] = i;
    double one = read_bandwidth(buf, n_words, 1, 3), two = read_bandwidth(buf, n_words, 2, 3);
    printf("read bandwidth 1 thread %.1f GB/s, 2 threads %.1f GB/s\n", one, two);
    free(buf);
    if (argc < 2) return 0;

    GptError err = {{0}};
    Model m;
    if (model_load(&m, argv[1], &err) != 0) {
        fprintf(stderr, "bench_bandwidth: %s\n", err.msg);
        return 1;
    }
    // the matrices in a decode step's order: the layers' (the table's
    // order), then the embedding (wte, the tied output layer)
    size_t n_tensors = gpt2_n_tensors(&m.config), n_products = 0, embedding = n_tensors;
    Halves *products = calloc(n_tensors, sizeof *products);
    for (size_t i = 0; products && i < n_tensors; i++) {
        TensorSpec spec;
        gpt2_tensor_spec(&m.config, i, &spec);
        if (spec.kind == TENSOR_EMBEDDING && spec.dims[0] == (size_t)m.config.vocab_size) embedding = i;
        if (spec.kind != TENSOR_MATRIX) continue;
        products[n_products++] = (Halves){(const unsigned char *)model_tensor(&m, i).data, model_tensor_bytes(&m, i), {0}};
    }
    if (products && embedding < n_tensors)
        products[n_products++] =
            (Halves){(const unsigned char *)model_tensor(&m, embedding).data, model_tensor_bytes(&m, embedding), {0}};
    size_t bytes = 0;
    for (size_t i = 0; products && i < n_products; i++) bytes += products[i].bytes;
    for (int t = 1; products && t <= 2; t++) {
        ThreadPool *pool = threadpool_create(t, &err);
        if (!pool) break;
        double best = 1e30;
        uint64_t sink = 0;
        for (int pass = 0; pass < 6; pass++) {  // the first warms the pool and the mapping
            double t0 = now_seconds();
            for (size_t i = 0; i < n_products; i++) {
                threadpool_run_parts(pool, read_part, &products[i], t);
                sink ^= products[i].sum[0];
            }
            double dt = now_seconds() - t0;
            if (pass > 0 && dt < best) best = dt;
        }
        if (sink == 42) printf(" ");  // keep the sums alive
        printf("fork-join read, %d thread%s: %zu products, %.1f MB, %.1f GB/s = %.1f tok/s\n", t, t > 1 ? "s" : "",
               n_products, (double)bytes / 1e6, (double)bytes / best / 1e9, 1.0 / best);
        threadpool_free(pool);
    }
    free(products);
    model_free(&m);
    return 0;
}
