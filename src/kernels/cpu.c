/*
 * cpu.c - see cpu.h: what this CPU runs, asked of cpuid.
 */
#include "kernels/cpu.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
// clang's __builtin_cpu_supports does not know "f16c"; CPUID leaf 1 says it.
#if defined(__clang__)
#include <cpuid.h>
static int cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#else
static int cpu_has_f16c(void) { return __builtin_cpu_supports("f16c"); }
#endif

// CPU_TARGET_AVX2's features
static int cpu_has_avx2(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}

// CPU_TARGET_AVX512's features
static int cpu_has_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && cpu_has_avx2();
}
#endif

int cpu_isa_supported(CpuIsa isa) {
    if (isa == CPU_SCALAR) return 1;
#if defined(__x86_64__)
    __builtin_cpu_init();  // idempotent; needed before main() runs constructors
    if (isa == CPU_AVX2) return cpu_has_avx2();
    if (isa == CPU_AVX512) return cpu_has_avx512();
#endif
    return 0;
}

int cpu_has_avx512_vnni(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni");
#else
    return 0;
#endif
}

CpuIsa cpu_best_isa(void) {
    if (cpu_isa_supported(CPU_AVX512)) return CPU_AVX512;
    if (cpu_isa_supported(CPU_AVX2)) return CPU_AVX2;
    return CPU_SCALAR;
}

const char *cpu_isa_name(CpuIsa isa) {
    switch (isa) {
    case CPU_SCALAR: return "scalar";
    case CPU_AVX2: return "avx2";
    case CPU_AVX512: return "avx512";
    }
    return NULL;
}

// ----------------------------------------------------------------------------
// what the CPU is

#if defined(__x86_64__)
#include <cpuid.h>

// The data and unified caches of the deterministic cache leaf (Intel's 4,
// AMD's 0x8000001D: the same layout), by level.
static void cpu_caches(unsigned leaf, CpuInfo *c) {
    for (unsigned i = 0; i < 16; i++) {
        unsigned a, b, cx, d;
        __cpuid_count(leaf, i, a, b, cx, d);
        unsigned type = a & 31, level = (a >> 5) & 7;
        if (type == 0) break;
        if (type == 2) continue;  // instructions
        long bytes = (long)(((b >> 22) & 1023) + 1) * (long)(((b >> 12) & 1023) + 1) * (long)((b & 4095) + 1) *
                     (long)(cx + 1);  // ways x partitions x line x sets
        if (level == 1) c->l1d = bytes;
        else if (level == 2) c->l2 = bytes;
        else if (level == 3) c->l3 = bytes;
    }
}
#endif

void cpu_info(CpuInfo *c) {
    memset(c, 0, sizeof *c);
    strcpy(c->vendor, "unknown");
    c->fma_bits = cpu_isa_supported(CPU_AVX512) ? 512 : cpu_isa_supported(CPU_AVX2) ? 256 : 0;
#if defined(__x86_64__)
    unsigned a, b, cx, d, top = __get_cpuid_max(0, NULL);
    if (top == 0) return;
    __cpuid(0, a, b, cx, d);
    memcpy(c->vendor, &b, 4), memcpy(c->vendor + 4, &d, 4), memcpy(c->vendor + 8, &cx, 4);
    c->vendor[12] = 0;
    __cpuid(1, a, b, cx, d);
    int family = (int)((a >> 8) & 15), model = (int)((a >> 4) & 15);
    if (family == 15) family += (int)((a >> 20) & 255);
    if (family == 6 || family >= 15) model += (int)((a >> 16) & 15) << 4;
    c->family = family, c->model = model;
    if (strcmp(c->vendor, "GenuineIntel") == 0 && top >= 4) cpu_caches(4, c);
    else if (strcmp(c->vendor, "AuthenticAMD") == 0 && __get_cpuid_max(0x80000000u, NULL) >= 0x8000001Du)
        cpu_caches(0x8000001Du, c);
#endif
}

void cpu_describe(const CpuInfo *c, char *buf, unsigned long cap) {
    const char *isa = c->fma_bits == 512 ? "avx512" : c->fma_bits == 256 ? "avx2" : "scalar";
    snprintf(buf, cap, "%s family %d model %d, %s (FMA %d-bit), L1d %ld KiB, L2 %ld KiB, L3 %ld KiB", c->vendor,
             c->family, c->model, isa, c->fma_bits, c->l1d / 1024, c->l2 / 1024, c->l3 / 1024);
}
