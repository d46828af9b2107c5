// Controller cells, forward and backward, for the native whole-sequence path.
//
// The same functions as uwbench/models/controllers.py (TF 1.x cell equations, docs/reference.md
// section 3.2). The driver does the matrix products; a cell gets the three parts of its gate
// pre-activations and adds them itself:
//
//     z = gx + hh + gr      gx: the step's input projection (with the bias), hh = h_{t-1} W_hh,
//                           gr = r_{t-1} W_read (each a (B, G) matrix with its own row stride)
//
// and keeps per row, in ``saved``, what its backward reads back (no transcendental is recomputed).
// The backward writes dz (B, G) (with a row stride) and turns dc_t into dc_{t-1} in place; a cell with
// parameters of its own (the layer norms' gains and shifts) adds their gradients to ``dparams``.
#include <cmath>
#include <cstddef>

#include "vmath.h"

namespace {

constexpr double kLnEps = 1e-12;  // TF's layer-norm variance epsilon
constexpr double kForgetBias = 1.0;

using uwb::sigmoid_v;
using uwb::tanh_v;

template <typename T>
inline void gate_sum(int G, const T* __restrict gx, const T* __restrict hh, const T* __restrict gr,
                     T* __restrict z) {
  if (hh && gr) {
#pragma omp simd
    for (int k = 0; k < G; ++k) z[k] = gx[k] + hh[k] + gr[k];
    return;
  }
  for (int k = 0; k < G; ++k) z[k] = gx[k];
  if (hh)
    for (int k = 0; k < G; ++k) z[k] += hh[k];
  if (gr)
    for (int k = 0; k < G; ++k) z[k] += gr[k];
}

// Layer norm of x (H): mean and 1 / sqrt(var + eps), the biased variance.
template <typename T> inline void moments(int H, const T* __restrict x, T& mean, T& rstd) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int u = 0; u < H; ++u) s += x[u];
  mean = s / T(H);
  T v = 0;
#pragma omp simd reduction(+ : v)
  for (int u = 0; u < H; ++u) {
    T c = x[u] - mean;
    v += c * c;
  }
  rstd = T(1) / std::sqrt(v / T(H) + T(kLnEps));
}

// Backward of y = (x - mean) rstd, out = y g + s: dout (H) -> dx (H); adds dg, ds.
template <typename T>
inline void ln_backward(int H, const T* x, T mean, T rstd, const T* g, const T* dout, T* __restrict dx,
                        T* __restrict dg, T* __restrict ds) {
  T mdy = 0, mdyy = 0;
#pragma omp simd reduction(+ : mdy, mdyy)
  for (int u = 0; u < H; ++u) {
    T y = (x[u] - mean) * rstd;
    T dy = dout[u] * g[u];
    dg[u] += dout[u] * y;
    ds[u] += dout[u];
    mdy += dy;
    mdyy += dy * y;
  }
  mdy /= T(H);
  mdyy /= T(H);
#pragma omp simd
  for (int u = 0; u < H; ++u) {
    T y = (x[u] - mean) * rstd;
    dx[u] = rstd * (dout[u] * g[u] - mdy - y * mdyy);
  }
}

// ---- layer-norm LSTM (TF LayerNormBasicLSTMCell)
// params (10 H): [gate gains 4 x H | gate shifts 4 x H (the forget bias folded into f's) | cell gain H |
// cell shift H]. saved per row (10 H + 10): [z 4H | activations i, j, f, o 4H | gate means 4 | gate
// rstds 4 | pre-norm cell H | cell mean | cell rstd | tanh(c) H].
int ln_lstm_saved(int H) { return 10 * H + 10; }

