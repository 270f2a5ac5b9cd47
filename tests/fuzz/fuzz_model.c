/*
 * fuzz_model.c - the one-file model formats whose whole input is the file:
 * gpt's model.bin and llm.c's gpt2_124M.bin (version 3, float32), told
 * apart by their magic as model_load does it (the seeds hold both; llm.c's
 * are tiny checkpoints, so that mutations of its 1024-byte header meet a
 * file of the size it asks for). The file is loaded (model_load), checked
 * (every tensor read whole; a model.bin's stored tokenizer's round trip),
 * inspected (model_inspect, every listed tensor inside the file), and loaded
 * again with its matrices converted (fuzz_common.h). The fuzz build reads
 * the file into a heap copy of exactly its size, so a read past its end is
 * an AddressSanitizer report.
 */
#include <stdint.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024];
    fuzz_write(path, sizeof path, "model.bin", data, size);
    fuzz_load_model(path, data, size);
    return 0;
}
