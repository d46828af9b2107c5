// Matrix products for the native whole-sequence path: C = C0 + op(A) B in float32 and float64.
//
// The path's products are small and many (per step (64, 100) x (100, 400) and the like, then the
// weights' gradients over all steps). torch's BLAS (MKL) runs its AVX2 kernels for them on this
// project's AMD machines even where the CPU has AVX-512, and is slower there than these loops, which
// are compiled with -march=native like the other kernels (benchmarks/README.md, "Where the native
// iteration's time goes"). They also write into the driver's buffers with any row stride and add to a
// given matrix, so a step's product needs no copy and no second call.
//
//     C (M x N, row stride ldc) = C0 (M x N, row stride ldc0; none: zero; may be C itself)
//                                 + op(A) (M x K) B (K x N, row stride ldb)
//     op(A)(i, k) = A[i lda + k], or A[k lda + i] with trans_a (the weights' gradients: X^T dZ)
//
// Register tiles of MR rows x NV vectors of C (MR x NV accumulators, NV loads of B and MR broadcasts
// of A per k): whole tiles of NV vectors, then the columns left in whole vectors, both reading B where it
// lies, then the last columns (fewer than one vector) copied zero-padded into a panel of their own. K
// runs in blocks (KB) that keep a block of B in the caches while every row tile passes over it. The
// sums run in k order, with fused multiply-adds where the machine has them, so the round-off differs
// from torch's BLAS (tests/models/test_native.py checks both against torch).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "vmath.h"

namespace {

using uwb::load_v;
using uwb::store_v;
using uwb::Vector;

template <typename T> struct Tile {
  static constexpr int L = Vector<T>::lanes;
  // 8 x 3 vectors with 32 vector registers (AVX-512), 6 x 2 with 16 (AVX2): the accumulators, B's row and
  // a broadcast fill the registers
  static constexpr int NV = uwb::kVectorBytes >= 64 ? 3 : 2;  // vectors of C per row in a whole tile
  static constexpr int NR = NV * L;                           // columns per whole tile
  static constexpr int MR = uwb::kVectorBytes >= 64 ? 8 : 6;  // rows per tile
  static constexpr int KB = 256;        // k per block
};

// One tile: C[0, MR) x [0, nc) = C0 (or zero) + sum over k < K of op(A)(i, k) B(k, j), B's rows at stride
// ldb (nc <= NV L; B holds NV L readable columns per row).
template <typename T, int MR, int NV, bool TA>
inline void tile(int K, const T* __restrict A, long lda, const T* __restrict B, long ldb, const T* C0, long ldc0,
                 T* C, long ldc, int nc) {
  typedef typename Vector<T>::type V;
  constexpr int L = Tile<T>::L, NR = NV * L;
  V c[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) c[i][v] = V{};
  for (int k = 0; k < K; ++k) {
    V b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = load_v<V>(B + k * ldb + v * L);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const T a = TA ? A[(long)k * lda + i] : A[i * lda + k];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[i][v] += a * b[v];
    }
  }
  for (int i = 0; i < MR; ++i) {
    const T* c0 = C0 ? C0 + i * ldc0 : nullptr;
    T* out = C + i * ldc;
    if (nc == NR) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) store_v(out + v * L, c0 ? load_v<V>(c0 + v * L) + c[i][v] : c[i][v]);
    } else {
      T row[NR];
      for (int v = 0; v < NV; ++v) store_v(row + v * L, c[i][v]);
      for (int j = 0; j < nc; ++j) out[j] = c0 ? c0[j] + row[j] : row[j];
    }
  }
}

