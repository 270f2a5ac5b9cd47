/*
 * fuzz_modelbin.c - gpt's one-file model.bin: the input is the file. It is
 * loaded (model_load), checked (every tensor read whole, the stored
 * tokenizer's round trip), inspected (model_inspect, every listed tensor
 * inside the file), and loaded again with its matrices converted
 * (fuzz_common.h). The fuzz build reads the file into a heap copy of exactly
 * its size, so a read past its end is an AddressSanitizer report.
 */
#include <stdint.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024];
    fuzz_write(path, sizeof path, "model.bin", data, size);
    fuzz_load_model(path, data, size);
    return 0;
}
