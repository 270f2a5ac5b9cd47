/*
 * cpu.h - the instruction sets gpt has fast paths for: which ones this CPU
 * runs, and the target strings every fast path is compiled with. The one
 * place that knows either; matmul, attention, forward and the sampler ask
 * here.
 *
 * Where the versions of an operation live (one rule for all of them):
 *
 *   - The plain C version is the definition and lives in the operation's
 *     own file (matmul_scalar.c, attention.c, sampler.c). It runs
 *     everywhere, and the tests hold every other version to it.
 *   - A version written by hand in one ISA's intrinsics lives in a file of
 *     its own, named for the operation and the ISA (matmul_avx2.c,
 *     attention_avx512.c, sampler_avx2.c), every function in it marked
 *     TARGET_AVX2 or TARGET_AVX512, so the file builds with plain -O2 for
 *     baseline x86-64; elsewhere it compiles to nothing. The operation's
 *     _kernels.h declares them; the operation's file picks one at run time
 *     from the CpuIsa its caller found once with cpu_best_isa().
 *   - A loop written once in plain C that the compiler vectorises by itself
 *     (GELU, argmax) is not a hand-written version: it carries CPU_CLONES,
 *     and the compiler builds it for each ISA and picks one when the program
 *     starts.
 *
 * Shared vector maths (exp_approx in every width) is in vecmath.h.
 */
#ifndef GPT_CPU_H
#define GPT_CPU_H

// The instruction sets there are kernels for, slowest first.
typedef enum {
    CPU_SCALAR = 0,  // portable C
    CPU_AVX2 = 1,    // AVX2 + FMA + F16C
    CPU_AVX512 = 2,  // AVX-512 F/BW/VL/DQ (+ FMA, F16C)
} CpuIsa;

enum { CPU_ISA_COUNT = 3 };

// Whether this CPU (and this build) runs isa's code: asks the CPU every
// call and remembers nothing (cpuid: microseconds in a VM, so callers keep
// the answer). CPU_SCALAR is always supported; off x86-64 the others never
// are.
int cpu_isa_supported(CpuIsa isa);
// Whether the CPU has AVX512-VNNI (Ice Lake, Zen 4; not Skylake-X), which
// matmul's CPU_AVX512 Q4 kernel then multiplies with (vpdpbusd; the same
// bits as without). Only this bit: ask it where CPU_AVX512 is supported.
// A few loads (no cpuid), so a kernel may ask every call.
int cpu_has_avx512_vnni(void);
// The fastest supported isa.
CpuIsa cpu_best_isa(void);
// "scalar", "avx2", "avx512"; NULL for an unknown code.
const char *cpu_isa_name(CpuIsa isa);

// What the CPU is, from CPUID, for tune.h's wisdom key and the bench's CPU
// line: the vendor string, family and model (with their extended bits, as
// the vendors document), the widest FMA the kernels use (bits: 512 AVX-512,
// 256 AVX2, 0 none) and the data cache sizes in bytes (0 where CPUID does
// not say: another vendor, off x86-64).
typedef struct {
    char vendor[13];
    int family, model;
    int fma_bits;
    long l1d, l2, l3;
} CpuInfo;
void cpu_info(CpuInfo *c);
// "AuthenticAMD family 25 model 1, avx2 (FMA 256-bit), L1d 32 KiB, L2 512 KiB, L3 32768 KiB" into buf.
void cpu_describe(const CpuInfo *c, char *buf, unsigned long cap);

// What a function of each ISA is compiled for: exactly the features
// cpu_isa_supported() checks, so a function so marked runs wherever that
// says yes.
#define CPU_TARGET_AVX2 "avx2,fma,f16c"
#define CPU_TARGET_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,f16c,fma"
#define TARGET_AVX2 __attribute__((target(CPU_TARGET_AVX2)))
#define TARGET_AVX512 __attribute__((target(CPU_TARGET_AVX512)))
// A small helper of a kernel: inlined into its caller, which has the target.
#define INLINE_AVX2 static inline __attribute__((always_inline)) TARGET_AVX2
#define INLINE_AVX512 static inline __attribute__((always_inline)) TARGET_AVX512

// A plain C loop compiled for x86-64-v4 (AVX-512), v3 (AVX2) and the
// baseline, one chosen when the program starts. Element by element, the
// versions give the same bits (no -ffast-math, no contraction). Not under
// AddressSanitizer (the clones' resolver runs before its runtime is set
// up), and nothing off x86-64.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CPU_CLONES
#endif

#endif
