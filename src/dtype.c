/* dtype.c - see dtype.h. */
#include "dtype.h"

#include <string.h>

const char *dtype_name(DType dt) {
    switch (dt) {
    case DTYPE_F32: return "F32";
    case DTYPE_F16: return "F16";
    case DTYPE_BF16: return "BF16";
    }
    return NULL;
}

size_t dtype_size(DType dt) {
    switch (dt) {
    case DTYPE_F32: return 4;
    case DTYPE_F16:
    case DTYPE_BF16: return 2;
    }
    return 0;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13);  // inf, nan
    } else if (exp != 0) {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {
        // subnormal half: normalise into a float32 exponent
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3FFu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
