// One DNC memory step (write, then read), forward and backward, for the native whole-sequence path.
//
// The same function as uwbench/models/dnc_memory.py (parse_interface, dnc_write, dnc_read; the
// formulas are in that module's docstring and docs/reference.md section 4), row by row: every batch
// row is independent. The backward recomputes the row's forward into scratch and then runs it in
// reverse, so the driver keeps only the state before each step and the step's raw interface.
//
// Per-row state layout (S = N W + 3 N + N N + R N floats):
//   [ memory N x W | usage N | precedence N | link N x N | write weights N | read weights R x N ]
// Interface layout (X = W R + 3 W + 5 R + 3), TF row-major reshapes as in parse_interface:
//   [ read keys W x R (index w R + r) | read strengths R | write key W | write strength 1 | erase W |
//     write vector W | free gates R | allocation gate 1 | write gate 1 | read modes 3 x R (m R + r) ]
// The read vector is [W, R] flattened row-major: r[w R + r].
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "vmath.h"

namespace {

constexpr double kNormFloor = 1e-12;  // TF l2_normalize's floor on the squared norm

template <typename T> inline T sigmoid(T x) { return uwb::sigmoid_v(x); }

// torch.nn.functional.softplus with beta 1, threshold 20
template <typename T> inline T softplus(T x) { return x > T(20) ? x : std::log1p(std::exp(x)); }
template <typename T> inline T softplus_grad(T x) {
  if (x > T(20)) return T(1);
  T z = std::exp(x);
  return z / (z + T(1));
}

struct Dims {
  int N, W, R;
  int S, X;
  int oM, oU, oP, oL, oWW, oWR;                                          // state offsets
  int iRK, iRS, iWK, iWS, iER, iWV, iFG, iAG, iWG, iRM;                  // interface offsets
  Dims(int n, int w, int r) : N(n), W(w), R(r) {
    oM = 0; oU = N * W; oP = oU + N; oL = oP + N; oWW = oL + N * N; oWR = oWW + N; S = oWR + R * N;
    iRK = 0; iRS = W * R; iWK = iRS + R; iWS = iWK + W; iER = iWS + 1; iWV = iER + W; iFG = iWV + W;
    iAG = iFG + R; iWG = iAG + 1; iRM = iWG + 1; X = iRM + 3 * R;
  }
};

// The activated interface of one row.
template <typename T> struct Iface {
  std::vector<T> xi;        // X, clipped
  std::vector<T> rkey;      // R x W, head-major
  std::vector<T> rbeta;     // R
  std::vector<T> erase;     // W
  std::vector<T> fgate;     // R
  std::vector<T> modes;     // R x 3 (backward, content, forward)
  T wbeta, ga, gw;
  explicit Iface(const Dims& d) : xi(d.X), rkey(d.R * d.W), rbeta(d.R), erase(d.W), fgate(d.R), modes(d.R * 3) {}
};

template <typename T> void parse(const Dims& d, const T* raw, T clip, Iface<T>& f) {
  T* __restrict xc = f.xi.data();
#pragma omp simd
  for (int j = 0; j < d.X; ++j) {  // a NaN stays NaN, as in torch.clamp
    T v = raw[j];
    v = v < -clip ? -clip : v;
    xc[j] = v > clip ? clip : v;
  }
  const T* xi = f.xi.data();
  for (int r = 0; r < d.R; ++r) {
    for (int w = 0; w < d.W; ++w) f.rkey[r * d.W + w] = xi[d.iRK + w * d.R + r];
    f.rbeta[r] = T(1) + softplus(xi[d.iRS + r]);
    f.fgate[r] = sigmoid(xi[d.iFG + r]);
    T m0 = xi[d.iRM + r], m1 = xi[d.iRM + d.R + r], m2 = xi[d.iRM + 2 * d.R + r];
    T mx = std::max(m0, std::max(m1, m2));
    T e0 = std::exp(m0 - mx), e1 = std::exp(m1 - mx), e2 = std::exp(m2 - mx), s = e0 + e1 + e2;
    f.modes[r * 3 + 0] = e0 / s; f.modes[r * 3 + 1] = e1 / s; f.modes[r * 3 + 2] = e2 / s;
  }
  f.wbeta = T(1) + softplus(xi[d.iWS]);
  T* __restrict er = f.erase.data();
#pragma omp simd
  for (int w = 0; w < d.W; ++w) er[w] = sigmoid(xi[d.iER + w]);
  f.ga = sigmoid(xi[d.iAG]);
  f.gw = sigmoid(xi[d.iWG]);
}

// Content weighting C(M, k, beta)_i = softmax_i(beta cos(M_i, k)) with the TF norm floors.
// Keeps what its backward needs: dots (N), inverse row norms (N), the key's inverse norm.
template <typename T> struct Content {
  std::vector<T> dot, invm, norm2, c;  // k . M_i, 1 / max(|M_i|, 1e-6), |M_i|^2, the weights
  T invk, knorm2;
  explicit Content(int n) : dot(n), invm(n), norm2(n), c(n), invk(0), knorm2(0) {}
};

template <typename T>
void content_fwd(int N, int W, const T* __restrict M, const T* __restrict k, T beta, const Content<T>* known,
                 Content<T>& out) {
  T kk = 0;
#pragma omp simd reduction(+ : kk)
  for (int w = 0; w < W; ++w) kk += k[w] * k[w];
  out.knorm2 = kk;
  out.invk = T(1) / std::sqrt(std::max(kk, T(kNormFloor)));
  T scale = beta * out.invk;
  T mx = -INFINITY;
  for (int i = 0; i < N; ++i) {
    const T* row = M + (size_t)i * W;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int w = 0; w < W; ++w) dot += k[w] * row[w];
    T mm;
    if (known) {  // another head on the same memory: its row norms are known
      mm = known->norm2[i];
    } else {
      mm = 0;
#pragma omp simd reduction(+ : mm)
      for (int w = 0; w < W; ++w) mm += row[w] * row[w];
    }
    T im = known ? known->invm[i] : T(1) / std::sqrt(std::max(mm, T(kNormFloor)));
    out.dot[i] = dot;
    out.invm[i] = im;
    out.norm2[i] = mm;
    T s = dot * im * scale;
    out.c[i] = s;
    mx = std::max(mx, s);
  }
  T sum = 0;
  for (int i = 0; i < N; ++i) { out.c[i] = uwb::exp_v(out.c[i] - mx); sum += out.c[i]; }
  for (int i = 0; i < N; ++i) out.c[i] /= sum;
}

