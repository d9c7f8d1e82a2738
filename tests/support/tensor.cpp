#include "support/tensor.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "support/half.hpp"

namespace fa_test {

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::BSHD: return "bshd";
    case Layout::BHSD: return "bhsd";
    case Layout::Padded: return "padded";
    case Layout::Packed: return "packed";
  }
  return "?";
}

namespace {
size_t esize(DType dt) {
  return dt == DType::F32 || dt == DType::I32 ? 4 : dt == DType::F8E4M3 ? 1 : 2;
}

// Poison pattern per dtype: a quiet NaN with a payload no kernel produces.
void poison_elem(DType dt, uint8_t* bytes, int64_t i) {
  if (dt == DType::F32) {
    const uint32_t p = 0x7fc0deadu;
    std::memcpy(bytes + 4 * i, &p, 4);
  } else if (dt == DType::F8E4M3) {
    bytes[i] = 0xff;  // e4m3 has no NaN payloads: the negative NaN
  } else {
    const uint16_t p = dt == DType::F16 ? 0x7e5bu : 0x7fdbu;
    std::memcpy(bytes + 2 * i, &p, 2);
  }
}
bool is_poison(DType dt, const uint8_t* bytes, int64_t i) {
  uint8_t tmp[4] = {0, 0, 0, 0};
  poison_elem(dt, tmp, 0);
  return std::memcmp(bytes + esize(dt) * i, tmp, esize(dt)) == 0;
}

Tensor view_of(std::shared_ptr<Buffer> buf, DType dt, int64_t offset, std::vector<int64_t> shape,
               std::vector<int64_t> stride) {
  Tensor t;
  t.buf = std::move(buf);
  t.dtype = dt;
  t.offset = offset;
  t.ndim = static_cast<int>(shape.size());
  for (int i = 0; i < t.ndim; ++i) {
    t.shape[i] = shape[i];
    t.stride[i] = stride[i];
  }
  return t;
}

std::shared_ptr<Buffer> alloc(Device dev, DType dt, int64_t elems) {
  return std::make_shared<Buffer>(dev, static_cast<size_t>(elems) * esize(dt));
}
}  // namespace

double load_elem(DType dt, const uint8_t* bytes, int64_t i) {
  switch (dt) {
    case DType::F8E4M3:
      return e4m3_bits_to_float(bytes[i]);
    case DType::F32: {
      float f;
      std::memcpy(&f, bytes + 4 * i, 4);
      return f;
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      return half_to_float(h);
    }
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      return bf16_to_float(h);
    }
    case DType::I32: {  // index tensors (varlen, KV cache)
      int32_t x;
      std::memcpy(&x, bytes + 4 * i, 4);
      return x;
    }
  }
  return NAN;
}

void store_elem(DType dt, uint8_t* bytes, int64_t i, double v) {
  const float f = static_cast<float>(v);
  if (dt == DType::I32) {
    const int32_t x = static_cast<int32_t>(v);
    std::memcpy(bytes + 4 * i, &x, 4);
  } else if (dt == DType::F32) {
    std::memcpy(bytes + 4 * i, &f, 4);
  } else if (dt == DType::F8E4M3) {
    bytes[i] = float_to_e4m3_bits(f);
  } else {
    const uint16_t h = dt == DType::F16 ? float_to_half(f) : float_to_bf16(f);
    std::memcpy(bytes + 2 * i, &h, 2);
  }
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

flashattn::TensorView Tensor::view() const {
  flashattn::TensorView v;
  v.data = buf ? static_cast<uint8_t*>(buf->data()) + offset * static_cast<int64_t>(esize(dtype))
               : nullptr;
  v.dtype = dtype;
  v.device = buf ? buf->device() : Device::CPU;
  v.device_index = 0;
  v.ndim = ndim;
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = i < ndim ? shape[i] : 0;
    v.stride[i] = i < ndim ? stride[i] : 0;
  }
  return v;
}