// The rows [0, M) of one column tile, MR rows at a time, then the rest by 4, 2, 1.
template <typename T, int NV, bool TA>
void column(int M, int K, const T* A, long lda, const T* B, long ldb, const T* C0, long ldc0, T* C, long ldc,
            int nc) {
  constexpr int MR = Tile<T>::MR;
  auto at = [&](int i) { return TA ? A + i : A + i * lda; };
  auto c0 = [&](int i) { return C0 ? C0 + i * ldc0 : nullptr; };
  int i = 0;
  for (; i + MR <= M; i += MR) tile<T, MR, NV, TA>(K, at(i), lda, B, ldb, c0(i), ldc0, C + i * ldc, ldc, nc);
  if (MR > 4 && i + 4 <= M) {
    tile<T, 4, NV, TA>(K, at(i), lda, B, ldb, c0(i), ldc0, C + i * ldc, ldc, nc);
    i += 4;
  }
  if (i + 2 <= M) {
    tile<T, 2, NV, TA>(K, at(i), lda, B, ldb, c0(i), ldc0, C + i * ldc, ldc, nc);
    i += 2;
  }
  if (i < M) tile<T, 1, NV, TA>(K, at(i), lda, B, ldb, c0(i), ldc0, C + i * ldc, ldc, nc);
}

template <typename T, bool TA>
void gemm(int M, int N, int K, const T* A, long lda, const T* B, long ldb, const T* C0, long ldc0, T* C, long ldc) {
  constexpr int NR = Tile<T>::NR, KB = Tile<T>::KB;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // C = C0, or zero
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) C[i * ldc + j] = C0 ? C0[i * ldc0 + j] : T(0);
    return;
  }
  constexpr int L = Tile<T>::L, NV = Tile<T>::NV;
  // whole tiles of NV vectors, then whole vectors, then the last columns (fewer than a vector's lanes)
  // copied zero-padded into a panel of one vector per k
  const int whole = N / NR, vecs = (N - whole * NR) / L, rest = N - whole * NR - vecs * L, j1 = whole * NR + vecs * L;
  std::vector<T> edge(rest ? (size_t)std::min(K, KB) * L : 0);
  for (int k0 = 0; k0 < K; k0 += KB) {
    const int kb = std::min(K - k0, KB);
    const T* a = TA ? A + (long)k0 * lda : A + k0;
    const T* b = B + (long)k0 * ldb;
    const T* c0 = k0 == 0 ? C0 : C;  // later blocks add to what the first ones made
    const long l0 = k0 == 0 ? ldc0 : ldc;
    auto at = [&](int j) { return c0 ? c0 + j : nullptr; };
    for (int p = 0; p < whole; ++p)
      column<T, NV, TA>(M, kb, a, lda, b + p * NR, ldb, at(p * NR), l0, C + p * NR, ldc, NR);
    const int j0 = whole * NR;
    if (vecs == 2) column<T, 2, TA>(M, kb, a, lda, b + j0, ldb, at(j0), l0, C + j0, ldc, 2 * L);
    if (vecs == 1) column<T, 1, TA>(M, kb, a, lda, b + j0, ldb, at(j0), l0, C + j0, ldc, L);
    if (rest) {
      for (int k = 0; k < kb; ++k)
        for (int j = 0; j < L; ++j) edge[(size_t)k * L + j] = j < rest ? b[k * ldb + j1 + j] : T(0);
      column<T, 1, TA>(M, kb, a, lda, edge.data(), L, at(j1), l0, C + j1, ldc, rest);
    }
  }
}

template <typename T>
void gemm_any(int M, int N, int K, const T* A, long lda, int trans_a, const T* B, long ldb, const T* C0, long ldc0,
              T* C, long ldc) {
  uwb::FlushSubnormals flush;  // see vmath.h
  if (trans_a)
    gemm<T, true>(M, N, K, A, lda, B, ldb, C0, ldc0, C, ldc);
  else
    gemm<T, false>(M, N, K, A, lda, B, ldb, C0, ldc0, C, ldc);
}

}  // namespace

extern "C" {
void gemm_f32(int M, int N, int K, const float* A, long lda, int trans_a, const float* B, long ldb, const float* C0,
              long ldc0, float* C, long ldc) {
  gemm_any<float>(M, N, K, A, lda, trans_a, B, ldb, C0, ldc0, C, ldc);
}
void gemm_f64(int M, int N, int K, const double* A, long lda, int trans_a, const double* B, long ldb,
              const double* C0, long ldc0, double* C, long ldc) {
  gemm_any<double>(M, N, K, A, lda, trans_a, B, ldb, C0, ldc0, C, ldc);
}
}
