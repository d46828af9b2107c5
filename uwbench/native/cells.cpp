// Controller cells, forward and backward, for the native whole-sequence path.
//
// The same functions as uwbench/models/controllers.py (TF 1.x cell equations, docs/reference.md
// section 3.2). The driver does the matrix products; a cell gets the three parts of its gate
// pre-activations and adds them itself:
//
//     z = gx + hh + gr      gx: the step's input projection (with the bias), hh = h_{t-1} W_hh,
//                           gr = r_{t-1} W_read (each a (B, G) matrix with its own row stride)
//
// and keeps per row, in ``saved``, what its backward reads back (the LN-LSTM keeps its normalised gates and
// recomputes the rest; the others keep their activations).
// The backward writes dz (B, G) (with a row stride) and turns dc_t into dc_{t-1} in place; a cell with
// parameters of its own (the layer norms' gains and shifts) adds their gradients to ``dparams``.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "vmath.h"

namespace {

constexpr double kLnEps = 1e-12;  // TF's layer-norm variance epsilon
constexpr double kForgetBias = 1.0;

using uwb::sigmoid_row;
using uwb::sigmoid_v;
using uwb::tanh_row;
using uwb::tanh_v;
using uwb::Vector;
using uwb::hsum;
using uwb::load_v;
using uwb::store_v;

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

// ---- layer-norm LSTM (TF LayerNormBasicLSTMCell)
//
// Its rows are worked on padded to Hp = H rounded up to 16 values (uwb::kRowAlign: one 64-byte line of
// floats), in buffers of the kernel's own, so that every vector loop over a row runs whole vectors (the
// rest of a row of 125 would otherwise run lane by lane, the transcendentals included) and sigmoid and
// tanh run on whole rows (vmath.h). What is padded is zero (the parameters, the inputs), and the sums
// divide by H.
//
// params (10 H): [gate gains 4 x H | gate shifts 4 x H (the forget bias folded into f's) | cell gain H |
// cell shift H]. saved per row (4 Hp + 16): [normalised gates y 4 x Hp | gate rstds 4 | cell mean, cell
// rstd | unused]: the backward recomputes the activations, the cell and tanh(c) from these and c_{t-1},
// which costs less than keeping them (they would not fit in the caches between forward and backward;
// benchmarks/README.md).
inline int padded(int H) { return (H + uwb::kRowAlign - 1) / uwb::kRowAlign * uwb::kRowAlign; }
int ln_lstm_saved(int H) { return 4 * padded(H) + 16; }

// The parameters in padded rows (10 Hp), in their order: [gains 4 | shifts 4 | cell gain | cell shift].
template <typename T> void pad_params(int H, int Hp, const T* params, T* out) {
  for (int k = 0; k < 10; ++k)
    for (int u = 0; u < Hp; ++u) out[k * Hp + u] = u < H ? params[k * H + u] : T(0);
}

// dst[0, n) = src[0, n) (apart) by whole vectors, the last one overlapping the one before: a copy loop
// would become a call to memmove, which costs more than the copy at these lengths.
template <typename T> inline void copy_row(int n, const T* __restrict src, T* __restrict dst) {
  typedef typename Vector<T>::type V;
  constexpr int L = Vector<T>::lanes;
  if (n < L) {
    for (int u = 0; u < n; ++u) dst[u] = src[u];
    return;
  }
  int u = 0;
  for (; u + L <= n; u += L) store_v(dst + u, load_v<V>(src + u));
  if (u < n) store_v(dst + n - L, load_v<V>(src + n - L));
}

// A row of H into a padded row of Hp, the pad zero.
template <typename T> inline void load_row(int H, int Hp, const T* src, T* __restrict dst) {
  copy_row(H, src, dst);
  for (int u = H; u < Hp; ++u) dst[u] = T(0);
}

// z = gx + hh + gr (hh, gr optional) into z (Hp, zero in the pad), as copy_row.
template <typename T>
inline void add_row(int H, int Hp, const T* __restrict gx, const T* __restrict hh, const T* __restrict gr,
                    T* __restrict z) {
  typedef typename Vector<T>::type V;
  constexpr int L = Vector<T>::lanes;
  if (H < L) {
    gate_sum(H, gx, hh, gr, z);
  } else {
    for (int u = 0;; u += L) {
      if (u + L > H) u = H - L;  // the last vector, overlapping
      V v = load_v<V>(gx + u);
      if (hh) v += load_v<V>(hh + u);
      if (gr) v += load_v<V>(gr + u);
      store_v(z + u, v);
      if (u + L == H) break;
    }
  }
  for (int u = H; u < Hp; ++u) z[u] = T(0);
}

// Mean and 1 / sqrt(var + eps) (the biased variance) of x[0, H) for the n rows x + k Hp (n <= 4), each
// padded with zeros to Hp (the pad is set to the row's mean, so the centred pass runs over whole vectors
// too); the rows' sums are independent, so they run side by side.
template <typename T> inline void moments(int n, int H, int Hp, T* __restrict x, T* mean, T* rstd) {
  typedef typename Vector<T>::type V;
  constexpr int L = Vector<T>::lanes;
  V s[4] = {}, v[4] = {};
  for (int u = 0; u < Hp; u += L)
#pragma GCC unroll 4
    for (int k = 0; k < n; ++k) s[k] += load_v<V>(x + k * Hp + u);
  for (int k = 0; k < n; ++k) {
    mean[k] = hsum<T>(s[k]) / T(H);
    for (int u = H; u < Hp; ++u) x[k * Hp + u] = mean[k];
  }
  for (int u = 0; u < Hp; u += L)
#pragma GCC unroll 4
    for (int k = 0; k < n; ++k) {
      V c = load_v<V>(x + k * Hp + u) - mean[k];
      v[k] += c * c;
    }
  for (int k = 0; k < n; ++k) rstd[k] = T(1) / std::sqrt(hsum<T>(v[k]) / T(H) + T(kLnEps));
}

// Backward of out = y g + s, y = (x - mean) rstd, for the n rows (n <= 4) at k Hp of y, g, dout, dx, dg
// and ds (padded, g zero in the pad): dout -> dx; adds dg, ds. dx's pad is not meaningful.
template <typename T>
inline void ln_backward(int n, int H, int Hp, const T* __restrict y, const T* rstd, const T* __restrict g,
                        const T* __restrict dout, T* __restrict dx, T* __restrict dg, T* __restrict ds) {
  typedef typename Vector<T>::type V;
  constexpr int L = Vector<T>::lanes;
  V a[4] = {}, c[4] = {};  // sums of dy and of dy y
  for (int u = 0; u < Hp; u += L)
#pragma GCC unroll 4
    for (int k = 0; k < n; ++k) {
      const int i = k * Hp + u;
      const V d = load_v<V>(dout + i), yy = load_v<V>(y + i);
      const V dy = d * load_v<V>(g + i);
      store_v(dg + i, load_v<V>(dg + i) + d * yy);
      store_v(ds + i, load_v<V>(ds + i) + d);
      a[k] += dy;
      c[k] += dy * yy;
    }
  T mdy[4], mdyy[4];
  for (int k = 0; k < n; ++k) {
    mdy[k] = hsum<T>(a[k]) / T(H);
    mdyy[k] = hsum<T>(c[k]) / T(H);
  }
  for (int u = 0; u < Hp; u += L)
#pragma GCC unroll 4
    for (int k = 0; k < n; ++k) {
      const int i = k * Hp + u;
      const V dy = load_v<V>(dout + i) * load_v<V>(g + i);
      store_v(dx + i, rstd[k] * (dy - mdy[k] - load_v<V>(y + i) * mdyy[k]));
    }
}

// The gate activations i, j, f, o (4 x Hp) from the normalised gates y: sigmoid, except tanh for j.
template <typename T>
inline void gate_activations(int Hp, const T* __restrict y, const T* __restrict gain, const T* __restrict shift,
                             T* __restrict act) {
#pragma omp simd
  for (int u = 0; u < 4 * Hp; ++u) act[u] = y[u] * gain[u] + shift[u];
  sigmoid_row(Hp, act);
  tanh_row(Hp, act + Hp);
  sigmoid_row(2 * Hp, act + 2 * Hp);
}

// The cell's pre-norm value c f + i j into cpre (Hp; zero in the pad) from the activations and c_{t-1}.
template <typename T>
inline void cell_pre(int Hp, const T* __restrict act, const T* __restrict cp, T* __restrict cpre) {
#pragma omp simd
  for (int u = 0; u < Hp; ++u) cpre[u] = cp[u] * act[2 * Hp + u] + act[u] * act[Hp + u];
}

template <typename T>
void ln_lstm_fwd(int B, int H, const T* gx, long ld_gx, const T* hh, long ld_hh, const T* gr, long ld_gr,
                 const T* c_prev, const T* params, T* h_out, T* c_out, T* saved) {
  uwb::FlushSubnormals flush;  // see vmath.h
  const int Hp = padded(H), S = ln_lstm_saved(H);
  std::vector<T> buf(17 * (size_t)Hp);
  T* pp = buf.data();      // padded parameters, 10 Hp
  T* act = pp + 10 * Hp;   // 4 Hp
  T* cp = act + 4 * Hp;    // c_{t-1}, Hp
  T* cell = cp + Hp;       // pre-norm cell, then c, Hp
  T* h = cell + Hp;        // Hp
  pad_params(H, Hp, params, pp);
  const T* cgain = pp + 8 * Hp;
  const T* cshift = pp + 9 * Hp;
  for (int b = 0; b < B; ++b) {
    T* y = saved + (size_t)b * S;
    T* st = y + 4 * Hp;
    for (int k = 0; k < 4; ++k)  // z = gx + hh + gr
      add_row(H, Hp, gx + b * ld_gx + k * H, hh ? hh + b * ld_hh + k * H : nullptr,
              gr ? gr + b * ld_gr + k * H : nullptr, y + k * Hp);
    T mean[4];
    moments(4, H, Hp, y, mean, st);
    for (int k = 0; k < 4; ++k) {  // y = (z - mean) rstd -> the activation
      T* __restrict yk = y + k * Hp;
      const T rs = st[k];
      const T* gk = pp + k * Hp;
      const T* sk = pp + (4 + k) * Hp;
      T* __restrict ak = act + k * Hp;
#pragma omp simd
      for (int u = 0; u < Hp; ++u) {
        T v = (yk[u] - mean[k]) * rs;
        yk[u] = v;
        ak[u] = v * gk[u] + sk[u];
      }
      if (k == 1)
        tanh_row(Hp, ak);
      else
        sigmoid_row(Hp, ak);
    }
    load_row(H, Hp, c_prev + (size_t)b * H, cp);
    cell_pre(Hp, act, cp, cell);
    moments(1, H, Hp, cell, st + 4, st + 5);
    const T cm = st[4], crs = st[5];
#pragma omp simd
    for (int u = 0; u < Hp; ++u) h[u] = cell[u] = (cell[u] - cm) * crs * cgain[u] + cshift[u];  // c is normalised
    tanh_row(Hp, h);
#pragma omp simd
    for (int u = 0; u < Hp; ++u) h[u] *= act[3 * Hp + u];
    copy_row(H, cell, c_out + (size_t)b * H);
    copy_row(H, h, h_out + (size_t)b * H);
  }
}

// One row's backward, after the forward's values are recomputed: dh, dc (Hp) -> dzn, the gradient of
// the gates' layer-norm outputs (4 Hp), and dc_{t-1} into dc (Hp); adds the cell norm's dgain, dshift.
template <typename T>
inline void cell_backward(int H, int Hp, const T* __restrict act, const T* __restrict cp, const T* __restrict yc,
                          const T* __restrict tc, T crs, const T* cgain, const T* dh, T* dc, T* dzn, T* dcpre,
                          T* dcgain, T* dcshift) {
#pragma omp simd
  for (int u = 0; u < Hp; ++u) {  // h = tanh(c) o
    T o = act[3 * Hp + u];
    dzn[3 * Hp + u] = dh[u] * tc[u] * o * (T(1) - o);
    dc[u] = dc[u] + dh[u] * o * (T(1) - tc[u] * tc[u]);  // the gradient of the normalised cell
  }
  ln_backward(1, H, Hp, yc, &crs, cgain, dc, dcpre, dcgain, dcshift);
#pragma omp simd
  for (int u = 0; u < Hp; ++u) {  // c' = c f + i j
    T i = act[u], j = act[Hp + u], f = act[2 * Hp + u];
    T g = dcpre[u];
    dzn[u] = g * j * i * (T(1) - i);
    dzn[Hp + u] = g * i * (T(1) - j * j);
    dzn[2 * Hp + u] = g * cp[u] * f * (T(1) - f);
    dc[u] = g * f;
  }
}

template <typename T>
void ln_lstm_bwd(int B, int H, const T* c_prev, const T* saved, const T* params, const T* dh, long ld_dh, T* dc,
                 T* dz, long ld_dz, T* dparams, T*) {
  uwb::FlushSubnormals flush;  // see vmath.h
  const int Hp = padded(H), S = ln_lstm_saved(H);
  std::vector<T> buf(41 * (size_t)Hp);
  T* pp = buf.data();           // padded parameters, 10 Hp
  T* dpp = pp + 10 * Hp;        // their gradients, 10 Hp
  T* act = dpp + 10 * Hp;       // 4 Hp
  T* dzn = act + 4 * Hp;        // 4 Hp
  T* cp = dzn + 4 * Hp;         // c_{t-1}
  T* yc = cp + Hp;              // the normalised cell
  T* tc = yc + Hp;              // tanh(c)
  T* dhl = tc + Hp;             // dh
  T* dcl = dhl + Hp;            // dc
  T* dtmp = dcl + Hp;           // dcpre
  T* dgates = dtmp + Hp;        // the gates' dz, 4 Hp
  pad_params(H, Hp, params, pp);
  const T* cgain = pp + 8 * Hp;
  const T* cshift = pp + 9 * Hp;
  for (int b = 0; b < B; ++b) {
    const T* y = saved + (size_t)b * S;
    const T* st = y + 4 * Hp;
    gate_activations(Hp, y, pp, pp + 4 * Hp, act);
    load_row(H, Hp, c_prev + (size_t)b * H, cp);
    cell_pre(Hp, act, cp, yc);
    const T cm = st[4], crs = st[5];
#pragma omp simd
    for (int u = 0; u < Hp; ++u) {
      T v = (yc[u] - cm) * crs;
      yc[u] = v;
      tc[u] = v * cgain[u] + cshift[u];
    }
    tanh_row(Hp, tc);
    for (int u = H; u < Hp; ++u) yc[u] = T(0);
    load_row(H, Hp, dh + (size_t)b * ld_dh, dhl);
    load_row(H, Hp, dc + (size_t)b * H, dcl);
    cell_backward(H, Hp, act, cp, yc, tc, crs, cgain, dhl, dcl, dzn, dtmp, dpp + 8 * Hp, dpp + 9 * Hp);
    copy_row(H, dcl, dc + (size_t)b * H);
    ln_backward(4, H, Hp, y, st, pp, dzn, dgates, dpp, dpp + 4 * Hp);
    T* dzb = dz + (size_t)b * ld_dz;
    for (int k = 0; k < 4; ++k) copy_row(H, dgates + k * Hp, dzb + k * H);
  }
  for (int k = 0; k < 10; ++k)
    for (int u = 0; u < H; ++u) dparams[k * H + u] += dpp[k * Hp + u];
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
void lstm_bwd(int B, int H, const T* c_prev, const T* saved, const T*, const T* dh, long ld_dh, T* dc, T* dz,
              long ld_dz, T*, T*) {
  uwb::FlushSubnormals flush;  // see vmath.h
  const int G = 4 * H;
  for (int b = 0; b < B; ++b) {
    const T* act = saved + (size_t)b * lstm_saved(H);
    const T* tc = act + G;
    const T* dhb = dh + (size_t)b * ld_dh;
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
void rnn_bwd_h(int B, int H, const T* h_out, const T* dh, long ld_dh, T* dz, long ld_dz) {
  uwb::FlushSubnormals flush;  // see vmath.h
  for (int b = 0; b < B; ++b) {
    const T* hb = h_out + (size_t)b * H;
    const T* dhb = dh + (size_t)b * ld_dh;
    T* dzb = dz + (size_t)b * ld_dz;
    for (int u = 0; u < H; ++u) dzb[u] = dhb[u] * (T(1) - hb[u] * hb[u]);
  }
}

}  // namespace

// One ABI for every cell: <cell>_saved(H), <cell>_fwd_<t>(B, H, gx, ld_gx, hh, ld_hh, gr, ld_gr, c_prev,
// params, h_out, c_out, saved), <cell>_bwd_<t>(B, H, c_prev, h_out, saved, params, dh, dc, dz, ld_dz,
// dparams, scratch) with scratch of 6 H, and <cell>_bwd_ld_<t>, the same backward with dh's row stride
// after dh (..., dh, ld_dh, dc, ...): the LSTM baseline's driver keeps dh in rows padded to a multiple of
// 16, where the product that makes it runs faster. A cell without a memory cell (rnn) ignores c_prev,
// c_out and dc.
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
    NAME##_bwd<T>(B, H, c_prev, saved, params, dh, H, dc, dz, ld_dz, dparams, scratch);                       \
  }                                                                                                           \
  void NAME##_bwd_ld_##SFX(int B, int H, const T* c_prev, const T*, const T* saved, const T* params,          \
                           const T* dh, long ld_dh, T* dc, T* dz, long ld_dz, T* dparams, T* scratch) {       \
    NAME##_bwd<T>(B, H, c_prev, saved, params, dh, ld_dh, dc, dz, ld_dz, dparams, scratch);                   \
  }
UWB_CELL_BWD(ln_lstm, float, f32)
UWB_CELL_BWD(ln_lstm, double, f64)
UWB_CELL_BWD(lstm, float, f32)
UWB_CELL_BWD(lstm, double, f64)
void rnn_bwd_f32(int B, int H, const float*, const float* h_out, const float*, const float*, const float* dh,
                 float*, float* dz, long ld_dz, float*, float*) { rnn_bwd_h<float>(B, H, h_out, dh, H, dz, ld_dz); }
void rnn_bwd_f64(int B, int H, const double*, const double* h_out, const double*, const double*, const double* dh,
                 double*, double* dz, long ld_dz, double*, double*) { rnn_bwd_h<double>(B, H, h_out, dh, H, dz, ld_dz); }
void rnn_bwd_ld_f32(int B, int H, const float*, const float* h_out, const float*, const float*, const float* dh,
                    long ld_dh, float*, float* dz, long ld_dz, float*, float*) {
  rnn_bwd_h<float>(B, H, h_out, dh, ld_dh, dz, ld_dz);
}
void rnn_bwd_ld_f64(int B, int H, const double*, const double* h_out, const double*, const double*, const double* dh,
                    long ld_dh, double*, double* dz, long ld_dz, double*, double*) {
  rnn_bwd_h<double>(B, H, h_out, dh, ld_dh, dz, ld_dz);
}
}
