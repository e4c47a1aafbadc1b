// Properties of fanout_grad (spec OP-11) that its contracts fix exactly: (a) each contract's first
// addition commutes, so swapping its two operands leaves the bits unchanged, while swapping an
// operand of the first addition with the last changes them where the order shows; (b) on small
// integers every order is exact, so both contracts give the exact sum; (c) with g_router =
// -g_dispatcher (finite) dsv4 returns g_shared itself (x - x = +0, then +0 + s = s; a -0 s becomes
// +0), and glm45 returns dt(dt(x + s) - x), which loses s where x is much larger. The orders are
// stated here from the spec, independently of reference/.
#include <cmath>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/dtype.h"
#include "core/gen.h"
#include "properties/harness.h"

namespace bitparity::ops {
namespace {

using namespace props;

bool is_fanout(const Target& t) { return t.op == "fanout_grad"; }

// The contract's operands in order: the first addition's two, then the last one.
struct Order {
  const char* first_a;
  const char* first_b;
  const char* last;
};
Order order_of(const std::string& contract) {
  if (contract == "glm45") return {"g_dispatcher", "g_shared", "g_router"};
  return {"g_dispatcher", "g_router", "g_shared"};  // dsv4
}

Case with_swapped(const Case& c, const char* a, const char* b) {
  Case out = c;
  std::swap(out.inputs[a], out.inputs[b]);
  return out;
}

class FanoutOrder : public testing::TestWithParam<Target> {};

TEST_P(FanoutOrder, TheFirstAdditionCommutesAndTheLastOperandIsFixed) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  const Order o = order_of(target.contract());
  check_property([&] {
    const Case c = *op_info("fanout_grad").generate(Direction::kForward);
    reproduce_with(c, "invariance_violation");
    const Outcome base = run(target, c);
    RC_ASSERT(!base.rejected());
    const Outcome swapped = run(target, with_swapped(c, o.first_a, o.first_b));
    if (const auto diff = difference(base, swapped, "first addition's operands swapped")) RC_FAIL(*diff);
    // The last operand moved into the first addition: the other contract's order, which must differ
    // from this one exactly where the case's classes say the orders differ.
    const Outcome moved = run(target, with_swapped(c, o.first_b, o.last));
    const bool differ = op_info("fanout_grad").classes(c).value_class.rfind("orders_differ", 0) == 0;
    const bool bits_differ = difference(base, moved, "").has_value();
    RC_ASSERT(bits_differ == differ);
    RC_TAG(differ ? "orders differ" : "orders agree");
  });
}

INSTANTIATE_TEST_SUITE_P(Fanout, FanoutOrder, testing::ValuesIn(targets_where(is_fanout)), target_name);

class FanoutExact : public testing::TestWithParam<Target> {};

// Small integers: every partial sum is an integer of at most 24 in magnitude, exact in every dtype.
TEST_P(FanoutExact, SmallIntegersGiveTheExactSum) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const DType dt = *rc::gen::element(DType::kBF16, DType::kFP16, DType::kFP32);
    const int64_t T = *rc::gen::inRange<int64_t>(0, 20), H = *rc::gen::inRange<int64_t>(1, 40);
    Case c;
    c.op = "fanout_grad";
    for (const char* name : {"g_router", "g_dispatcher", "g_shared"})
      c.inputs[name] = *gen::tensor(dt, {T, H}, gen::ValueFamily::kSmallInt);
    reproduce_with(c, "invariance_violation");
    const Outcome out = run(target, c);
    RC_ASSERT(!out.rejected());
    const Tensor& d = out.outputs->at("d_hidden");
    for (int64_t i = 0; i < d.numel(); ++i) {
      const double want = c.inputs["g_router"].f64(i) + c.inputs["g_dispatcher"].f64(i) + c.inputs["g_shared"].f64(i);
      RC_ASSERT(d.f64(i) == want);
      if (want == 0) RC_ASSERT(!std::signbit(d.f64(i)) || (std::signbit(c.inputs["g_router"].f64(i)) &&
                                                           std::signbit(c.inputs["g_dispatcher"].f64(i)) &&
                                                           std::signbit(c.inputs["g_shared"].f64(i))));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Fanout, FanoutExact, testing::ValuesIn(targets_where(is_fanout)), target_name);

class FanoutCancel : public testing::TestWithParam<Target> {};

// g_router = -g_dispatcher, finite: dsv4's first addition is exactly +0, so it returns g_shared
// (+0 for a -0 g_shared, the canonical NaN for a NaN); glm45 returns dt(dt(x + s) - x).
TEST_P(FanoutCancel, CancellingBranchesShowTheOrder) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  check_property([&] {
    const DType dt = *rc::gen::element(DType::kBF16, DType::kFP16, DType::kFP32);
    const int64_t H = *rc::gen::inRange<int64_t>(1, 40);
    Case c;
    c.op = "fanout_grad";
    const Tensor x = *gen::tensor(dt, {2, H}, gen::ValueFamily::kModerate);
    const Tensor s = *gen::tensor(dt, {2, H}, gen::ValueFamily::kMixed);
    Tensor neg(dt, {2, H});
    for (int64_t i = 0; i < x.numel(); ++i) neg.set_f32(i, -x.f32(i));
    c.inputs["g_dispatcher"] = x;
    c.inputs["g_router"] = neg;
    c.inputs["g_shared"] = s;
    reproduce_with(c, "invariance_violation");
    const Outcome out = run(target, c);
    RC_ASSERT(!out.rejected());
    const Tensor& d = out.outputs->at("d_hidden");
    for (int64_t i = 0; i < d.numel(); ++i) {
      float want;
      if (target.contract() == "dsv4") {
        want = 0.0f + s.f32(i);
      } else {
        Tensor t(dt, {1});
        t.set_f32(0, x.f32(i) + s.f32(i));
        want = t.f32(0) - x.f32(i);
      }
      Tensor w(dt, {1});
      w.set_f32(0, want);
      if (std::isnan(want)) RC_ASSERT(std::isnan(d.f32(i)));
      else RC_ASSERT(d.bits(i) == w.bits(0));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Fanout, FanoutCancel, testing::ValuesIn(targets_where(is_fanout)), target_name);

}  // namespace
}  // namespace bitparity::ops
