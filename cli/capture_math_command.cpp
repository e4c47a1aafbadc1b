// `bitparity capture-math`: reads the present GPU's ex2.approx tables (and, optionally, a sample
// of its fp32 math results) for the reference's libdevice model (spec rule 12).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#ifdef BITPARITY_HAVE_CUDA
#include "gpu/math/capture_math.h"
#endif

namespace bitparity::cli {
namespace {

struct CaptureFlags {
  std::string tables, sample;
};

int capture(const CaptureFlags& flags) {
#ifdef BITPARITY_HAVE_CUDA
  std::string error;
  if (gpu::math::capture_math(flags.tables, &error) != 0) {
    std::cerr << "error: " << error << "\n";
    return kExitError;
  }
  std::cout << "wrote the ex2 tables to " << flags.tables << "\n";
  if (!flags.sample.empty()) {
    if (gpu::math::capture_math_sample(flags.sample, &error) != 0) {
      std::cerr << "error: " << error << "\n";
      return kExitError;
    }
    std::cout << "wrote the device sample to " << flags.sample << "\n";
  }
  return kExitOk;
#else
  (void)flags;
  std::cerr << "error: this bitparity was built without CUDA (nvcc was not found at build time)\n";
  return kExitError;
#endif
}

}  // namespace

Command add_capture_math(CLI::App& root) {
  auto flags = std::make_shared<CaptureFlags>();
  CLI::App* app = root.add_subcommand(
      "capture-math",
      "Read the present GPU's ex2.approx.ftz.f32 tables (2 x 2^23 entries, 2-bit delta coded, with the GPU name, "
      "compute capability, driver and CUDA versions) for the reference's bit-exact expf. Compare the result with "
      "reference/math/data/ before trusting the sm_90 tables on another GPU generation.");
  app->add_option("--tables", flags->tables, "output file for the tables (format bitparity-ex2/1)")->required();
  app->add_option("--sample", flags->sample, "also write the device's results at the CI sample inputs here");
  app->footer("Example:\n  bitparity capture-math --tables ex2_sm100.bin --sample device_sample_sm100.bin");
  return {app, [flags] { return capture(*flags); }};
}

}  // namespace bitparity::cli
