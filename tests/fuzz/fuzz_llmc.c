/*
 * fuzz_llmc.c - llm.c's gpt2_124M.bin (version 3, float32): the input is
 * the file. It is loaded (model_load), checked (every tensor read whole),
 * inspected (model_inspect, every listed tensor inside the file), and loaded
 * again with its matrices converted (fuzz_common.h). The seeds are tiny llm.c
 * checkpoints, so that mutations of the 1024-byte header meet a file of the
 * size it asks for.
 */
#include <stdint.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024];
    fuzz_write(path, sizeof path, "gpt2_124M.bin", data, size);
    fuzz_load_model(path, data, size);
    return 0;
}
