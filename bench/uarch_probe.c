/* Issue rates, on one core, of the vector instructions that the depthwise convolution and
 * GRU kernels lean on: vector loads and stores (to the same addresses, and as a stream),
 * fused multiply-adds, divisions, and a multiply next to vblendvps, vandps or vmaxps. They explain
 * why a kernel runs as it does on a machine kind (docs/performance.md, "What bounds tcn's
 * depthwise kernels at AVX2"): on the AMD Zen 5 guest, for example, vector loads issue at
 * two per cycle whether 256 or 512 bits wide, so a kernel bound by its loads moves half
 * the bytes per cycle at AVX2.
 *
 *   ./uarch_probe        prints one JSON object (bench/simd_bench.sh prints it too)
 *
 * The clock is estimated from a chain of dependent integer adds (one per cycle on every
 * x86-64 core); every figure is the best of 5 runs of 20 M loop iterations (about 3 s in
 * all), from wall time, so pin the process (taskset) on a quiet core. x86-64 with GCC or
 * Clang only (inline assembly) and a processor with AVX2 and FMA (else it prints an error
 * object); the 512-bit rows run only where the processor has AVX-512F (else they print 0). */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define ITERS 20000000L
static float buf[1024] __attribute__((aligned(64))); /* 4 KB: the loads read its start, the stream writes all of it */

/* Best-of-5 seconds of one loop body (an asm block of ITERS iterations). */
#define BEST(secs, ASM)                                                                                                \
    do {                                                                                                               \
        secs = 1e30;                                                                                                   \
        for (int r_ = 0; r_ < 5; r_++) {                                                                               \
            const double t0_ = now();                                                                                  \
            ASM;                                                                                                       \
            const double t_ = now() - t0_;                                                                             \
            if (t_ < secs) secs = t_;                                                                                  \
        }                                                                                                              \
    } while (0)

/* ITERS iterations of body in one asm block, after setting ymm13 = 1.5, ymm14 = 3.0, ymm15 =
 * all-ones (a comparison's mask) and ymm0-11 = 0, then prologue (the 512-bit division row
 * broadcasts into zmm13/14 there). */
#define LOOP(body, ...) LOOP_AFTER("", body, __VA_ARGS__)
#define LOOP_AFTER(prologue, body, ...)                                                                                \
    __asm__ volatile(SETUP_ASM prologue "mov %0, %%rcx\n1:\n" body "dec %%rcx\njnz 1b\n"                            \
                     :                                                                                                 \
                     : "r"(ITERS), "r"(buf), "m"(one_half), "m"(three)                                                 \
                     : "rcx", "memory", __VA_ARGS__)
#define YMM_CLOBBERS                                                                                                   \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",        \
        "xmm13", "xmm14", "xmm15"

/* 12 instructions OP into ymm0-11 (from ymm13 and ymm14 or a memory operand; the fused
 * multiply-adds also read their destination: 12 independent chains). */
#define R12(op)                                                                                                        \
    op "%%ymm0\n" op "%%ymm1\n" op "%%ymm2\n" op "%%ymm3\n" op "%%ymm4\n" op "%%ymm5\n" op "%%ymm6\n" op "%%ymm7\n" op \
       "%%ymm8\n" op "%%ymm9\n" op "%%ymm10\n" op "%%ymm11\n"
/* 6 pairs: a multiply into ymm0-5 and OP2 into ymm6-11 */
#define MIX6(op2)                                                                                                      \
    "vmulps %%ymm13, %%ymm14, %%ymm0\n" op2 "%%ymm6\n"                                                                 \
    "vmulps %%ymm13, %%ymm14, %%ymm1\n" op2 "%%ymm7\n"                                                                 \
    "vmulps %%ymm13, %%ymm14, %%ymm2\n" op2 "%%ymm8\n"                                                                 \
    "vmulps %%ymm13, %%ymm14, %%ymm3\n" op2 "%%ymm9\n"                                                                 \
    "vmulps %%ymm13, %%ymm14, %%ymm4\n" op2 "%%ymm10\n"                                                                \
    "vmulps %%ymm13, %%ymm14, %%ymm5\n" op2 "%%ymm11\n"

#define SETUP_ASM                                                                                                      \
    "vbroadcastss %2, %%ymm13\nvbroadcastss %3, %%ymm14\nvpcmpeqd %%ymm15, %%ymm15, %%ymm15\n"                         \
    "vxorps %%ymm0, %%ymm0, %%ymm0\nvmovaps %%ymm0, %%ymm1\nvmovaps %%ymm0, %%ymm2\nvmovaps %%ymm0, %%ymm3\n"         \
    "vmovaps %%ymm0, %%ymm4\nvmovaps %%ymm0, %%ymm5\nvmovaps %%ymm0, %%ymm6\nvmovaps %%ymm0, %%ymm7\n"                \
    "vmovaps %%ymm0, %%ymm8\nvmovaps %%ymm0, %%ymm9\nvmovaps %%ymm0, %%ymm10\nvmovaps %%ymm0, %%ymm11\n"

static const float one_half = 1.5f, three = 3.0f;

