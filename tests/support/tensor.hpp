// Test tensors: a shared Buffer plus an element offset, shape and strides, so
// Q/K/V can be views into one packed buffer, BHSD via strides, or padded rows.
// Values cross to and from the host as dense row-major doubles.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flashattn/flashattn.hpp"
#include "support/buffer.hpp"

namespace fa_test {

// How a [B, S, H, D] tensor sits in memory.
enum class Layout {
  BSHD,    // contiguous
  BHSD,    // [B, H, S, D] storage, passed as BSHD through strides
  Padded,  // BSHD with gaps after each head, each row and each batch
  Packed,  // Q/K/V views into one [B, S, Hq + 2 Hkv, D] buffer (K/V only when Sq != Sk);
           // for other tensors the same as Padded
};
const char* layout_name(Layout l);

// Element `i` of raw storage of dtype `dt`, widened / rounded (RNE) to it.
double load_elem(DType dt, const uint8_t* bytes, int64_t i);
void store_elem(DType dt, uint8_t* bytes, int64_t i, double v);

struct Tensor {
  std::shared_ptr<Buffer> buf;
  DType dtype = DType::F32;
  int64_t offset = 0;  // in elements, into buf
  int ndim = 0;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};

  Device device() const { return buf->device(); }
  int64_t numel() const;
  flashattn::TensorView view() const;  // data == nullptr when !buf
  // Element offsets into buf, in dense row-major order of the shape.
  std::vector<int64_t> element_offsets() const;
  std::vector<double> read() const;
  void write(const std::vector<double>& dense) const;  // rounds to dtype
};

Tensor make_contiguous(Device dev, DType dt, std::vector<int64_t> shape);
Tensor make_bshd(Device dev, DType dt, Layout layout, int64_t B, int64_t S, int64_t H, int64_t D);
struct QKV {
  Tensor q, k, v;
};
// v (and its views) have head dim Dv (0 = D).
QKV make_qkv(Device dev, DType dt, Layout layout, int64_t B, int64_t Sq, int64_t Sk, int64_t Hq,
             int64_t Hkv, int64_t D, int64_t Dv = 0);
// fp32 [B, H, Sq], contiguous.
inline Tensor make_lse(Device dev, int64_t B, int64_t H, int64_t Sq) {
  return make_contiguous(dev, DType::F32, {B, H, Sq});
}

// Poisons the outputs of a call (NaN with a recognisable payload; the whole
// buffer when it holds no input, so gaps between strided rows are poisoned
// too), then snapshots every buffer the call can see.
class CallGuard {
 public:
  CallGuard(std::vector<const Tensor*> inputs, std::vector<const Tensor*> outputs);
  // After a successful call: every output element was overwritten, and no
  // other byte of any buffer (inputs, gaps between rows) changed.
  ::testing::AssertionResult wrote_exactly_outputs() const;
  // After a failed call: nothing changed at all.
  ::testing::AssertionResult untouched() const;

 private:
  struct Snap {
    std::shared_ptr<Buffer> buf;
    std::vector<uint8_t> bytes;
  };
  std::vector<const Tensor*> inputs_, outputs_;
  std::vector<Snap> snaps_;
};

}  // namespace fa_test