template <typename T>
void ln_lstm_fwd(int B, int H, const T* gx, long ld_gx, const T* hh, long ld_hh, const T* gr, long ld_gr,
                 const T* c_prev, const T* params, T* h_out, T* c_out, T* saved) {
  uwb::FlushSubnormals flush;  // see vmath.h
  const int G = 4 * H, S = ln_lstm_saved(H);
  const T* gain = params;
  const T* shift = params + G;
  const T* cgain = params + 2 * G;
  const T* cshift = cgain + H;
  for (int b = 0; b < B; ++b) {
    T* sv = saved + (size_t)b * S;
    T* z = sv;
    T* act = sv + G;
    T* mean = act + G;
    T* rstd = mean + 4;
    T* cpre = rstd + 4;
    T* cstat = cpre + H;
    T* tc = cstat + 2;
    gate_sum(G, gx + b * ld_gx, hh ? hh + b * ld_hh : nullptr, gr ? gr + b * ld_gr : nullptr, z);
    for (int k = 0; k < 4; ++k) {  // z -> LN(z) g + s -> i, j, f, o
      const T* zk = z + k * H;
      moments(H, zk, mean[k], rstd[k]);
      T* __restrict ak = act + k * H;
      const T* gk = gain + k * H;
      const T* sk = shift + k * H;
      const T m = mean[k], rs = rstd[k];
      if (k == 1) {
#pragma omp simd
        for (int u = 0; u < H; ++u) ak[u] = tanh_v((zk[u] - m) * rs * gk[u] + sk[u]);
      } else {
#pragma omp simd
        for (int u = 0; u < H; ++u) ak[u] = sigmoid_v((zk[u] - m) * rs * gk[u] + sk[u]);
      }
    }
    const T* cp = c_prev + (size_t)b * H;
#pragma omp simd
    for (int u = 0; u < H; ++u) cpre[u] = cp[u] * act[2 * H + u] + act[u] * act[H + u];  // c f + i tanh(j)
    moments(H, cpre, cstat[0], cstat[1]);
    T* __restrict co = c_out + (size_t)b * H;
    T* __restrict ho = h_out + (size_t)b * H;
#pragma omp simd
    for (int u = 0; u < H; ++u) {
      co[u] = (cpre[u] - cstat[0]) * cstat[1] * cgain[u] + cshift[u];  // the stored cell is normalised
      tc[u] = tanh_v(co[u]);
      ho[u] = tc[u] * act[3 * H + u];
    }
  }
}

template <typename T>
void ln_lstm_bwd(int B, int H, const T* c_prev, const T* saved, const T* params, const T* dh, T* dc, T* dz,
                 long ld_dz, T* dparams, T* scratch) {
  uwb::FlushSubnormals flush;  // see vmath.h
  const int G = 4 * H, S = ln_lstm_saved(H);
  const T* gain = params;
  const T* cgain = params + 2 * G;
  T* dgain = dparams;
  T* dshift = dparams + G;
  T* dcgain = dparams + 2 * G;
  T* dcshift = dcgain + H;
  T* dcn = scratch;        // H
  T* dcpre = scratch + H;  // H
  T* dzn = scratch + 2 * H;  // 4H
  for (int b = 0; b < B; ++b) {
    const T* sv = saved + (size_t)b * S;
    const T* z = sv;
    const T* act = sv + G;
    const T* mean = act + G;
    const T* rstd = mean + 4;
    const T* cpre = rstd + 4;
    const T* cstat = cpre + H;
    const T* tc = cstat + 2;
    const T* dhb = dh + (size_t)b * H;
    T* dcb = dc + (size_t)b * H;
    const T* cp = c_prev + (size_t)b * H;
#pragma omp simd
    for (int u = 0; u < H; ++u) {  // h = tanh(c) o
      T o = act[3 * H + u];
      dzn[3 * H + u] = dhb[u] * tc[u] * o * (T(1) - o);
      dcn[u] = dcb[u] + dhb[u] * o * (T(1) - tc[u] * tc[u]);
    }
    ln_backward(H, cpre, cstat[0], cstat[1], cgain, dcn, dcpre, dcgain, dcshift);
#pragma omp simd
    for (int u = 0; u < H; ++u) {  // c' = c f + i j
      T i = act[u], j = act[H + u], f = act[2 * H + u];
      T g = dcpre[u];
      dzn[u] = g * j * i * (T(1) - i);
      dzn[H + u] = g * i * (T(1) - j * j);
      dzn[2 * H + u] = g * cp[u] * f * (T(1) - f);
      dcb[u] = g * f;
    }
    T* dzb = dz + (size_t)b * ld_dz;
    for (int k = 0; k < 4; ++k)
      ln_backward(H, z + k * H, mean[k], rstd[k], gain + k * H, dzn + k * H, dzb + k * H, dgain + k * H,
                  dshift + k * H);
  }
}

