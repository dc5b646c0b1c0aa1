// wgmma (sm_90a) wrappers for the classical GEMM: one per instruction shape,
// each defined by one line (WD_WGMMA_SS / WD_WGMMA_RS below, which spell the
// accumulators out operand by operand, as inline asm needs them). The shapes
// are m64n{8,16,32,64,80,128} (and BF16 m64n144) with K-major shared-memory
// operands described by swizzle descriptors (classical_gemm_impl.cuh), or
// with A from registers.
//
// Accumulator layout (the same as mma.sync m16n8 tiles): warp w of the
// warpgroup, lane (g = lane/4, t = lane%4) holds for n-tile i = 0..N/8-1
//   d[4i+0] = (row 16w+g,   col 8i+2t)   d[4i+1] = (row 16w+g,   col 8i+2t+1)
//   d[4i+2] = (row 16w+g+8, col 8i+2t)   d[4i+3] = (row 16w+g+8, col 8i+2t+1)
// scale_d = 0 overwrites d with A·B; 1 accumulates.
#pragma once

#include <cstdint>

namespace wd::kernels::wgmma {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WD_WGMMA_AVAILABLE 1
#else
#define WD_WGMMA_AVAILABLE 0
#endif

#if WD_WGMMA_AVAILABLE
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

// Shared memory written by the generic proxy (cp.async, st.shared) and read
// next by wgmma (async proxy) needs this fence in the writing threads.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Descriptor of a K-major operand tile in shared memory: rows of kRowBytes
// (128 or 64) bytes under the swizzle of that width, 8-row atoms (stride
// byte offset 8 × kRowBytes). The tile must start aligned to its atom (1024
// or 512 bytes); a K step inside the row adds its byte offset to the start
// address (the swizzle is applied to addresses).
template <int kRowBytes>
__device__ __forceinline__ uint64_t swizzled_desc(uint32_t smem_addr) {
  static_assert(kRowBytes == 128 || kRowBytes == 64, "128- or 64-byte swizzle");
  uint64_t d = uint64_t((smem_addr & 0x3FFFFu) >> 4);
  d |= uint64_t(1) << 16;                          // leading byte offset: unused for swizzled K-major
  d |= uint64_t((8 * kRowBytes) >> 4) << 32;       // stride byte offset: 8 rows
  d |= uint64_t(kRowBytes == 128 ? 1 : 2) << 62;   // layout: 128- or 64-byte swizzle
  return d;
}
// The canonical tiles: 128-byte rows.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t smem_addr) { return swizzled_desc<128>(smem_addr); }
// 64-byte rows: the two K halves of a weight box read from the tiled BF16
// copies (core/tiled_box_map.h).
__device__ __forceinline__ uint64_t sw64_desc(uint32_t smem_addr) { return swizzled_desc<64>(smem_addr); }

// Inline asm names its operands by number and takes no loops, so every
// accumulator register is spelled out: WD_WGMMA_ACC<n> is the placeholder
// list %0 .. %(n-1) of an n-register accumulator, WD_WGMMA_OUT<n> its "+f"
// constraints, for the counts the shapes below use (N / 2 of m64nN). The
// operands after the accumulator are numbered from n: (shared-memory A)
// desc_a, desc_b, scale_d; (register A) a[0..3], desc_b, scale_d.
#define WD_WGMMA_ACC4 "%0, %1, %2, %3"
#define WD_WGMMA_ACC8 WD_WGMMA_ACC4 ", %4, %5, %6, %7"
#define WD_WGMMA_ACC16 WD_WGMMA_ACC8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define WD_WGMMA_ACC32 WD_WGMMA_ACC16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WD_WGMMA_ACC40 WD_WGMMA_ACC32 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define WD_WGMMA_ACC64 \
  WD_WGMMA_ACC40 ", %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, " \
  "%52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WD_WGMMA_ACC72 WD_WGMMA_ACC64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define WD_WGMMA_OUT4 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define WD_WGMMA_OUT8 WD_WGMMA_OUT4, \
  "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define WD_WGMMA_OUT16 WD_WGMMA_OUT8, \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define WD_WGMMA_OUT32 WD_WGMMA_OUT16, \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WD_WGMMA_OUT40 WD_WGMMA_OUT32, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define WD_WGMMA_OUT64 WD_WGMMA_OUT40, \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define WD_WGMMA_OUT72 WD_WGMMA_OUT64, \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])

