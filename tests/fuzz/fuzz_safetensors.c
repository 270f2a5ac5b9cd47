/*
 * fuzz_safetensors.c - a Hugging Face directory: the input is split at the
 * first "\n#safetensors\n" into config.json (before) and model.safetensors
 * (after); without that line all of it is model.safetensors beside a valid
 * config.json of the seed corpus's tiny shape. Both go into a private
 * directory, which is then loaded (model_load), checked (every tensor read
 * whole), inspected (model_inspect, every listed tensor inside the file),
 * and loaded again with its matrices converted (fuzz_common.h).
 *
 * A safetensors part whose 8-byte header length is all 0xFF bytes gets its
 * length filled in: the JSON header runs to the first NUL byte, which is
 * dropped, and is padded with spaces to a multiple of 8 bytes (as writers
 * do). Mutations that grow or shrink the JSON then still meet a matching
 * length; the seeds hold both forms.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

static const char SEPARATOR[] = "\n#safetensors\n";
static const char DEFAULT_CONFIG[] =
    "{\"activation_function\": \"gelu_new\", \"model_type\": \"gpt2\", \"layer_norm_epsilon\": 1e-05, "
    "\"n_ctx\": 8, \"n_embd\": 4, \"n_head\": 2, \"n_inner\": 16, \"n_layer\": 1, \"n_positions\": 8, "
    "\"vocab_size\": 16}\n";

// Writes model.safetensors from st[0..n), filling in the length as above.
static void write_safetensors(char *path, size_t path_n, const uint8_t *st, size_t n) {
    static const uint8_t AUTO[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    const uint8_t *nul = n >= 8 && !memcmp(st, AUTO, 8) ? memchr(st + 8, 0, n - 8) : NULL;
    if (!nul) {
        fuzz_write(path, path_n, "model.safetensors", st, n);
        return;
    }
    size_t json = (size_t)(nul - st) - 8, hlen = (json + 7) / 8 * 8, rest = n - (size_t)(nul + 1 - st);
    uint8_t *buf = malloc(8 + hlen + rest);
    if (!buf) fuzz_fail("out of memory");
    for (int k = 0; k < 8; k++) buf[k] = (uint8_t)((uint64_t)hlen >> (8 * k));
    memcpy(buf + 8, st + 8, json);
    memset(buf + 8 + json, ' ', hlen - json);
    memcpy(buf + 8 + hlen, nul + 1, rest);
    fuzz_write(path, path_n, "model.safetensors", buf, 8 + hlen + rest);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char cfg[1024], st[1024];
    const uint8_t *sep = fuzz_find(data, size, SEPARATOR);
    if (sep) {
        size_t n_cfg = (size_t)(sep - data), skip = n_cfg + sizeof SEPARATOR - 1;
        fuzz_write(cfg, sizeof cfg, "config.json", data, n_cfg);
        write_safetensors(st, sizeof st, data + skip, size - skip);
    } else {
        fuzz_write(cfg, sizeof cfg, "config.json", DEFAULT_CONFIG, sizeof DEFAULT_CONFIG - 1);
        write_safetensors(st, sizeof st, data, size);
    }
    fuzz_load_model(fuzz_dir(), data, size);
    return 0;
}