// ---- LSTM (TF LSTMCell, forget bias 1; the bias is in gx). saved per row: [i, j, f, o 4H | tanh(c) H].
int lstm_saved(int H) { return 5 * H; }

template <typename T>
void lstm_fwd(int B, int H, const T* gx, long ld_gx, const T* hh, long ld_hh, const T* gr, long ld_gr,
              const T* c_prev, const T*, T* h_out, T* c_out, T* saved) {
  uwb::FlushSubnormals flush;  // see vmath.h
  const int G = 4 * H;
  for (int b = 0; b < B; ++b) {
    T* act = saved + (size_t)b * lstm_saved(H);
    T* tc = act + G;
    gate_sum(G, gx + b * ld_gx, hh ? hh + b * ld_hh : nullptr, gr ? gr + b * ld_gr : nullptr, act);
    const T* cp = c_prev + (size_t)b * H;
    T* co = c_out + (size_t)b * H;
    T* ho = h_out + (size_t)b * H;
#pragma omp simd
    for (int u = 0; u < H; ++u) {
      T i = sigmoid_v(act[u]), j = tanh_v(act[H + u]), f = sigmoid_v(act[2 * H + u] + T(kForgetBias)),
        o = sigmoid_v(act[3 * H + u]);
      act[u] = i; act[H + u] = j; act[2 * H + u] = f; act[3 * H + u] = o;
      co[u] = cp[u] * f + i * j;
      tc[u] = tanh_v(co[u]);
      ho[u] = tc[u] * o;
    }
  }
}

template <typename T>
void lstm_bwd(int B, int H, const T* c_prev, const T* saved, const T*, const T* dh, T* dc, T* dz, long ld_dz,
              T*, T*) {
  uwb::FlushSubnormals flush;  // see vmath.h
  const int G = 4 * H;
  for (int b = 0; b < B; ++b) {
    const T* act = saved + (size_t)b * lstm_saved(H);
    const T* tc = act + G;
    const T* dhb = dh + (size_t)b * H;
    const T* cp = c_prev + (size_t)b * H;
    T* dcb = dc + (size_t)b * H;
    T* dzb = dz + (size_t)b * ld_dz;
#pragma omp simd
    for (int u = 0; u < H; ++u) {
      T i = act[u], j = act[H + u], f = act[2 * H + u], o = act[3 * H + u];
      T g = dcb[u] + dhb[u] * o * (T(1) - tc[u] * tc[u]);
      dzb[u] = g * j * i * (T(1) - i);
      dzb[H + u] = g * i * (T(1) - j * j);
      dzb[2 * H + u] = g * cp[u] * f * (T(1) - f);
      dzb[3 * H + u] = dhb[u] * tc[u] * o * (T(1) - o);
      dcb[u] = g * f;
    }
  }
}

// ---- tanh RNN (TF BasicRNNCell; the bias is in gx). Nothing saved: h itself is kept by the driver.
int rnn_saved(int) { return 0; }

template <typename T>
void rnn_fwd(int B, int H, const T* gx, long ld_gx, const T* hh, long ld_hh, const T* gr, long ld_gr, const T*,
             const T*, T* h_out, T*, T*) {
  uwb::FlushSubnormals flush;  // see vmath.h
  for (int b = 0; b < B; ++b) {
    T* ho = h_out + (size_t)b * H;
    gate_sum(H, gx + b * ld_gx, hh ? hh + b * ld_hh : nullptr, gr ? gr + b * ld_gr : nullptr, ho);
#pragma omp simd
    for (int u = 0; u < H; ++u) ho[u] = tanh_v(ho[u]);
  }
}

