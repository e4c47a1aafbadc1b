// GLM-4.5-Air's MoE layer through expert_mlp's kernel records (bench/moe_layer.cpp): registered into
// kernel_bench beside the per-record benchmarks, named layer/glm45_air_T<tokens>/expert_mlp_<dir>/<contract>.
#pragma once

namespace bitparity::bench {

void register_moe_layer_benchmarks();

}  // namespace bitparity::bench
