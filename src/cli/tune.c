/*
 * tune.c - gpt tune: measures the matmul kernels' variants for a model on
 * this machine and saves the choice in the wisdom cache (kernels/tune.h),
 * as any run with --tune force does, without generating anything; the
 * report (the same as --stats' "tuning:" block) goes to stdout.
 *
 * The choice is kept per CPU, model dtypes, threads and gpt version: tune
 * with the -m, --dtype and -t the runs will use. Tuning never changes an
 * output, only the speed. A choice it cannot save is its failure (exit 1).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char *tune_usage =
    "usage: gpt tune [options]      measure the matmul kernels' variants and save the choice\n"
    "  -m, --model PATH        the model, as gpt's -m (default: $GPT_MODEL, else gpt's search)\n"
    "      --dtype T           its matrices converted at load, as gpt's --dtype: f32, f16,\n"
    "                          bf16, q8, q6, q4 or q4-pure (default: as the file stores them)\n"
    "  -t, --threads N         threads (default: the number of cores)\n"
    "  -q, --quiet             no notes on stderr (the demo model's line)\n"
    "  -h, --help              this help\n"
    "What any run does when its tuning mode is force: each product of the model timed\n"
    "(about a second), its fastest variant kept when it is at least 3% faster than the\n"
    "CPU's default (closer is timing noise: the default is kept, and the table says so),\n"
    "the choice saved in ~/.cache/gpt ($XDG_CACHE_HOME/gpt) for runs with the same CPU,\n"
    "model dtypes and threads, and printed on stdout.\n"
    "Outputs never change. Exit codes: 0 success, 1 load error or the choice not saved (the\n"
    "cache directory not writable: why on stderr), 2 usage error.\n";

int run_tune(int argc, char **argv) {
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'}, {"dtype", required_argument, 0, 'd'},
        {"threads", required_argument, 0, 't'}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    ModelOptions mo = {.weights = {.matrix_dtype = -1}, .threads = cores > 0 ? cores : 1, .tune = TUNE_FORCE,
                       .version = GPT_VERSION};
    opterr = 0;
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, ":m:t:qh", longs, NULL)) != -1;) {
        switch (c) {
        case 'h':
            return out_write(tune_usage, strlen(tune_usage)) || out_flush() ? EXIT_RUNTIME : EXIT_OK;
        case 'm': mo.model_path = optarg; break;
        case 'q': mo.quiet = 1; break;
        case 'd':
            if (weight_options_from_name(optarg, &mo.weights) != 0)
                return usage_error("tune", "--dtype %s: must be " WEIGHT_DTYPE_NAMES, optarg);
            break;
        case 't':
            if (parse_long(optarg, &mo.threads) != 0 || mo.threads < 1 || mo.threads > 1024)
                return usage_error("tune", "-t %s: must be an integer in [1, 1024]", optarg);
            break;
        case ':': return usage_error("tune", "%s needs a value", argv[optind - 1]);
        default: return usage_error("tune", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return usage_error("tune", "unexpected argument '%s'", argv[optind]);
    Session s;
    int rc = session_open_model(&s, &mo);
    if (rc != EXIT_OK) return rc;
    rc = out_printf("model:      %s (threads %ld)\n", s.model_path, mo.threads) || print_tuning(stdout, &s.tune) ||
                 out_flush()
             ? EXIT_RUNTIME
             : EXIT_OK;
    // the saved choice is what gpt tune is for: a choice measured and not
    // saved (its note says why), or never measured (no memory), is its
    // failure; with one variant on this CPU there is nothing to choose
    const TuneReport *t = &s.tune;
    if ((!strcmp(t->source, "measured") && t->note[0]) || (!strcmp(t->source, "default") && t->n_variants > 1)) {
        rc = runtime_error("tune", "%s", t->note[0] ? t->note : "the variants were not measured");
    }
    session_close(&s);
    return rc;
}
