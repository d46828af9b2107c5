// One NTM memory step (write head, then read head), forward and backward, for the native whole-sequence
// path.
//
// The same function as uwbench/models/ntm.py (NTMMemory.parse, write, read; Graves et al. 2014 Eq. 2-9),
// row by row. As in dnc.cpp, the backward recomputes the row's forward into scratch and runs it in
// reverse, so the driver keeps only the state before each step and the step's raw interface.
//
// Per-row state layout (S = N M + 2 N): [ memory N x M | read weights N | write weights N ]
// Interface layout (X = 4 M + 12): [ read head: key M | beta | g | s 3 | gamma ][ write head: the same ]
//                                  [ erase M ][ add M ]
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "vmath.h"

namespace {

constexpr double kCosineEps = 1e-8;  // cos(k, M_i) = k . M_i / (|k| |M_i| + eps)

template <typename T> inline T softplus(T x) { return x > T(20) ? x : std::log1p(std::exp(x)); }
template <typename T> inline T sigmoid(T x) { return uwb::sigmoid_v(x); }

struct Dims {
  int N, M, S, X, head;
  Dims(int n, int m) : N(n), M(m), S(n * m + 2 * n), X(4 * m + 12), head(m + 6) {}
};

// One head's addressing (Eq. 5-9) from the previous weighting, with what its backward reads back.
template <typename T> struct Address {
  std::vector<T> key, dot, den, norm, wc, wg, wt, p, w;  // M, then N each
  T beta, g, s[3], gamma, top, psum, knorm;
  Address(int N, int M) : key(M), dot(N), den(N), norm(N), wc(N), wg(N), wt(N), p(N), w(N) {}
};

// raw: this head's M + 6 clipped values; memory (N x M); prev (N) -> a.w
template <typename T> void address_fwd(int N, int M, const T* raw, const T* __restrict mem, const T* prev,
                                       Address<T>& a) {
  T* __restrict key = a.key.data();
#pragma omp simd
  for (int m = 0; m < M; ++m) key[m] = uwb::tanh_v(raw[m]);
  a.beta = softplus(raw[M]);
  a.g = sigmoid(raw[M + 1]);
  T mx = std::max(raw[M + 2], std::max(raw[M + 3], raw[M + 4]));
  T e0 = std::exp(raw[M + 2] - mx), e1 = std::exp(raw[M + 3] - mx), e2 = std::exp(raw[M + 4] - mx);
  T es = e0 + e1 + e2;
  a.s[0] = e0 / es; a.s[1] = e1 / es; a.s[2] = e2 / es;  // offsets -1, 0, +1
  a.gamma = T(1) + softplus(raw[M + 5]);
  // content (Eq. 5-6): softmax_i(beta k . M_i / (|k| |M_i| + eps))
  T kk = 0;
#pragma omp simd reduction(+ : kk)
  for (int m = 0; m < M; ++m) kk += key[m] * key[m];
  a.knorm = std::sqrt(kk);
  T zmax = -INFINITY;
  for (int i = 0; i < N; ++i) {
    const T* row = mem + (size_t)i * M;
    T dot = 0, mm = 0;
#pragma omp simd reduction(+ : dot, mm)
    for (int m = 0; m < M; ++m) {
      dot += key[m] * row[m];
      mm += row[m] * row[m];
    }
    a.dot[i] = dot;
    a.norm[i] = std::sqrt(mm);
    a.den[i] = a.norm[i] * a.knorm + T(kCosineEps);
    a.wc[i] = a.beta * dot / a.den[i];
    zmax = std::max(zmax, a.wc[i]);
  }
  T zs = 0;
  for (int i = 0; i < N; ++i) { a.wc[i] = std::exp(a.wc[i] - zmax); zs += a.wc[i]; }
  for (int i = 0; i < N; ++i) a.wc[i] /= zs;
  // interpolation (Eq. 7), circular shift (Eq. 8), sharpening (Eq. 9) with the maximum factored out
  for (int i = 0; i < N; ++i) a.wg[i] = prev[i] + a.g * (a.wc[i] - prev[i]);
  a.top = -INFINITY;
  for (int i = 0; i < N; ++i) {
    int up = i + 1 == N ? 0 : i + 1, down = i == 0 ? N - 1 : i - 1;
    a.wt[i] = a.s[0] * a.wg[up] + a.s[1] * a.wg[i] + a.s[2] * a.wg[down];
    a.top = std::max(a.top, a.wt[i]);
  }
  a.psum = 0;
  for (int i = 0; i < N; ++i) { a.p[i] = std::pow(a.wt[i] / a.top, a.gamma); a.psum += a.p[i]; }
  for (int i = 0; i < N; ++i) a.w[i] = a.p[i] / a.psum;
}

// Backward of address_fwd: dw (N) -> adds to dmem (N x M) and dprev (N); writes draw (M + 6).
template <typename T> void address_bwd(int N, int M, const T* raw, const T* __restrict mem, const T* prev,
                                       const Address<T>& a, const T* dw, T* __restrict dmem, T* dprev, T* draw,
                                       std::vector<T>& tmp) {
  T* dwt = tmp.data();
  T* dwg = dwt + N;
  T* dwc = dwg + N;
  // sharpening: w = p / sum p, p = (wt / top)^gamma (top held constant)
  T wdw = 0;
  for (int i = 0; i < N; ++i) wdw += dw[i] * a.w[i];
  T dgamma = 0;
  for (int i = 0; i < N; ++i) {
    T dp = (dw[i] - wdw) / a.psum;
    T u = a.wt[i] / a.top;
    dwt[i] = dp * a.gamma * std::pow(u, a.gamma - T(1)) / a.top;
    if (u > T(0)) dgamma += dp * a.p[i] * std::log(u);
  }
  // circular shift
  T ds[3] = {0, 0, 0};
  for (int i = 0; i < N; ++i) dwg[i] = 0;
  for (int i = 0; i < N; ++i) {
    int up = i + 1 == N ? 0 : i + 1, down = i == 0 ? N - 1 : i - 1;
    ds[0] += dwt[i] * a.wg[up];
    ds[1] += dwt[i] * a.wg[i];
    ds[2] += dwt[i] * a.wg[down];
    dwg[up] += a.s[0] * dwt[i];
    dwg[i] += a.s[1] * dwt[i];
    dwg[down] += a.s[2] * dwt[i];
  }
  // interpolation
  T dg = 0;
  for (int i = 0; i < N; ++i) {
    dg += dwg[i] * (a.wc[i] - prev[i]);
    dprev[i] += dwg[i] * (T(1) - a.g);
    dwc[i] = dwg[i] * a.g;
  }
  // content softmax, then z_i = beta dot_i / den_i, den_i = |M_i| |k| + eps
  T cdc = 0;
  for (int i = 0; i < N; ++i) cdc += a.wc[i] * dwc[i];
  T dbeta = 0, dknorm = 0;
  T* __restrict dkey = dwc + N;  // M
  for (int m = 0; m < M; ++m) dkey[m] = 0;
  const T* key = a.key.data();
  for (int i = 0; i < N; ++i) {
    T dz = a.wc[i] * (dwc[i] - cdc);
    dbeta += dz * a.dot[i] / a.den[i];
    T ddot = dz * a.beta / a.den[i];
    T dden = -dz * a.beta * a.dot[i] / (a.den[i] * a.den[i]);
    dknorm += dden * a.norm[i];
    T dnorm = dden * a.knorm;
    T scale = a.norm[i] > T(0) ? dnorm / a.norm[i] : T(0);  // d|M_i| / dM_i = M_i / |M_i| (0 at 0)
    const T* row = mem + (size_t)i * M;
    T* __restrict drow = dmem + (size_t)i * M;
#pragma omp simd
    for (int m = 0; m < M; ++m) {
      dkey[m] += ddot * row[m];
      drow[m] += ddot * key[m] + scale * row[m];
    }
  }
  T kscale = a.knorm > T(0) ? dknorm / a.knorm : T(0);
  for (int m = 0; m < M; ++m) draw[m] = (dkey[m] + kscale * key[m]) * (T(1) - key[m] * key[m]);  // tanh
  draw[M] = dbeta * sigmoid(raw[M]);                                                              // softplus
  draw[M + 1] = dg * a.g * (T(1) - a.g);                                                          // sigmoid
  T sds = a.s[0] * ds[0] + a.s[1] * ds[1] + a.s[2] * ds[2];
  for (int o = 0; o < 3; ++o) draw[M + 2 + o] = a.s[o] * (ds[o] - sds);                           // softmax
  draw[M + 5] = dgamma * sigmoid(raw[M + 5]);                                                     // 1 + softplus
}

template <typename T> struct Row {
  std::vector<T> xi, erase, add;
  Address<T> rh, wh;
  std::vector<T> mem_new;  // the memory after the write (the read's memory)
  Row(const Dims& d) : xi(d.X), erase(d.M), add(d.M), rh(d.N, d.M), wh(d.N, d.M), mem_new(d.N * d.M) {}
};

template <typename T> void row_forward(const Dims& d, bool write, T clip, const T* raw, const T* sp, T* sn, T* r,
                                       Row<T>& row) {
  const int N = d.N, M = d.M;
  T* __restrict xi = row.xi.data();
  for (int j = 0; j < d.X; ++j) {  // a NaN stays NaN, as in torch.clamp
    T v = raw[j];
    v = v < -clip ? -clip : v;
    xi[j] = v > clip ? clip : v;
  }
  const T* mp = sp;
  T* mn = sn;
  if (write) {
    const T* e_raw = xi + 2 * d.head;
    const T* a_raw = e_raw + M;
    T* __restrict e = row.erase.data();
    T* __restrict ad = row.add.data();
#pragma omp simd
    for (int m = 0; m < M; ++m) {
      e[m] = sigmoid(e_raw[m]);
      ad[m] = uwb::tanh_v(a_raw[m]);
    }
    address_fwd(N, M, xi + d.head, mp, sp + N * M + N, row.wh);
    for (int i = 0; i < N; ++i) {  // erase and add (Eq. 3-4)
      const T* __restrict src = mp + (size_t)i * M;
      T* __restrict dst = mn + (size_t)i * M;
      T w = row.wh.w[i];
#pragma omp simd
      for (int m = 0; m < M; ++m) dst[m] = src[m] * (T(1) - w * e[m]) + w * ad[m];
    }
    std::memcpy(sn + N * M + N, row.wh.w.data(), sizeof(T) * N);
  } else {
    std::memcpy(mn, mp, sizeof(T) * N * M);
    std::memcpy(sn + N * M + N, sp + N * M + N, sizeof(T) * N);
  }
  address_fwd(N, M, xi, mn, sp + N * M, row.rh);  // the read head on the (just written) memory
  std::memcpy(sn + N * M, row.rh.w.data(), sizeof(T) * N);
  for (int m = 0; m < M; ++m) r[m] = 0;
  for (int i = 0; i < N; ++i) {  // r = sum_i w_i M_i (Eq. 2)
    const T* __restrict src = mn + (size_t)i * M;
    T w = row.rh.w[i];
#pragma omp simd
    for (int m = 0; m < M; ++m) r[m] += w * src[m];
  }
}

template <typename T>
void ntm_fwd(int B, int N, int M, int write, double clip, const T* xi_raw, const T* state_prev, T* state_next,
             T* r_out) {
  uwb::FlushSubnormals flush;  // see vmath.h
  Dims d(N, M);
  Row<T> row(d);
  for (int b = 0; b < B; ++b)
    row_forward(d, write != 0, T(clip), xi_raw + (size_t)b * d.X, state_prev + (size_t)b * d.S,
                state_next + (size_t)b * d.S, r_out + (size_t)b * M, row);
}

template <typename T>
void ntm_bwd(int B, int N, int M, int write, double clip, const T* xi_raw, const T* state_prev, const T* d_state_next,
             const T* d_r, T* d_state_prev, T* d_xi_raw) {
  uwb::FlushSubnormals flush;  // see vmath.h
  Dims d(N, M);
  Row<T> row(d);
  std::vector<T> sn(d.S), r(M), dmn(N * M), dw(N), dxi(d.X), tmp(3 * N + M);
  const T tclip = T(clip);
  for (int b = 0; b < B; ++b) {
    const T* raw = xi_raw + (size_t)b * d.X;
    const T* sp = state_prev + (size_t)b * d.S;
    const T* dsn = d_state_next + (size_t)b * d.S;
    const T* dr = d_r + (size_t)b * M;
    T* dsp = d_state_prev + (size_t)b * d.S;
    T* dx = d_xi_raw + (size_t)b * d.X;
    row_forward(d, write != 0, tclip, raw, sp, sn.data(), r.data(), row);
    const T* xi = row.xi.data();
    const T* mn = sn.data();
    std::copy(dsn, dsn + N * M, dmn.begin());
    std::fill(dxi.begin(), dxi.end(), T(0));
    // read: r = sum_i w_i M_i
    for (int i = 0; i < N; ++i) {
      const T* __restrict src = mn + (size_t)i * M;
      T* __restrict dst = dmn.data() + (size_t)i * M;
      T w = row.rh.w[i], acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int m = 0; m < M; ++m) {
        acc += dr[m] * src[m];
        dst[m] += w * dr[m];
      }
      dw[i] = dsn[N * M + i] + acc;
    }
    T* dwr_prev = dsp + N * M;
    T* dww_prev = dsp + N * M + N;
    for (int i = 0; i < N; ++i) dwr_prev[i] = 0;
    address_bwd(N, M, xi, mn, sp + N * M, row.rh, dw.data(), dmn.data(), dwr_prev, dxi.data(), tmp);
    if (write) {
      const T* mp = sp;
      const T* e = row.erase.data();
      const T* ad = row.add.data();
      T* de = dxi.data() + 2 * d.head;
      T* da = de + M;
      T* dmp = dsp;
      for (int i = 0; i < N; ++i) dw[i] = dsn[N * M + N + i];
      for (int i = 0; i < N; ++i) {  // erase and add
        const T* __restrict g = dmn.data() + (size_t)i * M;
        const T* __restrict src = mp + (size_t)i * M;
        T* __restrict dst = dmp + (size_t)i * M;
        T w = row.wh.w[i], acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int m = 0; m < M; ++m) {
          dst[m] = g[m] * (T(1) - w * e[m]);
          acc += g[m] * (ad[m] - src[m] * e[m]);
          de[m] -= g[m] * w * src[m];
          da[m] += g[m] * w;
        }
        dw[i] += acc;
      }
      for (int m = 0; m < M; ++m) {
        de[m] *= e[m] * (T(1) - e[m]);
        da[m] *= T(1) - ad[m] * ad[m];
      }
      for (int i = 0; i < N; ++i) dww_prev[i] = 0;
      address_bwd(N, M, xi + d.head, mp, sp + N * M + N, row.wh, dw.data(), dmp, dww_prev, dxi.data() + d.head, tmp);
    } else {
      std::copy(dmn.begin(), dmn.end(), dsp);
      for (int i = 0; i < N; ++i) dww_prev[i] = dsn[N * M + N + i];
    }
    for (int j = 0; j < d.X; ++j) dx[j] = (raw[j] >= -tclip && raw[j] <= tclip) ? dxi[j] : T(0);
  }
}

}  // namespace

extern "C" {
int ntm_state_size(int N, int M) { return Dims(N, M).S; }
int ntm_interface_size(int N, int M) { return Dims(N, M).X; }
int ntm_read_size(int, int M) { return M; }
void ntm_fwd_f32(int B, int N, int M, int write, double clip, const float* xi, const float* sp, float* sn, float* r) {
  ntm_fwd<float>(B, N, M, write, clip, xi, sp, sn, r);
}
void ntm_fwd_f64(int B, int N, int M, int write, double clip, const double* xi, const double* sp, double* sn,
                 double* r) { ntm_fwd<double>(B, N, M, write, clip, xi, sp, sn, r); }
void ntm_bwd_f32(int B, int N, int M, int write, double clip, const float* xi, const float* sp, const float* dsn,
                 const float* dr, float* dsp, float* dxi) { ntm_bwd<float>(B, N, M, write, clip, xi, sp, dsn, dr, dsp, dxi); }
void ntm_bwd_f64(int B, int N, int M, int write, double clip, const double* xi, const double* sp, const double* dsn,
                 const double* dr, double* dsp, double* dxi) {
  ntm_bwd<double>(B, N, M, write, clip, xi, sp, dsn, dr, dsp, dxi);
}
}
