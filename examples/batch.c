/*
 * batch.c - many prompts at once through gpt's continuous-batching
 * scheduler: each prompt (a line of stdin) gets its own seed (SEED, SEED +
 * 1, ...), all decode together, and each answer is printed on its line as
 * `gpt -m MODEL -p LINE -s SEED+i -n N` prints it (newlines as \n).
 *
 *     cc batch.c $(pkg-config --cflags --libs gpt) -o batch
 *     printf 'And it came to pass\nThe king said\n' | ./batch models/demo.bin 1 12
 */
#include <gpt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PROMPTS = 256 };

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL SEED MAX_TOKENS < prompts\n", argv[0]);
        return 2;
    }
    static char lines[MAX_PROMPTS][1024];
    gpt_settings *settings[MAX_PROMPTS] = {0};
    size_t n = 0;
    for (; n < MAX_PROMPTS && fgets(lines[n], sizeof lines[n], stdin); n++) lines[n][strcspn(lines[n], "\n")] = '\0';
    gpt_err err = {0};
    gpt_model *model = NULL;
    gpt_batch *batch = NULL;
    int rc = 1;
    if (gpt_model_open(argv[1], NULL, &model, &err) != GPT_OK || gpt_batch_new(model, 16, &batch, &err) != GPT_OK)
        goto done;
    for (size_t i = 0; i < n; i++) {
        char seed[32];
        snprintf(seed, sizeof seed, "%llu", strtoull(argv[2], NULL, 10) + i);
        if (!(settings[i] = gpt_settings_new()) || gpt_settings_set(settings[i], "seed", seed, &err) != GPT_OK ||
            gpt_settings_set(settings[i], "max_tokens", argv[3], &err) != GPT_OK ||
            gpt_batch_add(batch, lines[i], settings[i], NULL, NULL, NULL, &err) != GPT_OK)
            goto done;
    }
    if (gpt_batch_run(batch, &err) != GPT_OK) goto done;
    for (size_t i = 0; i < n; i++) {
        const gpt_result *r = gpt_batch_result(batch, i, &err);
        if (!r) goto done;
        for (const char *t = gpt_result_text(r, NULL); *t; t++) *t == '\n' ? fputs("\\n", stdout) : putchar(*t);
        putchar('\n');
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "batch: %s\n", err.message[0] ? err.message : "out of memory");
    gpt_batch_free(batch);
    for (size_t i = 0; i < n; i++) gpt_settings_free(settings[i]);
    gpt_model_close(model);
    return rc;
}
