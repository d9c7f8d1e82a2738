// The problem sweeps shared by the forward and backward tests (CPU and GPU).
//
// Small sizes get the full cross-product of the main axes; large sizes a
// representative subset, so the CPU suite stays within minutes on a 2-core
// CI machine (the fp64 reference is O(N^2 d) per head and runs serially-ish).
// Axes not in a product (layout, batch) rotate with the case index, so every
// value meets many others without multiplying the count.
#pragma once

#include <vector>

#include "support/harness.hpp"

namespace fa_test {

// dtype x head_dim {8,64,72,128,256} x (Sq, Sk) in {1,17,113}^2 x causal x GQA {1,2,8}.
std::vector<Case> small_cases();
// Lengths 267 and 1030 (Sq != Sk both ways, decode-like Sq = 1), a few head dims.
std::vector<Case> large_cases(bool backward);
// Sliding window, softcap, explicit scale, no LSE, each layout explicitly.
std::vector<Case> feature_cases();
// Causal and windowed problems with more work tiles than twice an H200's 132
// SMs, so that each persistent CTA of the Hopper forward claims several
// tiles from its counter (src/cuda/sm90/tile_scheduler.cuh).
std::vector<Case> many_tile_cases();
// v with a head dim of its own (192 / 128 and others, either side wider),
// every dtype, layouts including packed [Q | K | V] rows, GQA, causal,
// window + softcap, deterministic.
std::vector<Case> head_dim_v_cases();
// Head dims that are not multiples of 8 (3, 36, 100, 250; v's own 70), which
// reach the kernels on zero-padded copies: every dtype, every layout (packed
// rows of odd strides among them), GQA, Sq != Sk, causal rows that see no key.
std::vector<Case> odd_head_dim_cases();

}  // namespace fa_test
