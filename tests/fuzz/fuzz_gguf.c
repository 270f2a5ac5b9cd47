/*
 * fuzz_gguf.c - llama.cpp's GGUF files of GPT-2 models (src/model/gguf.c):
 * the whole input is the file. It is loaded (model_load), checked (every
 * tensor read whole; a stored tokenizer's round trip), inspected
 * (model_inspect, every listed tensor inside the file), and loaded again
 * with its matrices converted (fuzz_common.h), which takes the staging
 * path that is freed after the copy rather than kept. The fuzz build reads
 * the file into a heap copy of exactly its size, so a read past its end is
 * an AddressSanitizer report.
 *
 * The seeds (corpus/gguf/, written by tests/gguf_write.py seeds) are tiny
 * models in every type gguf.c reads, versions 2 and 3, other alignments,
 * an untied output, and one with a 263-token tokenizer.
 */
#include <stdint.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024];
    fuzz_write(path, sizeof path, "model.gguf", data, size);
    fuzz_load_model(path, data, size);
    return 0;
}
