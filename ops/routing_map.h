// The routing map that permute and unpermute share (spec OP-2, OP-3): its checks under each
// contract, the structure both ops read from it (each token's experts, each expert's count and
// offset, the position pos(t, e) of every routed pair in the expert-major order), the cut of a
// case to fewer tokens, fewer experts, a smaller k or narrower rows that follows it (take_rows and
// the shape shrinker), and the generators and classes of routing cases. Structure only: each
// backend writes the arithmetic itself.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <rapidcheck/Gen.h>

#include "core/registry.h"

namespace bitparity::ops::routing_map {

// How a contract constrains the experts per row.
enum class KRule {
  kSameAsRowZero,     // megatron_eager: k read from row 0 (T = 0 refused), every row routes to k
  kSameOverValidRows, // paddle_aligned: rows with no expert are padding; the other rows share one k
  kAny,               // baseline: index_select / scatter_add_ take any counts, T = 0 included
};
KRule k_rule(const ContractInfo& contract);

// read() counts the experts in an array where they are at most the entries plus this many, and
// sorts the entries where experts are more (a map of 2 tokens and 150,000 experts).
inline constexpr int64_t kCountedExperts = 4096;

// The structure of a bool [T, E] routing map M.
struct Routing {
  // A token's run of slots (its experts, or their positions) in Routing's flat arrays: valid while
  // the Routing it came from lives unchanged (a copy of the Routing does not carry it over).
  struct Run {
    const int64_t* first = nullptr;
    const int64_t* last = nullptr;
    const int64_t* begin() const { return first; }
    const int64_t* end() const { return last; }
    size_t size() const { return static_cast<size_t>(last - first); }
    bool empty() const { return first == last; }
    int64_t operator[](size_t j) const { return first[j]; }
  };

  int64_t tokens = 0, experts = 0;
  std::vector<int64_t> token_of_row;  // per permuted row (expert-major): its token

  // Token t's experts in ascending id: slot j is the j-th smallest (OP-2's reverse map).
  Run slots(int64_t t) const { return run(expert_of_slot, t); }
  // pos(t, slots(t)[j]) for each slot j of token t: ascending in j.
  Run positions(int64_t t) const { return run(position_of_slot, t); }
  int64_t rows() const { return static_cast<int64_t>(token_of_row.size()); }  // N, the true entries
  int64_t slot_count(int64_t t) const { return first_slot[static_cast<size_t>(t) + 1] - first_slot[static_cast<size_t>(t)]; }
  // pos(t, e), or -1 when M[t, e] is false.
  int64_t position(int64_t t, int64_t e) const;

  // Flat, in token order (CSR): token t's slots are [first_slot[t], first_slot[t + 1]).
  std::vector<int64_t> first_slot;        // [T + 1]
  std::vector<int64_t> expert_of_slot;    // [N]
  std::vector<int64_t> position_of_slot;  // [N]

