// Elementwise exp, sigmoid and tanh that the compiler can vectorise.
//
// Calls to the C library's expf / tanhf stop a loop from being vectorised (without -ffast-math,
// which would also drop NaN semantics the training loop relies on to see a diverging run), and a
// scalar expf costs about as much as a dozen vector lanes of a polynomial. The float versions here
// are branch-free:
//
//   exp(x) = 2^n exp(r),  n = round(x / ln 2),  r = x - n ln 2 in [-ln2/2, ln2/2]
//            exp(r) by its Taylor polynomial to degree 7 (truncation below 5e-9 relative), 2^n built in
//            the exponent bits; x is clamped to [-87, 88] first, so 2^n stays a normal float.
//   tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2 |x|), and its odd Taylor polynomial for |x| < 0.1,
//            where 1 - e would cancel.
//
// Both are within a few float ulps of the correctly rounded values, and a NaN input gives NaN. The
// double versions are the C library's (the float64 path is the one the tests compare at round-off).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace uwb {

// Subnormal floats (below 1.2e-38) cost a hundred times a normal operation on x86. Training makes
// them (saturated gates' derivatives, sharpened weightings, long products of small gradients), and
// where they appear an iteration slowed down by 10-20% in ways that depended on the data. Every kernel
// entry point holds one of these: subnormal inputs and results are taken as zero while it runs
// (flush-to-zero and denormals-are-zero), and the caller's floating-point mode is restored on return.
// A value that small is zero to the training either way; float64's subnormals (below 2.2e-308) are
// affected the same way and never appear in these models.
class FlushSubnormals {
 public:
#if defined(__SSE2__)
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }  // FTZ | DAZ
  ~FlushSubnormals() { _mm_setcsr(saved_); }

 private:
  unsigned int saved_;
#endif
};

inline float exp_f(float x) {
  x = x < -87.0f ? -87.0f : x;  // keeps a NaN (the comparisons are false)
  x = x > 88.0f ? 88.0f : x;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float t = x * 1.44269504088896341f + magic;
  float n = t - magic;
  float r = x - n * 0.693359375f;  // ln 2 in two parts (Cody-Waite), the first exact in few bits
  r = r - n * -2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float sigmoid_f(float x) { return 1.0f / (1.0f + exp_f(-x)); }

inline float tanh_f(float x) {
  float ax = std::fabs(x);
  float e = exp_f(-2.0f * ax);
  float big = (1.0f - e) / (1.0f + e);
  float z = x * x;  // x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835
  float small = ((((62.0f / 2835.0f) * z - 17.0f / 315.0f) * z + 2.0f / 15.0f) * z - 1.0f / 3.0f) * z * x + x;
  return ax < 0.1f ? small : std::copysign(big, x);
}

// ---- Whole rows as GCC vector types: sigmoid and tanh in place over a row whose length is a multiple of
// kRowAlign (the kernels' padded rows). The float versions are the same formulas as exp_f / tanh_f, written
// on vectors: the clamps are then selects within one vector path (written on scalars in a vectorised loop,
// the compiler may put the clamped lanes on a second path, which needs masked division or
// -fno-trapping-math to vectorise, see uwbench/native/__init__.py). The vector width is
// UWB_VECTOR_BYTES (uwbench/native/__init__.py sets it when it builds at a width other than the machine's):
// 64 with AVX-512, 32 with AVX, else 16.
#ifndef UWB_VECTOR_BYTES
#if defined(__AVX512F__)
#define UWB_VECTOR_BYTES 64
#elif defined(__AVX__)
#define UWB_VECTOR_BYTES 32
#else
#define UWB_VECTOR_BYTES 16
#endif
#endif
constexpr int kVectorBytes = UWB_VECTOR_BYTES;
constexpr int kRowAlign = 16;  // floats per padded row unit: a whole number of vectors at every width
static_assert(kRowAlign * sizeof(float) % kVectorBytes == 0, "a padded row must be whole vectors");

typedef float vfloat __attribute__((vector_size(kVectorBytes)));
typedef int32_t vint __attribute__((vector_size(kVectorBytes)));
constexpr int kFloatLanes = kVectorBytes / sizeof(float);

// Vectors of T at the build's width, with unaligned loads and stores (memcpy of a vector's size compiles
// to one vector move).
template <typename T> struct Vector {
  typedef T type __attribute__((vector_size(kVectorBytes)));
  static constexpr int lanes = kVectorBytes / sizeof(T);
};
template <typename V, typename T> inline V load_v(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V, typename T> inline void store_v(T* p, const V& v) { std::memcpy(p, &v, sizeof v); }
template <typename T, typename V> inline T hsum(const V& v) {
  T s = 0;
  for (int i = 0; i < Vector<T>::lanes; ++i) s += v[i];
  return s;
}

inline vfloat exp_vf(vfloat x) {
  const vfloat lo = vfloat{} - 87.0f, hi = vfloat{} + 88.0f;
  x = x < lo ? lo : x;  // keeps a NaN (the comparisons are false)
  x = x > hi ? hi : x;
  const float magic = 12582912.0f;  // see exp_f
  vfloat t = x * 1.44269504088896341f + magic;
  vfloat n = t - magic;
  vfloat r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  vfloat p = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  vint bits = (__builtin_convertvector(n, vint) + 127) << 23;  // 2^n
  return p * (vfloat)bits;
}

inline vfloat tanh_vf(vfloat x) {
  const vint sign = (vint)x & (vint{} + INT32_MIN);  // the sign bit
  const vfloat ax = (vfloat)((vint)x ^ sign);
  vfloat e = exp_vf(-2.0f * ax);
  vfloat big = (vfloat)((vint)((1.0f - e) / (1.0f + e)) | sign);
  vfloat z = x * x;
  vfloat small = ((((62.0f / 2835.0f) * z - 17.0f / 315.0f) * z + 2.0f / 15.0f) * z - 1.0f / 3.0f) * z * x + x;
  return ax < vfloat{} + 0.1f ? small : big;
}

template <typename T> inline void sigmoid_row(int n, T* x) {
  for (int u = 0; u < n; ++u) x[u] = T(1) / (T(1) + std::exp(-x[u]));
}
template <> inline void sigmoid_row<float>(int n, float* x) {
  for (int u = 0; u < n; u += kFloatLanes) store_v(x + u, 1.0f / (1.0f + exp_vf(-load_v<vfloat>(x + u))));
}
template <typename T> inline void tanh_row(int n, T* x) {
  for (int u = 0; u < n; ++u) x[u] = std::tanh(x[u]);
}
template <> inline void tanh_row<float>(int n, float* x) {
  for (int u = 0; u < n; u += kFloatLanes) store_v(x + u, tanh_vf(load_v<vfloat>(x + u)));
}

template <typename T> inline T exp_v(T x) { return std::exp(x); }
template <> inline float exp_v<float>(float x) { return exp_f(x); }
template <typename T> inline T sigmoid_v(T x) { return T(1) / (T(1) + std::exp(-x)); }
template <> inline float sigmoid_v<float>(float x) { return sigmoid_f(x); }
template <typename T> inline T tanh_v(T x) { return std::tanh(x); }
template <> inline float tanh_v<float>(float x) { return tanh_f(x); }

}  // namespace uwb
