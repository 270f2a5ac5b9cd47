/*
 * tune.h - which variant of the matmul kernels (matmul_kernels.h) each of a
 * model's products runs, chosen by measurement on this machine and kept as
 * "wisdom" for later runs.
 *
 * Every variant gives the same bits (the canonical arithmetic), so the
 * choice changes only the speed, never an output. tune_model() times the
 * variants on the model's own products (a layer's four matrices and the
 * output layer, TUNE_ROWS rows: a prefill chunk) on the run's threads,
 * keeps the fastest of each, and stores them in
 *
 *   ${XDG_CACHE_HOME:-$HOME/.cache}/gpt/wisdom-<hash of the key>
 *
 * where the key names the CPU (cpu.h's CpuInfo: vendor, family, model, ISA,
 * cache sizes), the thread count, the model's matrix dtypes and gpt's
 * version. A later run with the same key reads the choice instead of timing.
 * A missing, corrupt or stale file (another key) is timed anew and
 * rewritten; one that cannot be written is not an error (the choice holds
 * for this run). With TUNE_OFF (GPT_TUNE=off, --tune off) nothing is timed,
 * read or written: every product runs the default variant, chosen from the
 * CPU alone (tune_default_variant), or the first variant when the CPU is
 * not one whose defaults were measured.
 */
#ifndef GPT_TUNE_H
#define GPT_TUNE_H

#include <stddef.h>
#include <stdio.h>

#include "kernels/cpu.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "base/threads.h"

typedef enum {
    TUNE_OFF,    // the default variant; no timing, no wisdom read or written
    TUNE_ON,     // the wisdom if it holds every product, else time the rest and store
    TUNE_FORCE,  // time every product again and store
} TuneMode;

// Rows of the activations the variants are timed on: a prefill chunk's
// worth of matmul groups.
enum { TUNE_ROWS = 2 * MATMUL_GROUP };

// "off", "on", "force" -> *mode: 0, or -1 for another string.
int tune_mode_parse(const char *s, TuneMode *mode);
// The mode $GPT_TUNE asks for ("off", "on", "force") into *mode: 0; dflt
// when it is unset or empty: 0; -1 (*mode dflt) for another value, which a
// front-end refuses as it refuses --tune's.
int tune_mode_from_env(TuneMode dflt, TuneMode *mode);

// The variant a CPU's kernels run for weights of dtype dt when nothing was
// measured (tuning off, or nothing to measure).
int tune_default_variant(const CpuInfo *c, CpuIsa isa, DType dt);

// What tune_model did, for --stats and the bench.
// A product per role (a layer's four matrices, the output layer) and dtype
// that the model has: a mixed model (--dtype q4 keeps some matrices Q6) has
// more than five.
enum { TUNE_PRODUCTS_MAX = 12 };
typedef struct {
    const char *name;    // "qkv", "attn_proj", "fc", "fc_proj", "logits"
    DType dtype;
    size_t K, N;
    int variant;         // the chosen one (matmul_variant_name)
    double gflops[MATMUL_VARIANTS_MAX];  // measured, best of the rounds; 0: not measured (wisdom, off)
} TuneProduct;
typedef struct {
    CpuIsa isa;
    int n_variants;
    char source[32];     // "wisdom", "measured", "default"
    char note[4400];      // why the default or why not saved ("" when nothing to say)
    char path[4096];     // the wisdom file ("" with TUNE_OFF or no cache directory)
    char key[320];
    double seconds;      // spent measuring
    int n_products;
    TuneProduct product[TUNE_PRODUCTS_MAX];
} TuneReport;

// Chooses a variant for each of m's products under mode, on pool's
// threads, into *plan (which a ForwardState takes: EngineConfig.plan), and
// says what it did in *rep. version: gpt's, part of the key. Never fails:
// whatever goes wrong (no memory, no cache directory, a bad file) leaves
// the default variant in the plan, or the measured one unsaved, and a note.
void tune_model(const Model *m, ThreadPool *pool, TuneMode mode, const char *version, MatmulPlan *plan,
                TuneReport *rep);

// One line per product: "qkv (F32 768x2304): 2x3 41.2 GFLOP/s  [1x6 39.0, 3x2 40.1 ...]",
// ending "(kept the default: none 3% faster)" where a variant measured
// faster than the one kept.
void tune_print(const TuneReport *rep, FILE *f);

#endif