 private:
  Run run(const std::vector<int64_t>& of_slot, int64_t t) const {
    const int64_t* base = of_slot.data();
    return {base + first_slot[static_cast<size_t>(t)], base + first_slot[static_cast<size_t>(t) + 1]};
  }
};

// The routing map of a case; RejectError naming routing_map when it is absent, not bool or not
// of rank 2 (`who` starts the message: "unpermute").
Routing read(const std::string& who, const Tensor* map);
// The same, or nothing when the map cannot be read (classes and cuts of malformed cases).
std::optional<Routing> try_read(const Case& c);

// What the input checks read of a routing map: its dimensions and each row's true entries, without
// the positions (validate runs for every side of a case and for each draw the generator aims at
// accepted inputs, so it reads the map more often than any backend).
struct Counts {
  int64_t tokens = 0, experts = 0;
  int64_t entries = 0;            // N, the true entries
  std::vector<int64_t> per_row;   // per token: its true entries
};
// The same checks and messages as read().
Counts read_counts(const std::string& who, const Tensor* map);

// The contract's rule on the experts per row (k_rule); RejectError("shape") naming routing_map.
void check_counts(const std::string& who, const Counts& counts, const ContractInfo& contract);

// The case's input `name`; RejectError("shape") naming it when absent.
const Tensor& required(const std::string& who, const Case& c, const std::string& name);
// A [rows, H] tensor of bf16, fp16 or fp32 (the data both ops move): RejectError("dtype") or
// ("shape") naming `name`. Returns H.
int64_t check_data(const std::string& who, const Tensor& t, const std::string& name, int64_t rows,
                   const std::string& rows_meaning);
// probs [T, E] fp32, the routing map's shape.
void check_probs(const std::string& who, const Tensor& probs, const Counts& counts);

// --- cuts: fewer tokens, experts, slots or columns -----------------------------------------------

// Tokens [r0, r0 + n), hidden columns [h0, h0 + width), the experts `experts` (old ids, in their
// new order: a permutation renames experts, a subset drops them), and of each kept token the slots
// that keep_slot allows. The [N, H] inputs (permuted, d_permuted) keep the rows of the kept pairs
// in the cut map's expert-major order; probs follows the tokens and experts.
struct Cut {
  int64_t r0 = 0, n = 0;
  int64_t h0 = 0, width = -1;    // -1: every column
  std::vector<int64_t> experts;  // empty: every expert, in order
  std::function<bool(int64_t token, int64_t slot)> keep_slot;  // empty: every slot
};
Cut tokens_cut(int64_t r0, int64_t n);  // tokens [r0, r0 + n), the rest whole
// Throws RejectError when the case's routing map cannot be read.
Case cut(const Case& c, const Cut& cut);

// OpInfo::take_rows of both ops: tokens [r0, r0 + n) and the permuted rows of those tokens. A
// case whose routing map cannot be read has its rows-first inputs cut and the rest kept.
Case take_rows(const Case& c, int64_t r0, int64_t n);

// OpInfo::shrink_shape of both ops, most aggressive first: without probs, single tokens, halves
// of the tokens, only the experts in use, one slot fewer per token, narrower rows.
std::vector<Case> shrink_shape(const Case& c);

// --- generation ----------------------------------------------------------------------------------

// Random cases of `op` ("permute" or "unpermute") in one direction, reaching every edge class of
// required_tags with a fixed probability.
rc::Gen<Case> generate(const std::string& op, Direction direction);
std::vector<std::string> required_tags(const std::string& op, Direction direction);
CaseClasses classes(const Case& c);

// The input whose per-token slot rows a direction sums (d_permuted of permute's backward, permuted
// of unpermute's forward), or "" where the direction sums none.
std::string slot_sum_input(const std::string& op, Direction direction);

// Sets what permute and unpermute share on a record whose name and contracts are set: the
// generator and its required tags, the classes, the cut to rows (take_rows), the shape shrinker, and
// the order-of-arrival contracts' arrival_order_free (no slot sum, or at most one slot a token) and
// arrival_order_fixed (the rows of tokens of at most one slot).
void add_routing_generators(OpInfo& op);

// A [T, E] routing map in which every token routes to k experts drawn uniformly without
// replacement from splitmix64(seed): (T, E, k, seed) name its bits. For reference inputs.
Tensor large_routing_map(int64_t tokens, int64_t experts, int64_t k, uint64_t seed);

// A small [T, E] map for error inputs: token t routes to experts t, t + 1, ... (mod E), k of them,
// or counts[t] where counts is given (unequal counts, padding rows).
Tensor small_routing_map(int64_t tokens, int64_t experts, int64_t k, const std::vector<int64_t>& counts = {});

// The reference inputs of permute and unpermute (unpermute takes each also with probs): T tokens
// of H, E experts, k a token, and whether only the benchmarks take it. GLM-4.5-Air (E = 128) and
// GLM-4.5 (E = 160) at 16384 tokens; for GPU tests a 2048-token case, one of 40000 tokens and 64
// experts (313 tiles: the CUDA index's three kernels, its scan two passes over 64 x 313 tile counts;
// generated maps reach the three kernels only in one tile, with more than 32768 experts), and one of
// k = 12 (more slots a token than gather_sum's default batch of 8, which generated maps, k <= 8,
// never have).
struct ReferenceShape {
  int64_t tokens, H, E, k;
  bool bench_only;
};
inline constexpr ReferenceShape kReferenceShapes[] = {
    {16384, 4096, 128, 8, true}, {16384, 4096, 160, 8, true}, {2048, 4096, 128, 8, false},
    {40000, 8, 64, 2, false},    {1000, 64, 32, 12, false}};

// "tokens{T}_H{H}_E{E}_k{k}": a reference input's name, which benchmarks and reports show.
std::string reference_name(const ReferenceShape& s);

// The CUDA index (gpu/routing.cu) is one kernel for a map of one 128-token tile and at most this
// many experts (the kernel path index:one_kernel); two for any other map of at most 128 tiles and
// kPlaceSumsCounts tile counts (tiles x E; index:two_kernels); three otherwise (index:three_kernels).
inline constexpr int64_t kOneKernelExperts = 2048;
inline constexpr int64_t kPlaceSumsCounts = 32768;
// copy_rows, the CUDA kernel of permute's forward and unpermute's backward without probs, takes a
// block per token where a row has at least this many vectors of the width its bytes allow (16, 8, 4
// or 2 bytes; the kernel path copy_rows:token_blocks).
inline constexpr int64_t kCopyRowsTokenBlockVectors = 256;

}  // namespace bitparity::ops::routing_map
