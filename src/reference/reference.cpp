// The fp64 oracle: plain O(N^2) attention, written straight from the
// semantics in DESIGN.md. Deliberately independent of src/common and src/cpu:
// the visibility rule below is derived again here, so a bug in the kernels'
// shared mask code cannot make the kernels and the oracle agree by accident.
#include "reference/reference.hpp"

#include <cmath>
#include <limits>
#include <vector>

namespace flashattn::reference {
namespace {

double resolved_scale(const Problem& pb) {
  return pb.scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(pb.head_dim)) : pb.scale;
}

// Query i sits on key diagonal i + (Sk - Sq) (bottom-right alignment). It sees
// key j iff i + off - left <= j <= i + off + right, each side only when that
// bound is not -1. Causal caps the right side at the diagonal.
bool visible(const Problem& pb, int64_t i, int64_t j) {
  const int64_t off = pb.seqlen_k - pb.seqlen_q;
  // Causal: right = min(right, 0) for a bounded right side, else 0; both are 0.
  const int64_t right = pb.causal ? 0 : pb.window_right;
  const int64_t left = pb.window_left;
  if (left >= 0 && j < i + off - left) return false;
  if (right >= 0 && j > i + off + right) return false;
  return true;
}

// ALiBi bias of (b, h, i, j): minus the slope times the distance of key j
// from query i's diagonal i + Sk - Sq.
double alibi_bias(const Problem& pb, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (pb.alibi_slopes == nullptr) return 0.0;
  const double slope = pb.alibi_slopes[(pb.alibi_per_batch ? b * pb.heads_q : 0) + h];
  const int64_t dist = i + pb.seqlen_k - pb.seqlen_q - j;
  return -slope * static_cast<double>(dist < 0 ? -dist : dist);
}

// Dropout multiplier Z / (1 - p) of (b, h, i, j); 1 without dropout.
double dropout_factor(const Problem& pb, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (pb.dropout_mask == nullptr) return 1.0;
  const int32_t z =
      pb.dropout_mask[((b * pb.heads_q + h) * pb.seqlen_q + i) * pb.seqlen_k + j];
  return z != 0 ? 1.0 / (1.0 - pb.dropout_p) : 0.0;
}

// Row-major offsets.
struct Idx {
  const Problem& pb;
  int64_t q(int64_t b, int64_t s, int64_t h) const {  // also dq
    return ((b * pb.seqlen_q + s) * pb.heads_q + h) * pb.head_dim;
  }
  int64_t k(int64_t b, int64_t s, int64_t h) const {  // also dk
    return ((b * pb.seqlen_k + s) * pb.heads_kv + h) * pb.head_dim;
  }
  int64_t o(int64_t b, int64_t s, int64_t h) const {  // out, dout
    return ((b * pb.seqlen_q + s) * pb.heads_q + h) * pb.dim_v();
  }
  int64_t v(int64_t b, int64_t s, int64_t h) const {  // also dv
    return ((b * pb.seqlen_k + s) * pb.heads_kv + h) * pb.dim_v();
  }
};

// Scores of one (batch, query head) slice after scale and softcap, the
// softcap's tanh (for the backward's chain rule), and the probabilities P.
// Masked entries get P = 0. Returns per-row LSE (-inf for empty rows).
struct Slice {
  std::vector<double> tanh_v;  // [Sq, Sk], only with softcap
  std::vector<double> p;       // [Sq, Sk]
  std::vector<double> lse;     // [Sq]
};

Slice compute_slice(const Problem& pb, const double* q, const double* k, int64_t b, int64_t h) {
  const int64_t Sq = pb.seqlen_q, Sk = pb.seqlen_k, D = pb.head_dim;
  const int64_t hk = h / (pb.heads_q / pb.heads_kv);
  const double scale = resolved_scale(pb);
  const double cap = pb.softcap;
  const Idx ix{pb};
  Slice sl;
  sl.p.assign(static_cast<size_t>(Sq * Sk), 0.0);
  if (cap > 0) sl.tanh_v.assign(static_cast<size_t>(Sq * Sk), 0.0);
  sl.lse.assign(static_cast<size_t>(Sq), -std::numeric_limits<double>::infinity());
  std::vector<double> s(static_cast<size_t>(Sk));
  for (int64_t i = 0; i < Sq; ++i) {
    const double* qi = q + ix.q(b, i, h);
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < Sk; ++j) {
      const double* kj = k + ix.k(b, j, hk);
      double dot = 0.0;
      // simd: partial sums in another order; irrelevant at fp64 for an fp32/fp16 oracle.
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
      double x = scale * dot;
      if (cap > 0) {
        const double t = std::tanh(x / cap);
        sl.tanh_v[i * Sk + j] = t;
        x = cap * t;
      }
      x += alibi_bias(pb, b, h, i, j);
      s[j] = x;
      if (visible(pb, i, j) && x > mx) mx = x;
    }
    if (mx == -std::numeric_limits<double>::infinity()) continue;  // row sees nothing
    double sum = 0.0;
    for (int64_t j = 0; j < Sk; ++j)
      if (visible(pb, i, j)) sum += std::exp(s[j] - mx);
    for (int64_t j = 0; j < Sk; ++j)
      if (visible(pb, i, j)) sl.p[i * Sk + j] = std::exp(s[j] - mx) / sum;
    sl.lse[i] = mx + std::log(sum);
  }
  return sl;
}

}  // namespace

