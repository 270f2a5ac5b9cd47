/*
 * generate.c - gpt's C API in one screen: open a model, set a seed, a
 * temperature and a length, and print the continuation of a prompt as it
 * is generated. Its output is `gpt -m MODEL -p PROMPT -s SEED -n N --temp T`'s.
 *
 *     cc generate.c $(pkg-config --cflags --libs gpt) -o generate
 *     ./generate models/demo.bin "And it came to pass" 2 12 0.8
 */
#include <gpt.h>
#include <stdio.h>

// Each step's new text, as it comes; 0: go on.
static int print_piece(void *user_data, const char *text, size_t len, int32_t token) {
    (void)user_data;
    (void)token;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s MODEL PROMPT SEED MAX_TOKENS TEMPERATURE\n", argv[0]);
        return 2;
    }
    gpt_err err;
    gpt_model *model = NULL;
    gpt_settings *settings = gpt_settings_new();
    gpt_result *result = NULL;
    int rc = 1;
    if (!settings) {
        fprintf(stderr, "generate: out of memory\n");
        return 1;
    }
    // each setting by its JSON name, its value as JSON text
    if (gpt_settings_set(settings, "seed", argv[3], &err) != GPT_OK ||
        gpt_settings_set(settings, "max_tokens", argv[4], &err) != GPT_OK ||
        gpt_settings_set(settings, "temperature", argv[5], &err) != GPT_OK ||
        gpt_model_open(argv[1], NULL, &model, &err) != GPT_OK ||
        gpt_generate(model, argv[2], settings, print_piece, NULL, &result, &err) != GPT_OK) {
        fprintf(stderr, "generate: %s\n", err.message);
        goto done;
    }
    size_t n;
    gpt_result_tokens(result, &n);
    fprintf(stderr, "generate: %zu tokens, stopped by %s, seed %llu\n", n, gpt_result_stop_reason(result),
            (unsigned long long)gpt_result_seed(result));
    rc = 0;
done:
    gpt_result_free(result);
    gpt_settings_free(settings);
    gpt_model_close(model);
    return rc;
}
