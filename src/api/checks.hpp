// Validation of user arguments and their translation into backend params.
// Every rule of DESIGN.md's "Semantics" that a caller can break is checked
// here, once, before any backend runs; backends may assume these hold.
#pragma once

#include "common/params.hpp"

namespace flashattn::detail {

Status make_forward_params(const ForwardArgs& args, FwdParams* out) noexcept;
Status make_backward_params(const BackwardArgs& args, BwdParams* out) noexcept;
Status make_kvcache_params(const KvCacheArgs& args, FwdParams* out) noexcept;

}  // namespace flashattn::detail