int main(void) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        printf("{\"error\": \"uarch_probe needs AVX2 and FMA\"}\n");
        return 0;
    }
    double s, hz;
    /* clock: 4 dependent adds per iteration */
    BEST(s, __asm__ volatile("mov %0, %%rcx\nxor %%eax, %%eax\n1:\nadd $1, %%rax\nadd $1, %%rax\nadd $1, %%rax\n"
                             "add $1, %%rax\ndec %%rcx\njnz 1b\n"
                             :
                             : "r"(ITERS)
                             : "rcx", "rax"));
    hz = 4.0 * (double)ITERS / s;
    const double cyc = hz / (double)ITERS; /* cycles per iteration = seconds * cyc */
    const int avx512 = __builtin_cpu_supports("avx512f");
    double ld256, ld512 = 0, st256, st256s, fma256, div256, div512 = 0, mulblend, muland, mulmax;
    BEST(s, LOOP(R12("vmovups 64(%1), "), YMM_CLOBBERS));
    ld256 = 12.0 / (s * cyc);
    if (avx512) {
        BEST(s, LOOP("vmovups 0(%1), %%zmm0\nvmovups 64(%1), %%zmm1\nvmovups 128(%1), %%zmm2\n"
                     "vmovups 192(%1), %%zmm3\nvmovups 256(%1), %%zmm4\nvmovups 320(%1), %%zmm5\n"
                     "vmovups 384(%1), %%zmm6\nvmovups 448(%1), %%zmm7\nvmovups 512(%1), %%zmm8\n"
                     "vmovups 576(%1), %%zmm9\nvmovups 640(%1), %%zmm10\nvmovups 704(%1), %%zmm11\n",
                     YMM_CLOBBERS));
        ld512 = 12.0 / (s * cyc);
    }
    /* the same 8 addresses every iteration (stores to one line may merge), then a 4 KB
     * stream (16 iterations of 8 stores, 256 bytes apart), as a kernel writes its output */
    BEST(s, LOOP("vmovups %%ymm13, 0(%1)\nvmovups %%ymm13, 32(%1)\nvmovups %%ymm13, 64(%1)\n"
                 "vmovups %%ymm13, 96(%1)\nvmovups %%ymm13, 128(%1)\nvmovups %%ymm13, 160(%1)\n"
                 "vmovups %%ymm13, 192(%1)\nvmovups %%ymm13, 224(%1)\n",
                 YMM_CLOBBERS));
    st256 = 8.0 / (s * cyc);
    BEST(s, LOOP("lea 4096(%1), %%rdx\nmov %1, %%rax\n2:\n"
                 "vmovups %%ymm13, 0(%%rax)\nvmovups %%ymm13, 32(%%rax)\nvmovups %%ymm13, 64(%%rax)\n"
                 "vmovups %%ymm13, 96(%%rax)\nvmovups %%ymm13, 128(%%rax)\nvmovups %%ymm13, 160(%%rax)\n"
                 "vmovups %%ymm13, 192(%%rax)\nvmovups %%ymm13, 224(%%rax)\nadd $256, %%rax\ncmp %%rdx, %%rax\n"
                 "jne 2b\n",
                 "rax", "rdx", YMM_CLOBBERS));
    st256s = 128.0 / (s * cyc);
    BEST(s, LOOP(R12("vfmadd231ps %%ymm13, %%ymm14, "), YMM_CLOBBERS));
    fma256 = 12.0 / (s * cyc);
    BEST(s, LOOP(R12("vdivps %%ymm13, %%ymm14, "), YMM_CLOBBERS));
    div256 = s * cyc / 12.0;
    if (avx512) {
        BEST(s, LOOP_AFTER("vbroadcastss %2, %%zmm13\nvbroadcastss %3, %%zmm14\n",
                           "vdivps %%zmm13, %%zmm14, %%zmm0\nvdivps %%zmm13, %%zmm14, %%zmm1\n"
                           "vdivps %%zmm13, %%zmm14, %%zmm2\nvdivps %%zmm13, %%zmm14, %%zmm3\n"
                           "vdivps %%zmm13, %%zmm14, %%zmm4\nvdivps %%zmm13, %%zmm14, %%zmm5\n"
                           "vdivps %%zmm13, %%zmm14, %%zmm6\nvdivps %%zmm13, %%zmm14, %%zmm7\n"
                           "vdivps %%zmm13, %%zmm14, %%zmm8\nvdivps %%zmm13, %%zmm14, %%zmm9\n"
                           "vdivps %%zmm13, %%zmm14, %%zmm10\nvdivps %%zmm13, %%zmm14, %%zmm11\n",
                           YMM_CLOBBERS));
        div512 = s * cyc / 12.0;
    }
    BEST(s, LOOP(MIX6("vblendvps %%ymm15, %%ymm13, %%ymm14, "), YMM_CLOBBERS));
    mulblend = s * cyc;
    BEST(s, LOOP(MIX6("vandps %%ymm13, %%ymm14, "), YMM_CLOBBERS));
    muland = s * cyc;
    BEST(s, LOOP(MIX6("vmaxps %%ymm13, %%ymm14, "), YMM_CLOBBERS));
    mulmax = s * cyc;
    printf("{\"clock_ghz\": %.2f, \"ymm_loads_per_cycle\": %.2f, \"zmm_loads_per_cycle\": %.2f, "
           "\"ymm_stores_per_cycle\": %.2f, \"ymm_stream_stores_per_cycle\": %.2f, \"ymm_fma_per_cycle\": %.2f, "
           "\"ymm_div_cycles\": %.2f, \"zmm_div_cycles\": %.2f, \"six_mul_six_blendv_cycles\": %.2f, "
           "\"six_mul_six_and_cycles\": %.2f, \"six_mul_six_max_cycles\": %.2f}\n",
           hz * 1e-9, ld256, ld512, st256, st256s, fma256, div256, div512, mulblend, muland, mulmax);
    return 0;
}

#else
int main(void) {
    printf("{\"error\": \"uarch_probe needs x86-64 and GCC or Clang inline assembly\"}\n");
    return 0;
}
#endif