// Backward of content_fwd: dc (N) -> accumulates into dM (N x W) and dk (W); returns d beta.
template <typename T>
T content_bwd(int N, int W, const T* __restrict M, const T* __restrict k, T beta, const Content<T>& f,
              const T* dc, T* __restrict dM, T* __restrict dk) {
  T cdc = 0;
  for (int i = 0; i < N; ++i) cdc += f.c[i] * dc[i];
  T scale = beta * f.invk, dscale = 0;
  for (int i = 0; i < N; ++i) {
    T ds = f.c[i] * (dc[i] - cdc);                // softmax
    T ddot = ds * f.invm[i] * scale;              // s_i = dot_i invm_i scale
    T dinvm = ds * f.dot[i] * scale;
    dscale += ds * f.dot[i] * f.invm[i];
    const T* row = M + (size_t)i * W;
    T* __restrict drow = dM + (size_t)i * W;
    // invm_i = 1 / sqrt(max(|M_i|^2, floor)): d|M_i|^2 = -invm^3 / 2, zero below the floor
    T im = f.invm[i];
    T dnorm2 = f.norm2[i] < T(kNormFloor) ? T(0) : dinvm * T(-0.5) * im * im * im;
#pragma omp simd
    for (int w = 0; w < W; ++w) {
      dk[w] += ddot * row[w];
      drow[w] += ddot * k[w] + T(2) * dnorm2 * row[w];
    }
  }
  T dbeta = dscale * f.invk;
  T dinvk_total = dscale * beta;
  T ik = f.invk;
  if (!(f.knorm2 < T(kNormFloor))) {
    T dk2 = dinvk_total * T(-0.5) * ik * ik * ik;
#pragma omp simd
    for (int w = 0; w < W; ++w) dk[w] += T(2) * dk2 * k[w];
  }
  return dbeta;
}

