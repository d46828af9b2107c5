// Cached Uniform Writing's attention (paper section 2.3, Algorithm 1), forward and backward, for the
// native whole-sequence path. The same function as CacheAttention in uwbench/writing/cached_uniform.py:
//
//     q = h W_c + r V_c                          h = h_{t-1} (H), r = r_{t-1} (R), q (A)
//     s_j = v . tanh(q + d_j U_c)                d_1..d_n the cached controller states (H each)
//     alpha = softmax_j(s),  a = sum_j alpha_j d_j
//
// Row by row, with the n cached states of a row at cache + j * cache_stride + b * H (the driver's
// buffer of controller states, one (B, H) slab per step) and their projections d_j U_c beside them
// (made by the driver with one matrix product per write window). ``act`` keeps tanh(q + d_j U_c) (B, n, A) and ``alpha`` (B, n) for the backward. The backward
// adds the gradients of h, of each cached state (in the driver's gradient slabs, the states' layout)
// and of r, writes those of the projections (the driver takes them through U_c, and makes U_c's own
// gradient with one product at the end), and accumulates the other parameters'.
#include <cmath>
#include <cstddef>
#include <vector>

#include "vmath.h"

namespace {

// y (A) = x (K) M (K x A), M row-major: A-wide accumulators, kept in registers when A is known at
// compile time (AF > 0; the default attention width is 16).
template <typename T, int AF>
inline void vec_mat(int K, int A, const T* __restrict x, const T* __restrict M, T* __restrict y) {
  constexpr int kMax = AF > 0 ? AF : 1;
  if (AF > 0) {
    T acc[kMax];
    for (int k = 0; k < kMax; ++k) acc[k] = y[k];
    for (int u = 0; u < K; ++u) {
      const T* __restrict row = M + (size_t)u * kMax;
      T xu = x[u];
#pragma omp simd
      for (int k = 0; k < kMax; ++k) acc[k] += xu * row[k];
    }
    for (int k = 0; k < kMax; ++k) y[k] = acc[k];
  } else {
    for (int u = 0; u < K; ++u) {
      const T* __restrict row = M + (size_t)u * A;
      T xu = x[u];
#pragma omp simd
      for (int k = 0; k < A; ++k) y[k] += xu * row[k];
    }
  }
}

// y (H) += sum_k c[k] Mt[k] with Mt (A x H) row-major: the product with a transposed parameter, vectorised
// over H.
template <typename T>
inline void add_rows(int A, int H, const T* __restrict c, const T* __restrict Mt, T* __restrict y) {
  for (int k = 0; k < A; ++k) {
    const T* __restrict row = Mt + (size_t)k * H;
    T ck = c[k];
#pragma omp simd
    for (int u = 0; u < H; ++u) y[u] += ck * row[u];
  }
}

// G (K x A) += x (K) outer g (A): a parameter's gradient.
template <typename T, int AF>
inline void add_outer(int K, int A, const T* __restrict x, const T* __restrict g, T* __restrict G) {
  const int a = AF > 0 ? AF : A;
  for (int u = 0; u < K; ++u) {
    T* __restrict row = G + (size_t)u * a;
    T xu = x[u];
#pragma omp simd
    for (int k = 0; k < a; ++k) row[k] += xu * g[k];
  }
}

// proj: the cached states' projections d_j U_c (A each), at proj + j * proj_stride + b * A.
template <typename T, int AF>
void cuw_fwd(int B, int n, int H, int R, int A, const T* h, const T* cache, long cache_stride, const T* proj,
             long proj_stride, const T* r, const T* w_c, const T* v_c, const T* v, T* a_out, T* alpha, T* act) {
  uwb::FlushSubnormals flush;  // see vmath.h
  std::vector<T> q(A), s(n);
  for (int b = 0; b < B; ++b) {
    T* __restrict qq = q.data();
    for (int k = 0; k < A; ++k) qq[k] = 0;
    vec_mat<T, AF>(H, A, h + (size_t)b * H, w_c, qq);  // q = h W_c + r V_c
    vec_mat<T, AF>(R, A, r + (size_t)b * R, v_c, qq);
    T smax = -INFINITY;
    T* actb = act + (size_t)b * n * A;
    for (int j = 0; j < n; ++j) {  // s_j = v . tanh(q + d_j U_c)
      T* __restrict pj = actb + (size_t)j * A;
      const T* __restrict dj = proj + j * proj_stride + (size_t)b * A;
      T sj = 0;
#pragma omp simd reduction(+ : sj)
      for (int k = 0; k < A; ++k) {
        pj[k] = uwb::tanh_v(qq[k] + dj[k]);
        sj += pj[k] * v[k];
      }
      s[j] = sj;
      smax = sj > smax ? sj : smax;
    }
    T* al = alpha + (size_t)b * n;
    T tot = 0;
    for (int j = 0; j < n; ++j) { al[j] = std::exp(s[j] - smax); tot += al[j]; }
    for (int j = 0; j < n; ++j) al[j] /= tot;
    T* __restrict ab = a_out + (size_t)b * H;
    for (int u = 0; u < H; ++u) ab[u] = 0;
    for (int j = 0; j < n; ++j) {  // a = sum_j alpha_j d_j
      const T* __restrict d = cache + j * cache_stride + (size_t)b * H;
      T w = al[j];
#pragma omp simd
      for (int u = 0; u < H; ++u) ab[u] += w * d[u];
    }
  }
}

// w_cT (A x H), v_cT (A x R): W_c and V_c transposed (the driver makes them once). Writes the gradient of
// each projection d_j U_c into d_proj (same layout as proj); the driver takes it through U_c.
template <typename T, int AF>
void cuw_bwd(int B, int n, int H, int R, int A, const T* h, const T* cache, long cache_stride, const T* r,
             const T* w_cT, const T* v_cT, const T* v, const T* alpha, const T* act, const T* d_a, T* d_h,
             T* d_cache, T* d_proj, long proj_stride, T* d_r, T* d_w_c, T* d_v_c, T* d_v) {
  uwb::FlushSubnormals flush;  // see vmath.h
  std::vector<T> dalpha(n), dq(A);
  for (int b = 0; b < B; ++b) {
    const T* al = alpha + (size_t)b * n;
    const T* actb = act + (size_t)b * n * A;
    const T* __restrict da = d_a + (size_t)b * H;
    T dot = 0;
    for (int j = 0; j < n; ++j) {  // a = sum_j alpha_j d_j
      const T* __restrict d = cache + j * cache_stride + (size_t)b * H;
      T* __restrict dd = d_cache + j * cache_stride + (size_t)b * H;
      T x = 0, w = al[j];
#pragma omp simd reduction(+ : x)
      for (int u = 0; u < H; ++u) {
        x += d[u] * da[u];
        dd[u] += w * da[u];
      }
      dalpha[j] = x;
      dot += w * x;
    }
    T* __restrict dqq = dq.data();
    for (int k = 0; k < A; ++k) dqq[k] = 0;
    for (int j = 0; j < n; ++j) {  // alpha = softmax(s), s_j = v . tanh(q + d_j U_c)
      T ds = al[j] * (dalpha[j] - dot);
      const T* __restrict pj = actb + (size_t)j * A;
      T* __restrict dp = d_proj + j * proj_stride + (size_t)b * A;
#pragma omp simd
      for (int k = 0; k < A; ++k) {
        d_v[k] += ds * pj[k];
        dp[k] = ds * v[k] * (T(1) - pj[k] * pj[k]);
        dqq[k] += dp[k];
      }
    }
    add_rows(A, H, dqq, w_cT, d_h + (size_t)b * H);  // q = h W_c + r V_c
    add_outer<T, AF>(H, A, h + (size_t)b * H, dqq, d_w_c);
    add_rows(A, R, dqq, v_cT, d_r + (size_t)b * R);
    add_outer<T, AF>(R, A, r + (size_t)b * R, dqq, d_v_c);
  }
}

}  // namespace