std::vector<int64_t> Tensor::element_offsets() const {
  std::vector<int64_t> offs;
  const int64_t n = numel();
  offs.reserve(static_cast<size_t>(n));
  int64_t idx[4] = {0, 0, 0, 0};
  for (int64_t e = 0; e < n; ++e) {
    int64_t o = offset;
    for (int d = 0; d < ndim; ++d) o += idx[d] * stride[d];
    offs.push_back(o);
    for (int d = ndim - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return offs;
}

std::vector<double> Tensor::read() const {
  const std::vector<uint8_t> bytes = buf->to_host();
  const std::vector<int64_t> offs = element_offsets();
  std::vector<double> out(offs.size());
  for (size_t i = 0; i < offs.size(); ++i) out[i] = load_elem(dtype, bytes.data(), offs[i]);
  return out;
}

void Tensor::write(const std::vector<double>& dense) const {
  const std::vector<int64_t> offs = element_offsets();
  if (dense.size() != offs.size()) throw std::logic_error("test support: Tensor::write size mismatch");
  std::vector<uint8_t> bytes = buf->to_host();
  for (size_t i = 0; i < offs.size(); ++i) store_elem(dtype, bytes.data(), offs[i], dense[i]);
  buf->from_host(bytes);
}

Tensor make_contiguous(Device dev, DType dt, std::vector<int64_t> shape) {
  std::vector<int64_t> stride(shape.size());
  int64_t n = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    stride[i] = n;
    n *= shape[i];
  }
  return view_of(alloc(dev, dt, n), dt, 0, shape, stride);
}

Tensor make_bshd(Device dev, DType dt, Layout layout, int64_t B, int64_t S, int64_t H, int64_t D) {
  switch (layout) {
    case Layout::BSHD:
      return make_contiguous(dev, dt, {B, S, H, D});
    case Layout::BHSD:
      return view_of(alloc(dev, dt, B * H * S * D), dt, 0, {B, S, H, D},
                     {H * S * D, D, S * D, 1});
    case Layout::Padded:
    case Layout::Packed: {
      // Gaps of 8 elements (16 for 1-byte fp8) keep every row 16-byte
      // aligned (GPU kernels may require it) while still leaving bytes no
      // one may write.
      const int64_t g = dt == DType::F8E4M3 ? 16 : 8;
      const int64_t sh = D + g, ss = H * sh + g, sb = S * ss + g;
      return view_of(alloc(dev, dt, B * sb + g), dt, 0, {B, S, H, D}, {sb, ss, sh, 1});
    }
  }
  throw std::logic_error("bad layout");
}

QKV make_qkv(Device dev, DType dt, Layout layout, int64_t B, int64_t Sq, int64_t Sk, int64_t Hq,
             int64_t Hkv, int64_t D, int64_t Dv) {
  if (Dv == 0) Dv = D;
  if (layout != Layout::Packed) {
    return {make_bshd(dev, dt, layout, B, Sq, Hq, D), make_bshd(dev, dt, layout, B, Sk, Hkv, D),
            make_bshd(dev, dt, layout, B, Sk, Hkv, Dv)};
  }
  if (Sq == Sk) {  // rows of [Hq x D | Hkv x D | Hkv x Dv], flash-attn's packed (GQA) QKV
    const int64_t W = (Hq + Hkv) * D + Hkv * Dv;
    auto buf = alloc(dev, dt, B * Sq * W);
    auto view = [&](int64_t off, int64_t H, int64_t d) {
      return view_of(buf, dt, off, {B, Sq, H, d}, {Sq * W, W, d, 1});
    };
    return {view(0, Hq, D), view(Hq * D, Hkv, D), view((Hq + Hkv) * D, Hkv, Dv)};
  }
  // Different lengths: Q alone, K/V packed as rows of [Hkv x D | Hkv x Dv].
  const int64_t W = Hkv * (D + Dv);
  auto buf = alloc(dev, dt, B * Sk * W);
  return {make_bshd(dev, dt, Layout::BSHD, B, Sq, Hq, D),
          view_of(buf, dt, 0, {B, Sk, Hkv, D}, {Sk * W, W, D, 1}),
          view_of(buf, dt, Hkv * D, {B, Sk, Hkv, Dv}, {Sk * W, W, Dv, 1})};
}

// ---------------------------------------------------------------------------

CallGuard::CallGuard(std::vector<const Tensor*> inputs, std::vector<const Tensor*> outputs)
    : inputs_(std::move(inputs)), outputs_(std::move(outputs)) {
  std::vector<std::shared_ptr<Buffer>> bufs;
  auto add = [&](const Tensor* t) {
    if (!t || !t->buf) return;
    for (auto& b : bufs)
      if (b == t->buf) return;
    bufs.push_back(t->buf);
  };
  for (auto* t : outputs_) add(t);
  for (auto* t : inputs_) add(t);
  for (auto& b : bufs) {
    std::vector<uint8_t> bytes = b->to_host();
    bool holds_input = false;
    for (auto* t : inputs_) holds_input |= t && t->buf == b;
    for (auto* t : outputs_) {
      if (!t || t->buf != b) continue;
      if (!holds_input) {
        const int64_t n = static_cast<int64_t>(bytes.size() / esize(t->dtype));
        for (int64_t i = 0; i < n; ++i) poison_elem(t->dtype, bytes.data(), i);
      } else {
        for (int64_t o : t->element_offsets()) poison_elem(t->dtype, bytes.data(), o);
      }
    }
    b->from_host(bytes);
    snaps_.push_back({b, std::move(bytes)});
  }
}

::testing::AssertionResult CallGuard::wrote_exactly_outputs() const {
  std::ostringstream err;
  int problems = 0;
  for (const Snap& s : snaps_) {
    const std::vector<uint8_t> now = s.buf->to_host();
    std::vector<char> covered(now.size(), 0);  // per byte
    for (auto* t : outputs_) {
      if (!t || t->buf != s.buf) continue;
      const size_t es = esize(t->dtype);
      int64_t missed = 0, first = -1;
      for (int64_t o : t->element_offsets()) {
        for (size_t k = 0; k < es; ++k) covered[o * es + k] = 1;
        if (is_poison(t->dtype, now.data(), o)) {
          if (first < 0) first = o;
          ++missed;
        }
      }
      if (missed) {
        err << "\n  an output (" << t->numel() << " elements) has " << missed
            << " elements never written (first at buffer element " << first << ")";
        ++problems;
      }
    }
    int64_t changed = 0, first = -1;
    for (size_t i = 0; i < now.size(); ++i) {
      if (!covered[i] && now[i] != s.bytes[i]) {
        if (first < 0) first = static_cast<int64_t>(i);
        ++changed;
      }
    }
    if (changed) {
      err << "\n  " << changed << " bytes outside the outputs changed (inputs or gaps; first at byte "
          << first << " of " << now.size() << ")";
      ++problems;
    }
  }
  if (problems) return ::testing::AssertionFailure() << err.str();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult CallGuard::untouched() const {
  for (const Snap& s : snaps_) {
    const std::vector<uint8_t> now = s.buf->to_host();
    for (size_t i = 0; i < now.size(); ++i) {
      if (now[i] != s.bytes[i]) {
        return ::testing::AssertionFailure()
               << "a failed call changed memory: byte " << i << " of a " << now.size()
               << "-byte buffer";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace fa_test