// Everything one row's forward makes that its backward reads back.
template <typename T> struct RowFwd {
  Iface<T> f;
  // write
  std::vector<T> psi, usage, alloc, ww, prefix, sorted;  // N, N, N, N, N+1 (exclusive products), N
  std::vector<int> order;                                 // N, slots by ascending usage (stable)
  Content<T> wc;
  // read, per head
  std::vector<Content<T>> rc;
  std::vector<T> fwd, bwd, wr;                            // R x N each
  std::vector<T> rh;                                      // W, one head's read vector
  explicit RowFwd(const Dims& d)
      : f(d), psi(d.N), usage(d.N), alloc(d.N), ww(d.N), prefix(d.N + 1), sorted(d.N), order(d.N), wc(d.N),
        rc(d.R, Content<T>(d.N)), fwd(d.R * d.N), bwd(d.R * d.N), wr(d.R * d.N), rh(d.W) {}
};

template <typename T> void sort_slots(int N, const T* u, int* order) {
  for (int i = 0; i < N; ++i) order[i] = i;
  if (N <= 32) {  // insertion sort: stable, the lower slot first among ties (as TF's top_k on -u)
    for (int i = 1; i < N; ++i) {
      int o = order[i], j = i - 1;
      while (j >= 0 && u[order[j]] > u[o]) { order[j + 1] = order[j]; --j; }
      order[j + 1] = o;
    }
  } else {
    std::stable_sort(order, order + N, [u](int a, int b) { return u[a] < u[b]; });
  }
}