extern "C" {
#define UWB_CUW(T, SFX)                                                                                      \
  void cuw_fwd_##SFX(int B, int n, int H, int R, int A, const T* h, const T* cache, long cache_stride,      \
                     const T* proj, long proj_stride, const T* r, const T* w_c, const T* v_c, const T* v,     \
                     T* a, T* alpha, T* act) {                                                                \
    if (A == 16)                                                                                              \
      cuw_fwd<T, 16>(B, n, H, R, A, h, cache, cache_stride, proj, proj_stride, r, w_c, v_c, v, a, alpha, act); \
    else                                                                                                      \
      cuw_fwd<T, 0>(B, n, H, R, A, h, cache, cache_stride, proj, proj_stride, r, w_c, v_c, v, a, alpha, act);  \
  }                                                                                                           \
  void cuw_bwd_##SFX(int B, int n, int H, int R, int A, const T* h, const T* cache, long cache_stride,      \
                     const T* r, const T* w_cT, const T* v_cT, const T* v, const T* alpha, const T* act,      \
                     const T* d_a, T* d_h, T* d_cache, T* d_proj, long proj_stride, T* d_r, T* d_w_c,        \
                     T* d_v_c, T* d_v) {                                                                      \
    if (A == 16)                                                                                              \
      cuw_bwd<T, 16>(B, n, H, R, A, h, cache, cache_stride, r, w_cT, v_cT, v, alpha, act, d_a, d_h, d_cache, \
                     d_proj, proj_stride, d_r, d_w_c, d_v_c, d_v);                                            \
    else                                                                                                      \
      cuw_bwd<T, 0>(B, n, H, R, A, h, cache, cache_stride, r, w_cT, v_cT, v, alpha, act, d_a, d_h, d_cache,  \
                    d_proj, proj_stride, d_r, d_w_c, d_v_c, d_v);                                             \
  }
UWB_CUW(float, f32)
UWB_CUW(double, f64)
}