// wgmma with both operands in shared memory: name, accumulator registers,
// the instruction's shape and types, the immediates after scale-a and
// scale-b (BF16: the transposes of A and B, both 0; E4M3: none), desc_a and
// desc_b's placeholders, scale_d's placeholder.
#define WD_WGMMA_SS(name, n, shape, tail, descs, scale)                                               \
  __device__ __forceinline__ void name(float (&d)[n], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
    asm volatile("{\n.reg .pred p;\n"                                                                 \
                 "setp.ne.b32 p, " scale ", 0;\n"                                                     \
                 "wgmma.mma_async.sync.aligned." shape " {" WD_WGMMA_ACC##n "}, " descs ", p, 1, 1" tail \
                 ";\n}\n"                                                                             \
                 : WD_WGMMA_OUT##n                                                                     \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                           \
  }
// wgmma with A from registers (four 32-bit fragments a thread): as above,
// the placeholders of a[0..3] and desc_b together (operands), then scale_d's
// (BF16's tail: B's transpose, 0).
#define WD_WGMMA_RS(name, n, shape, tail, operands, scale)                                              \
  __device__ __forceinline__ void name(float (&d)[n], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) { \
    asm volatile("{\n.reg .pred p;\n"                                                                   \
                 "setp.ne.b32 p, " scale ", 0;\n"                                                       \
                 "wgmma.mma_async.sync.aligned." shape " {" WD_WGMMA_ACC##n "}, " operands ", p, 1, 1" tail \
                 ";\n}\n"                                                                               \
                 : WD_WGMMA_OUT##n                                                                       \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));             \
  }

// The token tiles m64nN, N = 8, 16, 32, 64, 80 (the prefill tile of 80 rows:
// one holds an expert's 64 + 2σ tokens at 1024 tokens, E = 128, K = 8,
// classical_moe.cpp), 128 and, BF16 only, 144 (two 144-row tiles cover an
// expert's 256 ± 2σ tokens at 4096 tokens).
WD_WGMMA_SS(wgmma_m64n8_bf16, 4, "m64n8k16.f32.bf16.bf16", ", 0, 0", "%4, %5", "%6")
WD_WGMMA_SS(wgmma_m64n16_bf16, 8, "m64n16k16.f32.bf16.bf16", ", 0, 0", "%8, %9", "%10")
WD_WGMMA_SS(wgmma_m64n32_bf16, 16, "m64n32k16.f32.bf16.bf16", ", 0, 0", "%16, %17", "%18")
WD_WGMMA_SS(wgmma_m64n64_bf16, 32, "m64n64k16.f32.bf16.bf16", ", 0, 0", "%32, %33", "%34")
WD_WGMMA_SS(wgmma_m64n80_bf16, 40, "m64n80k16.f32.bf16.bf16", ", 0, 0", "%40, %41", "%42")
WD_WGMMA_SS(wgmma_m64n128_bf16, 64, "m64n128k16.f32.bf16.bf16", ", 0, 0", "%64, %65", "%66")
WD_WGMMA_SS(wgmma_m64n144_bf16, 72, "m64n144k16.f32.bf16.bf16", ", 0, 0", "%72, %73", "%74")
WD_WGMMA_SS(wgmma_m64n8_e4m3, 4, "m64n8k32.f32.e4m3.e4m3", "", "%4, %5", "%6")
WD_WGMMA_SS(wgmma_m64n16_e4m3, 8, "m64n16k32.f32.e4m3.e4m3", "", "%8, %9", "%10")
WD_WGMMA_SS(wgmma_m64n32_e4m3, 16, "m64n32k32.f32.e4m3.e4m3", "", "%16, %17", "%18")
WD_WGMMA_SS(wgmma_m64n64_e4m3, 32, "m64n64k32.f32.e4m3.e4m3", "", "%32, %33", "%34")
WD_WGMMA_SS(wgmma_m64n80_e4m3, 40, "m64n80k32.f32.e4m3.e4m3", "", "%40, %41", "%42")
WD_WGMMA_SS(wgmma_m64n128_e4m3, 64, "m64n128k32.f32.e4m3.e4m3", "", "%64, %65", "%66")

// m64nN for the token tile N = 8, 16, 32, 64, 80, 128 or (BF16) 144 (d holds N/2 floats).
template <int N>
__device__ __forceinline__ void mma_bf16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 80 || N == 128 || N == 144,
                "wgmma token tiles built: 8 to 144");
  if constexpr (N == 8) wgmma_m64n8_bf16(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 16) wgmma_m64n16_bf16(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 32) wgmma_m64n32_bf16(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 64) wgmma_m64n64_bf16(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 80) wgmma_m64n80_bf16(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 128) wgmma_m64n128_bf16(d, desc_a, desc_b, scale_d);
  else wgmma_m64n144_bf16(d, desc_a, desc_b, scale_d);
}
template <int N>
__device__ __forceinline__ void mma_e4m3(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 80 || N == 128, "wgmma token tiles built: 8 to 128");
  if constexpr (N == 8) wgmma_m64n8_e4m3(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 16) wgmma_m64n16_e4m3(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 32) wgmma_m64n32_e4m3(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 64) wgmma_m64n64_e4m3(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 80) wgmma_m64n80_e4m3(d, desc_a, desc_b, scale_d);
  else wgmma_m64n128_e4m3(d, desc_a, desc_b, scale_d);
}