// The row's forward: writes state_next (S) and r (W R). ``fw`` keeps the intermediates.
template <typename T>
void row_forward(const Dims& d, bool write, T clip, const T* raw, const T* sp, T* sn, T* r, RowFwd<T>& fw) {
  const int N = d.N, W = d.W, R = d.R;
  parse(d, raw, clip, fw.f);
  const Iface<T>& f = fw.f;
  const T* Mp = sp + d.oM;
  const T* Lp = sp + d.oL;
  const T* pp = sp + d.oP;
  const T* wrp = sp + d.oWR;
  std::memcpy(sn, sp, sizeof(T) * d.S);
  T* Mn = sn + d.oM;
  T* Ln = sn + d.oL;
  if (write) {
    const T* up = sp + d.oU;
    const T* wwp = sp + d.oWW;
    // retention psi = prod_r (1 - f_r w^r-_r); usage u = (u- + w^w- (1 - u-)) psi
    for (int i = 0; i < N; ++i) {
      T psi = T(1) - f.fgate[0] * wrp[i];
      for (int h = 1; h < R; ++h) psi *= T(1) - f.fgate[h] * wrp[h * N + i];
      fw.psi[i] = psi;
      fw.usage[i] = (up[i] + wwp[i] * (T(1) - up[i])) * psi;
    }
    // allocation a[phi_j] = (1 - u[phi_j]) prod_{i<j} u[phi_i]
    sort_slots(N, fw.usage.data(), fw.order.data());
    fw.prefix[0] = T(1);
    for (int j = 0; j < N; ++j) {
      T u = fw.usage[fw.order[j]];
      fw.sorted[j] = u;
      fw.alloc[fw.order[j]] = (T(1) - u) * fw.prefix[j];
      fw.prefix[j + 1] = fw.prefix[j] * u;
    }
    // write weighting w^w = g^w (c + g^a (a - c)) with c the content weighting of the write key on M-
    content_fwd(N, W, Mp, f.xi.data() + d.iWK, f.wbeta, (const Content<T>*)nullptr, fw.wc);
    T wsum = 0;
    for (int i = 0; i < N; ++i) {
      T c = fw.wc.c[i];
      fw.ww[i] = f.gw * (c + f.ga * (fw.alloc[i] - c));
      wsum += fw.ww[i];
    }
    const T* ww = fw.ww.data();
    // link L[i,j] = (1 - w_i - w_j) L-[i,j] + w_i p-_j, zero diagonal; precedence p = (1 - sum w) p- + w
    for (int i = 0; i < N; ++i) {
      for (int j = 0; j < N; ++j) Ln[i * N + j] = (T(1) - ww[i] - ww[j]) * Lp[i * N + j] + ww[i] * pp[j];
      Ln[i * N + i] = 0;
    }
    for (int i = 0; i < N; ++i) sn[d.oP + i] = ww[i] + (T(1) - wsum) * pp[i];
    // erase and add M = M- (1 - w e^T) + w v^T
    const T* e = f.erase.data();
    const T* v = f.xi.data() + d.iWV;
    for (int i = 0; i < N; ++i) {
      const T* __restrict mp = Mp + (size_t)i * W;
      T* __restrict mn = Mn + (size_t)i * W;
      T wi = ww[i];
#pragma omp simd
      for (int w = 0; w < W; ++w) mn[w] = mp[w] * (T(1) - wi * e[w]) + wi * v[w];
    }
    for (int i = 0; i < N; ++i) { sn[d.oU + i] = fw.usage[i]; sn[d.oWW + i] = ww[i]; }
  }
  // read: w^r = pi_b (L^T w^r-) + pi_c C(M, k^r, beta^r) + pi_f (L w^r-), r = M^T w^r
  for (int h = 0; h < R; ++h) {
    content_fwd(N, W, Mn, fw.f.rkey.data() + h * W, f.rbeta[h], h > 0 ? &fw.rc[0] : (const Content<T>*)nullptr,
                fw.rc[h]);
    const T* wp = wrp + h * N;
    T* fo = fw.fwd.data() + h * N;
    T* bo = fw.bwd.data() + h * N;
    for (int i = 0; i < N; ++i) { fo[i] = 0; bo[i] = 0; }
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) {
        T l = Ln[i * N + j];
        fo[i] += l * wp[j];
        bo[j] += l * wp[i];
      }
    const T* pi = f.modes.data() + h * 3;
    T* wr = sn + d.oWR + h * N;
    for (int i = 0; i < N; ++i) wr[i] = pi[0] * bo[i] + pi[1] * fw.rc[h].c[i] + pi[2] * fo[i];
    T* __restrict acc = fw.rh.data();
    for (int w = 0; w < W; ++w) acc[w] = 0;
    for (int i = 0; i < N; ++i) {
      const T* __restrict mrow = Mn + (size_t)i * W;
      T wi = wr[i];
#pragma omp simd
      for (int w = 0; w < W; ++w) acc[w] += wi * mrow[w];
    }
    for (int w = 0; w < W; ++w) r[w * R + h] = acc[w];
  }
}

template <typename T>
void dnc_fwd(int B, int N, int W, int R, int write, double clip, const T* xi_raw, const T* state_prev,
             T* state_next, T* r_out) {
  uwb::FlushSubnormals flush;  // see vmath.h
  Dims d(N, W, R);
  RowFwd<T> fw(d);
  for (int b = 0; b < B; ++b)
    row_forward(d, write != 0, T(clip), xi_raw + (size_t)b * d.X, state_prev + (size_t)b * d.S,
                state_next + (size_t)b * d.S, r_out + (size_t)b * W * R, fw);
}

