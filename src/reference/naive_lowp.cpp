#include "reference/naive_lowp.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace flashattn::reference {
namespace {

float round_bf16(float x) {
  if (std::isnan(x)) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fff + ((u >> 16) & 1);
  u &= 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

struct Shape {
  int64_t B, Sq, Sk, Hq, Hkv, D, group;
  float scale, softcap;
  int64_t left, right;  // resolved window, -1 = unbounded
  bool causal;
  explicit Shape(const Problem& pb)
      : B(pb.batch), Sq(pb.seqlen_q), Sk(pb.seqlen_k), Hq(pb.heads_q), Hkv(pb.heads_kv),
        D(pb.head_dim), group(pb.heads_kv ? pb.heads_q / pb.heads_kv : 1),
        scale(float(pb.scale > 0 ? pb.scale : 1.0 / std::sqrt(double(pb.head_dim)))),
        softcap(float(pb.softcap)), left(pb.window_left),
        right(pb.causal ? 0 : pb.window_right), causal(pb.causal) {}
  // Query i sits on key diagonal i + Sk - Sq (bottom-right alignment).
  bool visible(int64_t i, int64_t j) const {
    int64_t diag = i + Sk - Sq;
    if (right >= 0 && j > diag + right) return false;
    if (left >= 0 && j < diag - left) return false;
    return true;
  }
  int64_t qi(int64_t b, int64_t s, int64_t h) const { return ((b * Sq + s) * Hq + h) * D; }
  int64_t ki(int64_t b, int64_t s, int64_t h) const { return ((b * Sk + s) * Hkv + h) * D; }
};

// Scores of one query row (fp32 dot products), softcapped; masked = -inf.
// Returns the raw (pre-softcap) scaled scores in `raw` for the backward.
void row_scores(const Shape& s, const float* q, const float* k, int64_t b, int64_t h, int64_t i,
                std::vector<float>& sc, std::vector<float>& raw) {
  const float* qr = q + s.qi(b, i, h);
  for (int64_t j = 0; j < s.Sk; ++j) {
    const float* kr = k + s.ki(b, j, h / s.group);
    float acc = 0.f;
    for (int64_t d = 0; d < s.D; ++d) acc += qr[d] * kr[d];
    float x = acc * s.scale;
    raw[j] = x;
    if (s.softcap > 0) x = s.softcap * std::tanh(x / s.softcap);
    sc[j] = s.visible(i, j) ? x : -std::numeric_limits<float>::infinity();
  }
}

// Softmax of a row in fp32; returns the LSE (-inf when nothing is visible,
// and then p = 0).
float row_softmax(std::vector<float>& p, const std::vector<float>& sc) {
  float m = -std::numeric_limits<float>::infinity();
  for (float x : sc) m = std::max(m, x);
  if (m == -std::numeric_limits<float>::infinity()) {
    std::fill(p.begin(), p.end(), 0.f);
    return m;
  }
  float l = 0.f;
  for (size_t j = 0; j < sc.size(); ++j) {
    p[j] = std::exp(sc[j] - m);
    l += p[j];
  }
  for (float& x : p) x /= l;
  return m + std::log(l);
}

}  // namespace

float round_to_dtype(float x, int dtype) {
  if (dtype == 1) return static_cast<float>(static_cast<_Float16>(x));
  if (dtype == 2) return round_bf16(x);
  return x;
}

void naive_lowp_forward(const Problem& pb, int dtype, const float* q, const float* k,
                        const float* v, float* out, float* lse) {
  const Shape s(pb);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hq; ++h) {
      std::vector<float> sc(s.Sk), raw(s.Sk), p(s.Sk), acc(s.D);
      for (int64_t i = 0; i < s.Sq; ++i) {
        row_scores(s, q, k, b, h, i, sc, raw);
        float l = row_softmax(p, sc);
        if (lse) lse[(b * s.Hq + h) * s.Sq + i] = l;
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t j = 0; j < s.Sk; ++j) {
          float pj = round_to_dtype(p[j], dtype);
          const float* vr = v + s.ki(b, j, h / s.group);
          for (int64_t d = 0; d < s.D; ++d) acc[d] += pj * vr[d];
        }
        float* o = out + s.qi(b, i, h);
        for (int64_t d = 0; d < s.D; ++d) o[d] = round_to_dtype(acc[d], dtype);
      }
    }
  }
}

void naive_lowp_backward(const Problem& pb, int dtype, const float* q, const float* k,
                         const float* v, const float* dout, float* dq, float* dk, float* dv) {
  const Shape s(pb);
  const size_t nk = size_t(s.B * s.Sk * s.Hkv * s.D);
  std::vector<float> out(size_t(s.B * s.Sq * s.Hq * s.D));
  naive_lowp_forward(pb, dtype, q, k, v, out.data(), nullptr);
  // fp32 accumulators for dK/dV (summed over the query heads of a group).
  std::vector<float> dk_acc(nk, 0.f), dv_acc(nk, 0.f);
  // One task per (batch, kv head): its group's rows write only its dK/dV.
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t hk = 0; hk < s.Hkv; ++hk) {
      std::vector<float> sc(s.Sk), raw(s.Sk), p(s.Sk), dp(s.Sk), acc(s.D);
      for (int64_t h = hk * s.group; h < (hk + 1) * s.group; ++h) {
        for (int64_t i = 0; i < s.Sq; ++i) {
          row_scores(s, q, k, b, h, i, sc, raw);
          row_softmax(p, sc);
          const float* dor = dout + s.qi(b, i, h);
          const float* orow = out.data() + s.qi(b, i, h);
          float Di = 0.f;
          for (int64_t d = 0; d < s.D; ++d) Di += dor[d] * orow[d];
          std::fill(acc.begin(), acc.end(), 0.f);
          const float* qr = q + s.qi(b, i, h);
          for (int64_t j = 0; j < s.Sk; ++j) {
            const float* vr = v + s.ki(b, j, hk);
            const float* kr = k + s.ki(b, j, hk);
            float dpj = 0.f;
            for (int64_t d = 0; d < s.D; ++d) dpj += dor[d] * vr[d];
            float ds = p[j] * (dpj - Di);
            if (s.softcap > 0) {
              float t = std::tanh(raw[j] / s.softcap);
              ds *= 1.f - t * t;
            }
            ds = round_to_dtype(ds, dtype);
            float pj = round_to_dtype(p[j], dtype);
            float* dkr = dk_acc.data() + s.ki(b, j, hk);
            float* dvr = dv_acc.data() + s.ki(b, j, hk);
            for (int64_t d = 0; d < s.D; ++d) {
              acc[d] += ds * kr[d];
              dkr[d] += s.scale * ds * qr[d];
              dvr[d] += pj * dor[d];
            }
          }
          float* dqr = dq + s.qi(b, i, h);
          for (int64_t d = 0; d < s.D; ++d) dqr[d] = round_to_dtype(s.scale * acc[d], dtype);
        }
      }
    }
  }
  for (size_t x = 0; x < nk; ++x) {
    dk[x] = round_to_dtype(dk_acc[x], dtype);
    dv[x] = round_to_dtype(dv_acc[x], dtype);
  }
}

}  // namespace flashattn::reference
