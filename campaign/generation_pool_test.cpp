// The generator processes (generation_pool.h): the case's bytes, draws in other processes, many
// indices ahead of one process, a draw that hangs, the case bound.
#include "campaign/generation_pool.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

namespace bitparity::campaign {
namespace {

namespace fs = std::filesystem;

uint64_t double_bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

Case every_kind_of_value() {
  Case c;
  c.op = "some_op";
  c.direction = Direction::kBackward;
  const double nan_with_payload = [] {
    const uint64_t bits = 0x7ff8'0000'dead'beefULL;
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }();
  c.attrs = {{"flag", true}, {"k", int64_t{-5}}, {"negative_zero", -0.0}, {"nan", nan_with_payload},
             {"inf", -std::numeric_limits<double>::infinity()}, {"score", std::string("sqrt_softplus")}, {"empty", std::string()}};
  int n = 0;
  for (const DType dt : {DType::kBF16, DType::kFP16, DType::kFP32, DType::kFP64, DType::kFP8E4M3, DType::kFP8E5M2,
                         DType::kBool, DType::kI32, DType::kI64}) {
    Tensor t(dt, {2, 3});
    for (size_t i = 0; i < t.nbytes(); ++i) t.data()[i] = static_cast<uint8_t>(37 * i + 11 * n + 1);
    c.inputs.emplace("t" + std::to_string(n++), std::move(t));
  }
  Tensor scalar(DType::kFP32, {});
  scalar.set_f32(0, -0.0f);
  c.inputs.emplace("scalar", scalar);
  c.inputs.emplace("no_rows", Tensor(DType::kI64, {0, 4}));
  c.inputs.emplace("default", Tensor());
  return c;
}

TEST(DrawnCase, BytesGiveTheCaseBackBitForBit) {
  const Case c = every_kind_of_value();
  const Case back = decode_case(encode_case(c));
  EXPECT_EQ(back.op, c.op);
  EXPECT_EQ(back.direction, c.direction);
  ASSERT_EQ(back.attrs.size(), c.attrs.size());
  for (const auto& [name, value] : c.attrs) {
    const AttrValue& got = back.attrs.at(name);
    ASSERT_EQ(got.index(), value.index()) << name;
    if (const double* d = std::get_if<double>(&value)) EXPECT_EQ(double_bits(std::get<double>(got)), double_bits(*d)) << name;
    else EXPECT_EQ(got, value) << name;
  }
  EXPECT_EQ(back.inputs, c.inputs);
  EXPECT_EQ(back.inputs.at("default").shape(), Shape{});
  EXPECT_EQ(back.inputs.at("default").nbytes(), 0u);
  EXPECT_EQ(back.inputs.at("scalar").nbytes(), 4u);
}

TEST(DrawnCase, BrokenBytesAreAnError) {
  const std::string bytes = encode_case(every_kind_of_value());
  for (size_t n = 0; n < bytes.size(); n += 7) EXPECT_THROW(decode_case(bytes.substr(0, n)), std::runtime_error) << n;
  EXPECT_THROW(decode_case(bytes + "x"), std::runtime_error);
  std::string bad_direction = bytes;
  bad_direction[8 + std::strlen("some_op")] = 7;
  EXPECT_THROW(decode_case(bad_direction), std::runtime_error);
}

// A case that says which process drew it and which index it is.
Drawn tagged(int64_t local) {
  Case c;
  c.op = "tagged";
  c.attrs = {{"local", local}, {"pid", int64_t{::getpid()}}};
  Tensor t(DType::kFP32, {local % 5, 3});
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f32(i, static_cast<float>(local + i));
  c.inputs.emplace("x", std::move(t));
  return {c, {}};
}

void expect_tagged(const std::optional<Drawn>& d, int64_t local, std::set<int64_t>* pids = nullptr) {
  ASSERT_TRUE(d.has_value()) << local;
  ASSERT_TRUE(d->c.has_value()) << local << ": " << d->error;
  EXPECT_EQ(std::get<int64_t>(d->c->attrs.at("local")), local);
  EXPECT_EQ(d->c->inputs, tagged(local).c->inputs) << local;
  if (pids) pids->insert(std::get<int64_t>(d->c->attrs.at("pid")));
}

TEST(GenerationPool, DrawsInItsOwnProcessesWhateverTheOrderOfTakes) {
  GenerationPool pool(3, 12, std::nullopt, tagged);
  EXPECT_EQ(pool.alive(), 3);
  std::set<int64_t> pids;
  for (const int64_t local : {0, 2, 1, 3, 40, 4, 39, 5})  // 40 before the indices below it
    expect_tagged(pool.take(local), local, &pids);
  for (int64_t local = 6; local < 200; ++local)
    if (local != 39 && local != 40) expect_tagged(pool.take(local), local, &pids);
  EXPECT_EQ(pids.count(::getpid()), 0u);
  EXPECT_GE(pids.size(), 2u) << "one process drew every case";
}

// Thousands of indices ahead of one process: more requests than its socket holds wait in the
// pool's outbox, so no call blocks on the socket while the pool's lock is held.
TEST(GenerationPool, ManyIndicesAheadOfOneProcess) {
  GenerationPool pool(1, 6000, std::nullopt, tagged);
  for (int64_t local = 0; local < 6000; local += 1) expect_tagged(pool.take(local), local);
}

// Several threads taking at once, as the campaign's jobs do.
TEST(GenerationPool, ThreadsTakeAtOnce) {
  GenerationPool pool(2, 64, std::nullopt, tagged);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t local = t; local < 2000; local += 4) expect_tagged(pool.take(local), local);
    });
  for (std::thread& t : threads) t.join();
}