template <typename T>
void dnc_bwd(int B, int N, int W, int R, int write, double clip, const T* xi_raw, const T* state_prev,
             const T* d_state_next, const T* d_r, T* d_state_prev, T* d_xi_raw) {
  uwb::FlushSubnormals flush;  // see vmath.h
  Dims d(N, W, R);
  RowFwd<T> fw(d);
  std::vector<T> sn(d.S), rr(W * R);
  std::vector<T> dMn(N * W), dLn(N * N), dwp(R * N), dwr(N), dc(N), dxi(d.X), dww(N), dmix(N), da(N), du(N),
      dpsi(N);
  std::vector<T> dkey(W), drh(W);
  const T tclip = T(clip);
  for (int b = 0; b < B; ++b) {
    const T* raw = xi_raw + (size_t)b * d.X;
    const T* sp = state_prev + (size_t)b * d.S;
    const T* dsn = d_state_next + (size_t)b * d.S;
    const T* dr = d_r + (size_t)b * W * R;
    T* dsp = d_state_prev + (size_t)b * d.S;
    T* dx = d_xi_raw + (size_t)b * d.X;
    row_forward(d, write != 0, tclip, raw, sp, sn.data(), rr.data(), fw);
    const Iface<T>& f = fw.f;
    const T* Mn = sn.data() + d.oM;
    const T* Ln = sn.data() + d.oL;
    const T* wrp = sp + d.oWR;
    std::fill(dxi.begin(), dxi.end(), T(0));
    std::copy(dsn + d.oM, dsn + d.oM + N * W, dMn.begin());
    std::copy(dsn + d.oL, dsn + d.oL + N * N, dLn.begin());
    std::fill(dwp.begin(), dwp.end(), T(0));

    // ---- read, in reverse (per head)
    for (int h = 0; h < R; ++h) {
      const T* wr = sn.data() + d.oWR + h * N;
      const T* pi = f.modes.data() + h * 3;
      const T* wp = wrp + h * N;
      const T* fo = fw.fwd.data() + h * N;
      const T* bo = fw.bwd.data() + h * N;
      // r = M^T w^r
      T* __restrict g = drh.data();
      for (int w = 0; w < W; ++w) g[w] = dr[w * R + h];
      for (int i = 0; i < N; ++i) {
        const T* __restrict mrow = Mn + (size_t)i * W;
        T* __restrict dmrow = dMn.data() + (size_t)i * W;
        T acc = 0;
        T wi = wr[i];
#pragma omp simd reduction(+ : acc)
        for (int w = 0; w < W; ++w) {
          acc += g[w] * mrow[w];
          dmrow[w] += wi * g[w];
        }
        dwr[i] = dsn[d.oWR + h * N + i] + acc;
      }
      // w^r = pi_b bwd + pi_c c + pi_f fwd
      T dpi[3] = {0, 0, 0};
      for (int i = 0; i < N; ++i) {
        dpi[0] += dwr[i] * bo[i];
        dpi[1] += dwr[i] * fw.rc[h].c[i];
        dpi[2] += dwr[i] * fo[i];
        dc[i] = pi[1] * dwr[i];
      }
      // fwd_i = sum_j L_ij wp_j, bwd_j = sum_i L_ij wp_i
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) {
          T dfi = pi[2] * dwr[i], dbj = pi[0] * dwr[j];
          dLn[i * N + j] += dfi * wp[j] + dbj * wp[i];
          T l = Ln[i * N + j];
          dwp[h * N + j] += dfi * l;
          dwp[h * N + i] += dbj * l;
        }
      // content on the read-side memory
      std::fill(dkey.begin(), dkey.end(), T(0));
      T dbeta = content_bwd(N, W, Mn, f.rkey.data() + h * W, f.rbeta[h], fw.rc[h], dc.data(), dMn.data(), dkey.data());
      for (int w = 0; w < W; ++w) dxi[d.iRK + w * R + h] += dkey[w];
      dxi[d.iRS + h] += dbeta * softplus_grad(f.xi[d.iRS + h]);
      // modes softmax over m (index m R + h)
      T s = pi[0] * dpi[0] + pi[1] * dpi[1] + pi[2] * dpi[2];
      for (int m = 0; m < 3; ++m) dxi[d.iRM + m * R + h] += pi[m] * (dpi[m] - s);
    }

    if (!write) {
      // nothing but the read weights changed: the other fields' gradients pass through
      std::copy(dMn.begin(), dMn.end(), dsp + d.oM);
      std::copy(dLn.begin(), dLn.end(), dsp + d.oL);
      for (int i = 0; i < N; ++i) {
        dsp[d.oU + i] = dsn[d.oU + i];
        dsp[d.oP + i] = dsn[d.oP + i];
        dsp[d.oWW + i] = dsn[d.oWW + i];
      }
      for (int j = 0; j < R * N; ++j) dsp[d.oWR + j] = dwp[j];
    } else {
      const T* Mp = sp + d.oM;
      const T* Lp = sp + d.oL;
      const T* pp = sp + d.oP;
      const T* up = sp + d.oU;
      const T* wwp = sp + d.oWW;
      const T* ww = fw.ww.data();
      const T* e = f.erase.data();
      const T* v = f.xi.data() + d.iWV;
      T* dMp = dsp + d.oM;
      T wsum = 0;
      for (int i = 0; i < N; ++i) { dww[i] = dsn[d.oWW + i]; wsum += ww[i]; }
      // erase and add: dM- = G (1 - w e^T), dw_i = sum_k G_ik (v_k - M-_ik e_k), de, dv
      T* __restrict de = dxi.data() + d.iER;
      T* __restrict dv = dxi.data() + d.iWV;
      for (int i = 0; i < N; ++i) {
        const T* __restrict g = dMn.data() + (size_t)i * W;
        const T* __restrict mp = Mp + (size_t)i * W;
        T* __restrict dmp = dMp + (size_t)i * W;
        T wi = ww[i], acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int w = 0; w < W; ++w) {
          dmp[w] = g[w] * (T(1) - wi * e[w]);
          acc += g[w] * (v[w] - mp[w] * e[w]);
          de[w] -= g[w] * wi * mp[w];  // d erase (pre-activation below)
          dv[w] += g[w] * wi;           // d write vector
        }
        dww[i] += acc;
      }
#pragma omp simd
      for (int w = 0; w < W; ++w) de[w] *= e[w] * (T(1) - e[w]);
      // precedence p = w + (1 - sum w) p-
      T dpp_dot = 0;
      for (int j = 0; j < N; ++j) dpp_dot += dsn[d.oP + j] * pp[j];
      for (int i = 0; i < N; ++i) {
        dww[i] += dsn[d.oP + i] - dpp_dot;
        dsp[d.oP + i] = (T(1) - wsum) * dsn[d.oP + i];
      }
      // link (the diagonal is constant 0)
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) {
          T g = i == j ? T(0) : dLn[i * N + j];
          dsp[d.oL + i * N + j] = (T(1) - ww[i] - ww[j]) * g;
          dww[i] += g * (pp[j] - Lp[i * N + j]);
          dww[j] -= g * Lp[i * N + j];
          dsp[d.oP + j] += g * ww[i];
        }
      // write weighting w = g^w (c + g^a (a - c))
      T dgw = 0, dga = 0;
      for (int i = 0; i < N; ++i) {
        T c = fw.wc.c[i], a = fw.alloc[i];
        dgw += dww[i] * (c + f.ga * (a - c));
        T dm = f.gw * dww[i];
        dga += dm * (a - c);
        dc[i] = dm * (T(1) - f.ga);
        da[i] = dm * f.ga;
      }
      dxi[d.iWG] += dgw * f.gw * (T(1) - f.gw);
      dxi[d.iAG] += dga * f.ga * (T(1) - f.ga);
      // allocation through the sorted exclusive products: P_{j+1} = P_j u_j, a_j = (1 - u_j) P_j
      for (int i = 0; i < N; ++i) du[i] = dsn[d.oU + i];
      T g = 0;  // the total gradient of P_j, from a_j and from P_{j+1}
      for (int j = N - 1; j >= 0; --j) {
        int slot = fw.order[j];
        du[slot] -= da[slot] * fw.prefix[j];
        g += da[slot] * (T(1) - fw.sorted[j]);
        if (j > 0) {  // P_j = P_{j-1} u_{j-1}
          du[fw.order[j - 1]] += g * fw.prefix[j - 1];
          g *= fw.sorted[j - 1];
        }
      }
      // content of the write key on M-
      std::fill(dkey.begin(), dkey.end(), T(0));
      T dbeta = content_bwd(N, W, Mp, f.xi.data() + d.iWK, f.wbeta, fw.wc, dc.data(), dMp, dkey.data());
      for (int w = 0; w < W; ++w) dxi[d.iWK + w] += dkey[w];
      dxi[d.iWS] += dbeta * softplus_grad(f.xi[d.iWS]);
      // usage u = (u- + w- (1 - u-)) psi
      for (int i = 0; i < N; ++i) {
        dpsi[i] = du[i] * (up[i] + wwp[i] * (T(1) - up[i]));
        dsp[d.oU + i] = du[i] * fw.psi[i] * (T(1) - wwp[i]);
        dsp[d.oWW + i] = du[i] * fw.psi[i] * (T(1) - up[i]);
      }
      // retention psi_i = prod_r (1 - f_r w^r-_ri)
      for (int h = 0; h < R; ++h) {
        T df = 0;
        for (int i = 0; i < N; ++i) {
          T others = dpsi[i];
          for (int h2 = 0; h2 < R; ++h2)
            if (h2 != h) others *= T(1) - f.fgate[h2] * wrp[h2 * N + i];
          df -= others * wrp[h * N + i];
          dwp[h * N + i] -= others * f.fgate[h];
        }
        dxi[d.iFG + h] += df * f.fgate[h] * (T(1) - f.fgate[h]);
      }
      for (int j = 0; j < R * N; ++j) dsp[d.oWR + j] = dwp[j];
    }
    // the clip passes the gradient where -clip <= raw <= clip
    const T* __restrict dxs = dxi.data();
