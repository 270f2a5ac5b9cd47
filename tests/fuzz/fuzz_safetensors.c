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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char cfg[1024], st[1024];
    const uint8_t *sep = fuzz_find(data, size, SEPARATOR);
    if (sep) {
        size_t n_cfg = (size_t)(sep - data), skip = n_cfg + sizeof SEPARATOR - 1;
        fuzz_write(cfg, sizeof cfg, "config.json", data, n_cfg);
        fuzz_write_safetensors(st, sizeof st, "model.safetensors", data + skip, size - skip);
    } else {
        fuzz_write(cfg, sizeof cfg, "config.json", DEFAULT_CONFIG, sizeof DEFAULT_CONFIG - 1);
        fuzz_write_safetensors(st, sizeof st, "model.safetensors", data, size);
    }
    fuzz_load_model(fuzz_dir(), data, size);
    return 0;
}
