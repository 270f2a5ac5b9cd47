/*
 * fuzz_lora.c - a PEFT LoRA adapter merged at load (src/model/lora.c): the
 * input is split at the first "\n#safetensors\n" into adapter_config.json
 * (before) and adapter_model.safetensors (after); without that line all of
 * it is the safetensors file beside a config that targets every matrix at
 * rank 2. The adapter goes into a private directory and is merged into the
 * seed corpus's tiny model.bin (tests/fuzz/corpus/model/f32: 1 layer,
 * n_embd 4, n_inner 16), as stored and converted to a dtype the input's
 * bytes pick (fuzz_common.h): a refusal must have a message, and a load
 * that works must hold every weight inside its block; and it is read for
 * run time (lora_weights_load), where a refusal must have a message too.
 *
 * The safetensors part's length is filled in as fuzz_safetensors.c's is
 * (fuzz_write_safetensors, fuzz_common.h). An input that begins "GGUF" is
 * a llama.cpp GGUF LoRA file (gguf.c's gguf_lora_read, lora.c), written
 * whole as adapter.gguf.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "model/lora.h"

static const char SEPARATOR[] = "\n#safetensors\n";
static const char DEFAULT_CONFIG[] =
    "{\"peft_type\": \"LORA\", \"r\": 2, \"lora_alpha\": 4, \"target_modules\": [\"c_attn\", \"c_proj\", \"c_fc\"], "
    "\"fan_in_fan_out\": true, \"bias\": \"none\"}\n";
// the base, from the seed corpus (read once, written into the private directory)
static const char BASE_SEED[] = "tests/fuzz/corpus/model/f32";

static char base_path[1024];

static void write_base(void) {
    FILE *f = fopen(BASE_SEED, "rb");
    if (!f) fuzz_fail("%s: %s (run from the repository root)", BASE_SEED, strerror(errno));
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    fuzz_write(base_path, sizeof base_path, "base.bin", buf, n);
}

// One load of the base with the adapter at path; a refusal needs a message.
static void load_with(const LoraRequest *req, int dtype, const uint8_t *data, size_t size) {
    Model m;
    GptError err = {{0}};
    WeightOptions o = {.matrix_dtype = dtype, .lora = req, .n_lora = 1};
    if (model_load_with(&m, base_path, &o, &err) != 0) {
        if (!err.msg[0]) fuzz_fail("a load with the adapter failed without a message");
        if (fuzz_verbose()) fprintf(stderr, "load (dtype %d): %s\n", dtype, err.msg);
        model_free(&m);
        return;
    }
    if (fuzz_verbose()) fprintf(stderr, "load (dtype %d): ok\n", dtype);
    fuzz_check_model(&m, data, size);
    model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!base_path[0]) write_base();
    char cfg[1024], st[1024];
    const uint8_t *sep = fuzz_find(data, size, SEPARATOR);
    if (size >= 4 && !memcmp(data, "GGUF", 4)) {
        fuzz_write(st, sizeof st, "adapter.gguf", data, size);
    } else if (sep) {
        fuzz_write(cfg, sizeof cfg, "adapter_config.json", data, (size_t)(sep - data));
        size_t skip = (size_t)(sep - data) + strlen(SEPARATOR);
        fuzz_write_safetensors(st, sizeof st, "adapter_model.safetensors", data + skip, size - skip);
    } else {
        fuzz_write(cfg, sizeof cfg, "adapter_config.json", DEFAULT_CONFIG, strlen(DEFAULT_CONFIG));
        fuzz_write_safetensors(st, sizeof st, "adapter_model.safetensors", data, size);
    }
    unsigned sum = 0;
    for (size_t i = 0; i < size; i++) sum += data[i];
    LoraRequest req = {.path = st, .scale = (sum & 1) ? -0.5 : 1.0};
    load_with(&req, -1, data, size);
    load_with(&req, (int)(sum % DTYPE_COUNT), data, size);
    // read for run time (gpt serve --lora NAME=PATH): a refusal has a message
    static Model base;
    static int base_loaded;
    GptError err = {{0}};
    if (!base_loaded && model_load(&base, base_path, &err) != 0) fuzz_fail("the base: %s", err.msg);
    base_loaded = 1;
    LoraWeights w;
    if (lora_weights_load(&w, &req, &base.config, &err) != 0 && !err.msg[0])
        fuzz_fail("a run-time read of the adapter failed without a message");
    lora_weights_free(&w);
    return 0;
}