// A draw that hangs is killed after draw_seconds (5 s: long beside a healthy draw, even on a loaded
// machine); it costs its own case only, and the process left draws the rest.
TEST(GenerationPool, ADrawThatHangsIsKilledAndCostsOnlyItsCase) {
  const pid_t self = ::getpid();
  GenerationPool pool(
      2, 8, std::nullopt,
      [self](int64_t local) {
        if (local == 5 && ::getpid() != self) std::this_thread::sleep_for(std::chrono::hours(1));
        return tagged(local);
      },
      5.0);
  for (int64_t local = 0; local < 40; ++local) {
    const std::optional<Drawn> d = pool.take(local);
    if (local != 5) {
      expect_tagged(d, local);
      continue;
    }
    ASSERT_TRUE(d.has_value());
    EXPECT_FALSE(d->c.has_value());
    EXPECT_TRUE(d->lost);
    EXPECT_NE(d->error.find("drew it for more than 5 s and was killed"), std::string::npos) << d->error;
  }
  EXPECT_EQ(pool.alive(), 1);
}

// No index at or past `end` is drawn, however far ahead the pool looks.
TEST(GenerationPool, NothingPastTheEndIsDrawn) {
  const fs::path dir = fs::temp_directory_path() / ("bitparity_pool_end_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    GenerationPool pool(2, 100, 10, [dir](int64_t local) {
      std::ofstream(dir / std::to_string(local));
      return tagged(local);
    });
    for (int64_t local = 0; local < 10; ++local) expect_tagged(pool.take(local), local);
  }
  std::set<std::string> drawn;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) drawn.insert(e.path().filename().string());
  fs::remove_all(dir);
  EXPECT_EQ(drawn.size(), 10u);
  EXPECT_EQ(drawn.count("10"), 0u);
}

TEST(GenerationPool, WithoutProcessesEveryTakeIsTheCallersOwn) {
  GenerationPool pool(0, 8, std::nullopt, tagged);
  EXPECT_EQ(pool.alive(), 0);
  EXPECT_FALSE(pool.take(0).has_value());
  EXPECT_FALSE(pool.take(1).has_value());
}

}  // namespace
}  // namespace bitparity::campaign