template <typename T>
void rnn_bwd_h(int B, int H, const T* h_out, const T* dh, T* dz, long ld_dz) {
  uwb::FlushSubnormals flush;  // see vmath.h
  for (int b = 0; b < B; ++b) {
    const T* hb = h_out + (size_t)b * H;
    const T* dhb = dh + (size_t)b * H;
    T* dzb = dz + (size_t)b * ld_dz;
    for (int u = 0; u < H; ++u) dzb[u] = dhb[u] * (T(1) - hb[u] * hb[u]);
  }
}

}  // namespace

// One ABI for every cell: <cell>_saved(H), <cell>_fwd_<t>(B, H, gx, ld_gx, hh, ld_hh, gr, ld_gr, c_prev,
// params, h_out, c_out, saved), <cell>_bwd_<t>(B, H, c_prev, h_out, saved, params, dh, dc, dz, ld_dz,
// dparams, scratch) with scratch of 6 H. A cell without a memory cell (rnn) ignores c_prev, c_out and dc.
#define UWB_CELL(NAME, T, SFX)                                                                              \
  void NAME##_fwd_##SFX(int B, int H, const T* gx, long ld_gx, const T* hh, long ld_hh, const T* gr,     \
                        long ld_gr, const T* c_prev, const T* params, T* h_out, T* c_out, T* saved) {    \
    NAME##_fwd<T>(B, H, gx, ld_gx, hh, ld_hh, gr, ld_gr, c_prev, params, h_out, c_out, saved);            \
  }

extern "C" {
// Sizes, for the driver's buffers and its check of the Python declarations (uwbench/native/parts.py):
// per-row floats kept for the backward, gate pre-activations G (the columns of W_hh), own parameters.
int ln_lstm_saved_size(int H) { return ln_lstm_saved(H); }
int lstm_saved_size(int H) { return lstm_saved(H); }
int rnn_saved_size(int H) { return rnn_saved(H); }
int ln_lstm_gate_size(int H) { return 4 * H; }
int lstm_gate_size(int H) { return 4 * H; }
int rnn_gate_size(int H) { return H; }
int ln_lstm_params_size(int H) { return 10 * H; }
int lstm_params_size(int) { return 0; }
int rnn_params_size(int) { return 0; }
UWB_CELL(ln_lstm, float, f32)
UWB_CELL(ln_lstm, double, f64)
UWB_CELL(lstm, float, f32)
UWB_CELL(lstm, double, f64)
UWB_CELL(rnn, float, f32)
UWB_CELL(rnn, double, f64)
#define UWB_CELL_BWD(NAME, T, SFX)                                                                          \
  void NAME##_bwd_##SFX(int B, int H, const T* c_prev, const T*, const T* saved, const T* params, const T* dh, \
                        T* dc, T* dz, long ld_dz, T* dparams, T* scratch) {                                    \
    NAME##_bwd<T>(B, H, c_prev, saved, params, dh, dc, dz, ld_dz, dparams, scratch);                          \
  }
UWB_CELL_BWD(ln_lstm, float, f32)
UWB_CELL_BWD(ln_lstm, double, f64)
UWB_CELL_BWD(lstm, float, f32)
UWB_CELL_BWD(lstm, double, f64)
void rnn_bwd_f32(int B, int H, const float*, const float* h_out, const float*, const float*, const float* dh,
                 float*, float* dz, long ld_dz, float*, float*) { rnn_bwd_h<float>(B, H, h_out, dh, dz, ld_dz); }
void rnn_bwd_f64(int B, int H, const double*, const double* h_out, const double*, const double*, const double* dh,
                 double*, double* dz, long ld_dz, double*, double*) { rnn_bwd_h<double>(B, H, h_out, dh, dz, ld_dz); }
}
