// Cached Uniform Writing's attention (paper section 2.3, Algorithm 1), forward and backward, for the
// native whole-sequence path. The same function as CacheAttention in uwbench/writing/cached_uniform.py:
//
//     q = h W_c + r V_c                          h = h_{t-1} (H), r = r_{t-1} (R), q (A)
//     s_j = v . tanh(q + d_j U_c)                d_1..d_n the cached controller states (H each)
//     alpha = softmax_j(s),  a = sum_j alpha_j d_j
//
// Row by row, with the n cached states of a row at cache + j * cache_stride + b * H (the driver's
// buffer of controller states, one (B, H) slab per step). The states' projections d_j U_c are made here,
// per write, so each cached state is projected once (it belongs to one window). ``act`` keeps
// tanh(q + d_j U_c) (B, n, A) and ``alpha`` (B, n) for the backward, which adds the gradients of h, of
// each cached state (in the driver's gradient slabs, the states' layout) and of r, and accumulates the
// parameters'.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "vmath.h"

namespace {

// Fixed-width paths (the attention width A known at compile time, AF > 0: 16 by default) work on
// whole rows of A values as GCC vector types, so that their accumulators stay in registers (arrays of
// partial sums are spilled to the stack, and every addition then waits on a store).
template <typename T, int N>
struct Vec {
  typedef T type __attribute__((vector_size(sizeof(T) * N)));
};

template <typename V, typename T>
inline V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

template <typename V, typename T>
inline void store(T* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

// y (A) += x (K) M (K x A), M row-major; four interleaved partial sums when A is fixed (an addition
// waits about four issue slots for the one before it).
template <typename T, int AF>
inline void vec_mat(int K, int A, const T* __restrict x, const T* __restrict M, T* __restrict y) {
  if constexpr (AF > 0) {
    typedef typename Vec<T, AF>::type V;
    V a0 = {}, a1 = {}, a2 = {}, a3 = {};
    int u = 0;
    for (; u + 4 <= K; u += 4) {
      const T* row = M + (size_t)u * AF;
      a0 += x[u] * load<V>(row);
      a1 += x[u + 1] * load<V>(row + AF);
      a2 += x[u + 2] * load<V>(row + 2 * AF);
      a3 += x[u + 3] * load<V>(row + 3 * AF);
    }
    for (; u < K; ++u) a0 += x[u] * load<V>(M + (size_t)u * AF);
    store(y, load<V>(y) + ((a0 + a1) + (a2 + a3)));
  } else {
    for (int u = 0; u < K; ++u) {
      const T* __restrict row = M + (size_t)u * A;
      T xu = x[u];
#pragma omp simd
      for (int k = 0; k < A; ++k) y[k] += xu * row[k];
    }
  }
}

// y (H) += sum_k c[k] Mt[k] with Mt (A x H) row-major: the product with a transposed parameter,
// vectorised over H. When A is fixed, y is taken 2 x 16 elements at a time and kept in registers over
// the A rows.
template <typename T, int AF>
inline void add_rows(int A, int H, const T* __restrict c, const T* __restrict Mt, T* __restrict y) {
  int u = 0;
  if constexpr (AF > 0) {
    typedef typename Vec<T, 16>::type V;
    for (; u + 32 <= H; u += 32) {
      V lo = load<V>(y + u), hi = load<V>(y + u + 16);
      const T* p = Mt + u;
      for (int k = 0; k < AF; ++k, p += H) {
        lo += c[k] * load<V>(p);
        hi += c[k] * load<V>(p + 16);
      }
      store(y + u, lo);
      store(y + u + 16, hi);
    }
  }
  for (int k = 0; k < A; ++k) {  // the rest (all of y when A is known only at run time)
    const T* __restrict row = Mt + (size_t)k * H;
    T ck = c[k];
#pragma omp simd
    for (int i = u; i < H; ++i) y[i] += ck * row[i];
  }
}

// G (K x A) += sum_j x_j (K) outer g_j (A), for the m vectors x_j at x + j * x_stride and g (m x A): a
// parameter's gradient, each row of G loaded and stored once when A is fixed.
template <typename T, int AF>
inline void add_outers(int K, int A, int m, const T* x, long x_stride, const T* __restrict g, T* __restrict G) {
  if constexpr (AF > 0) {
    typedef typename Vec<T, AF>::type V;
    for (int u = 0; u < K; ++u) {
      V a0 = {}, a1 = {};
      int j = 0;
      for (; j + 2 <= m; j += 2) {
        a0 += x[j * x_stride + u] * load<V>(g + (size_t)j * AF);
        a1 += x[(j + 1) * x_stride + u] * load<V>(g + (size_t)(j + 1) * AF);
      }
      if (j < m) a0 += x[j * x_stride + u] * load<V>(g + (size_t)j * AF);
      T* row = G + (size_t)u * AF;
      store(row, load<V>(row) + (a0 + a1));
    }
  } else {
    for (int j = 0; j < m; ++j)
      for (int u = 0; u < K; ++u) {
        T* __restrict row = G + (size_t)u * A;
        T xu = x[j * x_stride + u];
        const T* __restrict gj = g + (size_t)j * A;
#pragma omp simd
        for (int k = 0; k < A; ++k) row[k] += xu * gj[k];
      }
  }
}

// pre (n x A) = q + d_j U_c for the n cached states d_j (H each, at cache + j * cache_stride) of a row:
// the pre-activations of the scores. When A is fixed, four states at a time share each row of U_c as
// four independent sums.
template <typename T, int AF>
inline void project_cache(int n, int H, int A, const T* q, const T* cache, long cache_stride, const T* u_c,
                          T* pre) {
  int j = 0;
  if constexpr (AF > 0) {
    typedef typename Vec<T, AF>::type V;
    const V qv = load<V>(q);
    for (; j + 4 <= n; j += 4) {
      const T* d = cache + j * cache_stride;
      V a0 = qv, a1 = qv, a2 = qv, a3 = qv;
      for (int u = 0; u < H; ++u) {
        const V row = load<V>(u_c + (size_t)u * AF);
        a0 += d[u] * row;
        a1 += d[cache_stride + u] * row;
        a2 += d[2 * cache_stride + u] * row;
        a3 += d[3 * cache_stride + u] * row;
      }
      T* out = pre + (size_t)j * AF;
      store(out, a0);
      store(out + AF, a1);
      store(out + 2 * AF, a2);
      store(out + 3 * AF, a3);
    }
  }
  for (; j < n; ++j) {  // the rest one by one
    T* pj = pre + (size_t)j * A;
    for (int k = 0; k < A; ++k) pj[k] = q[k];
    vec_mat<T, AF>(H, A, cache + j * cache_stride, u_c, pj);
  }
}

// The cached states d_j of row b sit at cache + j * cache_stride + b * H: the driver's buffer of
// controller states, one (B, H) slab per step.
template <typename T, int AF>
void cuw_fwd(int B, int n, int H, int R, int A, const T* h, const T* cache, long cache_stride, const T* r,
             const T* w_c, const T* u_c, const T* v_c, const T* v, T* a_out, T* alpha, T* act) {
  uwb::FlushSubnormals flush;  // see vmath.h
  std::vector<T> q(A), s(n);
  for (int b = 0; b < B; ++b) {
    T* __restrict qq = q.data();
    for (int k = 0; k < A; ++k) qq[k] = 0;
    vec_mat<T, AF>(H, A, h + (size_t)b * H, w_c, qq);  // q = h W_c + r V_c
    vec_mat<T, AF>(R, A, r + (size_t)b * R, v_c, qq);
    T* actb = act + (size_t)b * n * A;
    project_cache<T, AF>(n, H, A, qq, cache + (size_t)b * H, cache_stride, u_c, actb);
    T smax = -INFINITY;
    for (int j = 0; j < n; ++j) {  // s_j = v . tanh(q + d_j U_c)
      T* __restrict pj = actb + (size_t)j * A;
      T sj = 0;
#pragma omp simd reduction(+ : sj)
      for (int k = 0; k < A; ++k) {
        pj[k] = uwb::tanh_v(pj[k]);
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

// w_cT (A x H), u_cT (A x H), v_cT (A x R): W_c, U_c and V_c transposed (the driver makes them once).
// The gradients of h, of each cached state (in the driver's gradient slabs, laid out as the states) and
// of r are added to; those of the parameters are accumulated.
template <typename T, int AF>
void cuw_bwd(int B, int n, int H, int R, int A, const T* h, const T* cache, long cache_stride, const T* r,
             const T* w_cT, const T* u_cT, const T* v_cT, const T* v, const T* alpha, const T* act, const T* d_a,
             T* d_h, T* d_cache, T* d_r, T* d_w_c, T* d_u_c, T* d_v_c, T* d_v) {
  uwb::FlushSubnormals flush;  // see vmath.h
  std::vector<T> dalpha(n), dq(A), dp((size_t)n * A);
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
    T* __restrict dpp = dp.data();
    for (int j = 0; j < n; ++j) {  // alpha = softmax(s), s_j = v . tanh(q + d_j U_c)
      T ds = al[j] * (dalpha[j] - dot);
      const T* __restrict pj = actb + (size_t)j * A;
      T* __restrict dpj = dpp + (size_t)j * A;
#pragma omp simd
      for (int k = 0; k < A; ++k) {
        d_v[k] += ds * pj[k];
        dpj[k] = ds * v[k] * (T(1) - pj[k] * pj[k]);
        dqq[k] += dpj[k];
      }
    }
    for (int j = 0; j < n; ++j)  // p_j = q + d_j U_c: into each d_j, and into U_c
      add_rows<T, AF>(A, H, dpp + (size_t)j * A, u_cT, d_cache + j * cache_stride + (size_t)b * H);
    add_outers<T, AF>(H, A, n, cache + (size_t)b * H, cache_stride, dpp, d_u_c);
    add_rows<T, AF>(A, H, dqq, w_cT, d_h + (size_t)b * H);  // q = h W_c + r V_c
    add_outers<T, AF>(H, A, 1, h + (size_t)b * H, 0, dqq, d_w_c);
    add_rows<T, AF>(A, R, dqq, v_cT, d_r + (size_t)b * R);
    add_outers<T, AF>(R, A, 1, r + (size_t)b * R, 0, dqq, d_v_c);
  }
}

}  // namespace

extern "C" {
// Sizes, for the driver's check of the Python declaration (uwbench/native/parts.py): the parameters
// W_c (H, A), U_c (H, A), V_c (R, A), v (A), and the activations kept per cached state (A).
int cuw_params_size(int H, int R, int A) { return A * (2 * H + R + 1); }
int cuw_act_size(int, int, int A) { return A; }
#define UWB_CUW(T, SFX)                                                                                      \
  void cuw_fwd_##SFX(int B, int n, int H, int R, int A, const T* h, const T* cache, long cache_stride,      \
                     const T* r, const T* w_c, const T* u_c, const T* v_c, const T* v, T* a, T* alpha,        \
                     T* act) {                                                                                \
    if (A == 16)                                                                                              \
      cuw_fwd<T, 16>(B, n, H, R, A, h, cache, cache_stride, r, w_c, u_c, v_c, v, a, alpha, act);             \
    else                                                                                                      \
      cuw_fwd<T, 0>(B, n, H, R, A, h, cache, cache_stride, r, w_c, u_c, v_c, v, a, alpha, act);              \
  }                                                                                                           \
  void cuw_bwd_##SFX(int B, int n, int H, int R, int A, const T* h, const T* cache, long cache_stride,      \
                     const T* r, const T* w_cT, const T* u_cT, const T* v_cT, const T* v, const T* alpha,     \
                     const T* act, const T* d_a, T* d_h, T* d_cache, T* d_r, T* d_w_c, T* d_u_c, T* d_v_c,    \
                     T* d_v) {                                                                                \
    if (A == 16)                                                                                              \
      cuw_bwd<T, 16>(B, n, H, R, A, h, cache, cache_stride, r, w_cT, u_cT, v_cT, v, alpha, act, d_a, d_h,   \
                     d_cache, d_r, d_w_c, d_u_c, d_v_c, d_v);                                                 \
    else                                                                                                      \
      cuw_bwd<T, 0>(B, n, H, R, A, h, cache, cache_stride, r, w_cT, u_cT, v_cT, v, alpha, act, d_a, d_h,    \
                    d_cache, d_r, d_w_c, d_u_c, d_v_c, d_v);                                                  \
  }
UWB_CUW(float, f32)
UWB_CUW(double, f64)
}
