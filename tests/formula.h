/*
 * formula.h - the hash of tests/fixtures/FORMULA.md: the uniform number in
 * [-1, 1) behind element i of a tensor of the deterministic test
 * checkpoints. tests/gen_checkpoint.c writes the checkpoints with it (their
 * data checked against the published sha256 sums); tests/test_model_load.c
 * computes the values a loader must read with it, the scale of each tensor
 * worked out there on its own. Header-only.
 */
#ifndef GPT_TEST_FORMULA_H
#define GPT_TEST_FORMULA_H

#include <stdint.h>

// FNV-1a, 64 bits, of a tensor's unprefixed name ("h.0.attn.c_attn.weight").
static inline uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001B3ull;
    }
    return h;
}

static inline uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// u of element i of the tensor whose name hashes to h: the top 24 bits of
// splitmix64(h ^ i) over 2^23, less 1; exact in float32.
static inline float formula_uniform(uint64_t h, uint64_t i) {
    return (float)(splitmix64(h ^ i) >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

#endif