// m64n8k32 E4M3 with A from registers (the decode tile of
// classical_stream_wgmma.cu): warp w of the warpgroup supplies rows
// [16w, 16w+16); lane (g, t) holds a[0] = row g, k 4t..4t+3; a[1] = row g+8,
// same k; a[2] = row g, k 16+4t..16+4t+3; a[3] = row g+8, same k (four
// E4M3 bytes a register, lowest k in the lowest byte).
WD_WGMMA_RS(wgmma_m64n8k32_e4m3_rs, 4, "m64n8k32.f32.e4m3.e4m3", "", "{%4, %5, %6, %7}, %8", "%9")

// Keeps the compiler from moving reads of an accumulator above the
// wgmma.wait that makes it valid (the value is written asynchronously).
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// m64nNk16 BF16 with A from registers (the W8A16 TMA tile: MXFP8 weights
// decoded to BF16 by the consumers): warp w of the warpgroup supplies rows
// [16w, 16w+16) in the mma.sync m16n8k16 A layout: lane (g, t) holds
// a[0] = row g, k 2t..2t+1; a[1] = row g+8, same k; a[2] = row g, k
// 2t+8..2t+9; a[3] = row g+8, same k (BF16x2, lower k in the low half). B is
// a K-major 128-byte-swizzle descriptor as above. The registers of a must
// not change until a wgmma.wait covers the instruction (fence_operand them
// after it). N = 144 is W8A16's prefill tile (two hold an expert's 256 ± 2σ
// tokens at 4096 tokens, one its 128 ± 2σ at 2048).
WD_WGMMA_RS(wgmma_m64n8_bf16_rs, 4, "m64n8k16.f32.bf16.bf16", ", 0", "{%4, %5, %6, %7}, %8", "%9")
WD_WGMMA_RS(wgmma_m64n16_bf16_rs, 8, "m64n16k16.f32.bf16.bf16", ", 0", "{%8, %9, %10, %11}, %12", "%13")
WD_WGMMA_RS(wgmma_m64n32_bf16_rs, 16, "m64n32k16.f32.bf16.bf16", ", 0", "{%16, %17, %18, %19}, %20", "%21")
WD_WGMMA_RS(wgmma_m64n64_bf16_rs, 32, "m64n64k16.f32.bf16.bf16", ", 0", "{%32, %33, %34, %35}, %36", "%37")
WD_WGMMA_RS(wgmma_m64n80_bf16_rs, 40, "m64n80k16.f32.bf16.bf16", ", 0", "{%40, %41, %42, %43}, %44", "%45")
WD_WGMMA_RS(wgmma_m64n128_bf16_rs, 64, "m64n128k16.f32.bf16.bf16", ", 0", "{%64, %65, %66, %67}, %68", "%69")
WD_WGMMA_RS(wgmma_m64n144_bf16_rs, 72, "m64n144k16.f32.bf16.bf16", ", 0", "{%72, %73, %74, %75}, %76", "%77")

#undef WD_WGMMA_SS
#undef WD_WGMMA_RS
#undef WD_WGMMA_ACC4
#undef WD_WGMMA_ACC8
#undef WD_WGMMA_ACC16
#undef WD_WGMMA_ACC32
#undef WD_WGMMA_ACC40
#undef WD_WGMMA_ACC64
#undef WD_WGMMA_ACC72
#undef WD_WGMMA_OUT4
#undef WD_WGMMA_OUT8
#undef WD_WGMMA_OUT16
#undef WD_WGMMA_OUT32
#undef WD_WGMMA_OUT40
#undef WD_WGMMA_OUT64
#undef WD_WGMMA_OUT72

template <int N>
__device__ __forceinline__ void mma_bf16_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
  static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 80 || N == 128 || N == 144,
                "wgmma token tiles built: 8 to 144");
  if constexpr (N == 8) wgmma_m64n8_bf16_rs(d, a, desc_b, scale_d);
  else if constexpr (N == 16) wgmma_m64n16_bf16_rs(d, a, desc_b, scale_d);
  else if constexpr (N == 32) wgmma_m64n32_bf16_rs(d, a, desc_b, scale_d);
  else if constexpr (N == 64) wgmma_m64n64_bf16_rs(d, a, desc_b, scale_d);
  else if constexpr (N == 80) wgmma_m64n80_bf16_rs(d, a, desc_b, scale_d);
  else if constexpr (N == 128) wgmma_m64n128_bf16_rs(d, a, desc_b, scale_d);
  else wgmma_m64n144_bf16_rs(d, a, desc_b, scale_d);
}

// The register form of fence_operand, for the A fragments of a register-A
// wgmma: keeps the compiler from reusing them before the wait.
__device__ __forceinline__ void fence_operand(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

#endif  // WD_WGMMA_AVAILABLE

}  // namespace wd::kernels::wgmma
