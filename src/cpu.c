/*
 * cpu.c - see cpu.h: what this CPU runs, asked of cpuid.
 */
#include "cpu.h"

#include <stddef.h>

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
