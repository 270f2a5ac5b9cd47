/*
 * bytes.h - little-endian integers in byte buffers, alignment arithmetic and
 * shape strings: the small helpers every file format needs. Header-only.
 *
 * The file formats gpt reads (safetensors, model.bin, llm.c) are all
 * little-endian; these read and write them byte by byte, so they work on any
 * host and on unaligned data.
 */
#ifndef GPT_BYTES_H
#define GPT_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

static inline uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t rd64(const unsigned char *p) {
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static inline void wr32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (unsigned char)(v >> (8 * k));
}

static inline void wr64(unsigned char *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

// x rounded up to a multiple of a (a > 0).
static inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
static inline size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// [off, off + len) lies inside [0, limit), computed so that nothing overflows.
static inline int range_inside(uint64_t off, uint64_t len, uint64_t limit) {
    return off <= limit && len <= limit - off;
}

// A shape as "[768,2304]" (sep ",", as error messages print it) or
// "[768, 2304]" (sep ", ").
static inline void shape_string(char *buf, size_t n, const uint64_t *dims, int ndim, const char *sep) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%llu", d ? sep : "", (unsigned long long)dims[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

#endif
