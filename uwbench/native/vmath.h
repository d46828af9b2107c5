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

template <typename T> inline T exp_v(T x) { return std::exp(x); }
template <> inline float exp_v<float>(float x) { return exp_f(x); }
template <typename T> inline T sigmoid_v(T x) { return T(1) / (T(1) + std::exp(-x)); }
template <> inline float sigmoid_v<float>(float x) { return sigmoid_f(x); }
template <typename T> inline T tanh_v(T x) { return std::tanh(x); }
template <> inline float tanh_v<float>(float x) { return tanh_f(x); }

}  // namespace uwb
