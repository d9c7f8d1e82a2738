// The online-softmax rescale rule (the seed's FlashAttention pseudocode,
// applied to normalised partial results): the one place the ring merges two
// partial attentions of the same queries over disjoint key sets.
#include <cmath>
#include <limits>
#include <string>

#include "flashattn/ring.hpp"
#include "ring/host_tensor.hpp"

namespace flashattn::ring {
namespace {

Status invalid(std::string msg) { return Status::Error(ErrorCode::InvalidArgument, std::move(msg)); }

Status check(const char* name, const TensorView& t, int ndim, bool fp32) {
  if (t.data == nullptr) return invalid(std::string(name) + ": null data pointer");
  if (t.device != Device::CPU) {
    return Status::Error(ErrorCode::Unsupported,
                         std::string(name) + ": merge_partial runs on CPU tensors");
  }
  if (t.ndim != ndim) {
    return invalid(std::string(name) + ": expected " + std::to_string(ndim) + " dimensions, got " +
                   std::to_string(t.ndim));
  }
  if (fp32 && t.dtype != DType::F32) {
    return invalid(std::string(name) + ": expected float32, got " + dtype_name(t.dtype));
  }
  return Status::Ok();
}

}  // namespace

Status merge_partial(const TensorView& out, const TensorView& lse, const TensorView& part,
                     const TensorView& part_lse) noexcept {
  if (Status s = check("out_acc", out, 4, true); !s.ok()) return s;
  if (Status s = check("lse_acc", lse, 3, true); !s.ok()) return s;
  if (Status s = check("part_out", part, 4, false); !s.ok()) return s;
  if (Status s = check("part_lse", part_lse, 3, true); !s.ok()) return s;
  const int64_t B = out.shape[0], S = out.shape[1], H = out.shape[2], D = out.shape[3];
  for (int i = 0; i < 4; ++i) {
    if (part.shape[i] != out.shape[i]) return invalid("part_out: expected the shape of out_acc");
  }
  const int64_t want[3] = {B, H, S};
  for (int i = 0; i < 3; ++i) {
    if (lse.shape[i] != want[i]) return invalid("lse_acc: expected [B, H, S] of out_acc");
    if (part_lse.shape[i] != want[i]) return invalid("part_lse: expected [B, H, S] of out_acc");
  }
  if (D > 1 && (out.stride[3] != 1 || part.stride[3] != 1)) {
    return invalid("out_acc, part_out: the last dimension must be contiguous");
  }
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float* o = static_cast<float*>(out.data);
  float* l = static_cast<float*>(lse.data);
  const float* pl = static_cast<const float*>(part_lse.data);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h) {
        float& la = l[b * lse.stride[0] + h * lse.stride[1] + s * lse.stride[2]];
        const float lp = pl[b * part_lse.stride[0] + h * part_lse.stride[1] + s * part_lse.stride[2]];
        if (std::isnan(la) || std::isnan(lp)) {  // never hide a NaN behind fmax
          la = std::numeric_limits<float>::quiet_NaN();
          continue;
        }
        const float hi = std::fmax(la, lp), lo = std::fmin(la, lp);
        if (hi == kNegInf) continue;  // no key seen on either side: out stays 0, lse -inf
        // lo - hi is -inf when one side is empty: its weight is exactly 0.
        const double merged = double(hi) + std::log1p(std::exp(double(lo) - double(hi)));
        const float w_old = float(std::exp(double(la) - merged));
        const float w_new = float(std::exp(double(lp) - merged));
        float* orow = o + b * out.stride[0] + s * out.stride[1] + h * out.stride[2];
        const int64_t prow = b * part.stride[0] + s * part.stride[1] + h * part.stride[2];
        for (int64_t d = 0; d < D; ++d) {
          orow[d] = orow[d] * w_old + detail::load(part.dtype, part.data, prow + d) * w_new;
        }
        la = float(merged);
      }
  return Status::Ok();
}

}  // namespace flashattn::ring