void forward(const Problem& pb, const double* q, const double* k, const double* v, double* out,
             double* lse) {
  const int64_t B = pb.batch, Sq = pb.seqlen_q, Sk = pb.seqlen_k, H = pb.heads_q,
                D = pb.dim_v();
  const int64_t hkv_div = H / pb.heads_kv;
  const Idx ix{pb};
  // Tiny problems (the finite-difference tests call this thousands of times)
  // run serially: a parallel region costs more than the work there.
  const bool par = B * H * Sq * Sk * D >= (1 << 16);
#pragma omp parallel for collapse(2) schedule(dynamic) if (par)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const Slice sl = compute_slice(pb, q, k, b, h);
      const int64_t hk = h / hkv_div;
      for (int64_t i = 0; i < Sq; ++i) {
        double* oi = out + ix.o(b, i, h);
        for (int64_t d = 0; d < D; ++d) oi[d] = 0.0;
        for (int64_t j = 0; j < Sk; ++j) {
          const double pij = sl.p[i * Sk + j] * dropout_factor(pb, b, h, i, j);
          if (pij == 0.0) continue;
          const double* vj = v + ix.v(b, j, hk);
          for (int64_t d = 0; d < D; ++d) oi[d] += pij * vj[d];
        }
        if (lse) lse[(b * H + h) * Sq + i] = sl.lse[i];
      }
    }
  }
}

void backward(const Problem& pb, const double* q, const double* k, const double* v,
              const double* dout, double* dq, double* dk, double* dv,
              const double* given_out) {
  const int64_t B = pb.batch, Sq = pb.seqlen_q, Sk = pb.seqlen_k, H = pb.heads_q,
                Hkv = pb.heads_kv, D = pb.head_dim, Dv = pb.dim_v();
  const int64_t group = H / Hkv;
  const double scale = resolved_scale(pb);
  const Idx ix{pb};
  // One task per (batch, kv head): it owns dK/dV of that head and dQ of the
  // query heads in its group, so no two threads write the same element.
  const bool par = B * H * Sq * Sk * D >= (1 << 16);
#pragma omp parallel for collapse(2) schedule(dynamic) if (par)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      for (int64_t j = 0; j < Sk; ++j) {
        double* dkj = dk + ix.k(b, j, hk);
        double* dvj = dv + ix.v(b, j, hk);
        for (int64_t d = 0; d < D; ++d) dkj[d] = 0.0;
        for (int64_t d = 0; d < Dv; ++d) dvj[d] = 0.0;
      }
      std::vector<double> dp(static_cast<size_t>(Sk));
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        const Slice sl = compute_slice(pb, q, k, b, h);
        for (int64_t i = 0; i < Sq; ++i) {
          const double* doi = dout + ix.o(b, i, h);
          const double* qi = q + ix.q(b, i, h);
          double* dqi = dq + ix.q(b, i, h);
          for (int64_t d = 0; d < D; ++d) dqi[d] = 0.0;
          // dP = dO V^T and D_i = sum_j P_ij dP_ij. With dropout O = P~ V,
          // P~ = P o Z / (1 - p): dP~ = dO V^T and dP = dP~ o Z / (1 - p).
          double Di = 0.0;
          for (int64_t j = 0; j < Sk; ++j) {
            const double* vj = v + ix.v(b, j, hk);
            double acc = 0.0;
#pragma omp simd reduction(+ : acc)
            for (int64_t d = 0; d < Dv; ++d) acc += doi[d] * vj[d];
            acc *= dropout_factor(pb, b, h, i, j);
            dp[j] = acc;
            if (given_out == nullptr) Di += sl.p[i * Sk + j] * acc;
          }
          if (given_out != nullptr) {  // D_i from the given O (reference.hpp)
            const double* oi = given_out + ix.o(b, i, h);
            for (int64_t d = 0; d < Dv; ++d) Di += doi[d] * oi[d];
          }
          for (int64_t j = 0; j < Sk; ++j) {
            const double pij = sl.p[i * Sk + j];
            if (pij == 0.0) continue;
            // dS w.r.t. the (capped) score, then through softcap and scale:
            // d(cap*tanh(x/cap))/dx = 1 - tanh^2.
            double ds = pij * (dp[j] - Di);
            if (pb.softcap > 0) {
              const double t = sl.tanh_v[i * Sk + j];
              ds *= 1.0 - t * t;
            }
            ds *= scale;
            const double pdrop = pij * dropout_factor(pb, b, h, i, j);  // P~ for dV
            const double* kj = k + ix.k(b, j, hk);
            double* dkj = dk + ix.k(b, j, hk);
            double* dvj = dv + ix.v(b, j, hk);
            // dq, dk, dv are distinct arrays (the API's outputs never alias).
#pragma omp simd
            for (int64_t d = 0; d < D; ++d) {
              dqi[d] += ds * kj[d];
              dkj[d] += ds * qi[d];
            }
#pragma omp simd
            for (int64_t d = 0; d < Dv; ++d) dvj[d] += pdrop * doi[d];
          }
        }
      }
    }
  }
}

}  // namespace flashattn::reference