#pragma omp simd
    for (int j = 0; j < d.X; ++j) dx[j] = (raw[j] >= -tclip && raw[j] <= tclip) ? dxs[j] : T(0);
  }
}

}  // namespace

extern "C" {
int dnc_state_size(int N, int W, int R) { return Dims(N, W, R).S; }
int dnc_interface_size(int N, int W, int R) { return Dims(N, W, R).X; }
int dnc_read_size(int, int W, int R) { return W * R; }
void dnc_fwd_f32(int B, int N, int W, int R, int write, double clip, const float* xi, const float* sp, float* sn,
                 float* r) { dnc_fwd<float>(B, N, W, R, write, clip, xi, sp, sn, r); }
void dnc_fwd_f64(int B, int N, int W, int R, int write, double clip, const double* xi, const double* sp, double* sn,
                 double* r) { dnc_fwd<double>(B, N, W, R, write, clip, xi, sp, sn, r); }
void dnc_bwd_f32(int B, int N, int W, int R, int write, double clip, const float* xi, const float* sp,
                 const float* dsn, const float* dr, float* dsp, float* dxi) {
  dnc_bwd<float>(B, N, W, R, write, clip, xi, sp, dsn, dr, dsp, dxi);
}
void dnc_bwd_f64(int B, int N, int W, int R, int write, double clip, const double* xi, const double* sp,
                 const double* dsn, const double* dr, double* dsp, double* dxi) {
  dnc_bwd<double>(B, N, W, R, write, clip, xi, sp, dsn, dr, dsp, dxi);
}
}
