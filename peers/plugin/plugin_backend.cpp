#include "peers/plugin/plugin_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <variant>

#include "bitparity/plugin.h"
#include "core/error.h"
#include "core/json_strict.h"
#ifdef BITPARITY_HAVE_CUDA
#include "gpu/common/device_tensor.h"
#include "gpu/runtime.h"
#endif

namespace bitparity::peers {
namespace {

// More pairs than any registry has: a count past it is a description that is not one.
constexpr int64_t kMaxPluginImpls = 4096;

// The dtypes in the order of bitparity_dtype; a static_assert per value keeps the two in step.
constexpr DType kDTypes[] = {DType::kBF16,    DType::kFP16,    DType::kFP32, DType::kFP64, DType::kFP8E4M3,
                             DType::kFP8E5M2, DType::kBool,    DType::kI32,  DType::kI64};
static_assert(BITPARITY_BF16 == 0 && BITPARITY_FP16 == 1 && BITPARITY_FP32 == 2 && BITPARITY_FP64 == 3 &&
              BITPARITY_FP8_E4M3 == 4 && BITPARITY_FP8_E5M2 == 5 && BITPARITY_BOOL == 6 && BITPARITY_I32 == 7 &&
              BITPARITY_I64 == 8);

int32_t abi_dtype(DType dtype) {
  for (int32_t i = 0; i < static_cast<int32_t>(std::size(kDTypes)); ++i)
    if (kDTypes[i] == dtype) return i;
  throw std::logic_error("a dtype without a plug-in ABI value");
}

std::optional<DType> dtype_of(int32_t value) {
  if (value < 0 || value >= static_cast<int32_t>(std::size(kDTypes))) return std::nullopt;
  return kDTypes[value];
}

// A string from the plug-in's buffer, as if its last byte were the NUL: a plug-in that fills the
// buffer to the end gets N - 1 characters, whatever it wrote.
template <size_t N>
std::string bounded(const char (&buffer)[N]) {
  return std::string(buffer, strnlen(buffer, N - 1));
}

// A tensor's view for the ABI: shape storage that outlives the call.
struct AbiTensor {
  std::string name;
  Shape shape;
  bitparity_tensor view{};
};

void fill_view(AbiTensor& t, DType dtype, void* data, uint64_t nbytes) {
  t.view.name = t.name.c_str();
  t.view.dtype = abi_dtype(dtype);
  t.view.rank = static_cast<int32_t>(t.shape.size());
  t.view.shape = t.shape.data();
  t.view.data = nbytes == 0 ? nullptr : data;
  t.view.nbytes = nbytes;
}

// The memory one call's tensors live in: host tensors, or device copies of them.
class CallMemory {
 public:
  explicit CallMemory(bool device) : device_(device) {}

  // An input's copy (a plug-in must not change the case the other side computes).
  void* add_input(const std::string& name, const Tensor& t) {
    if (!device_) return inputs_host_.emplace(name, t).first->second.data();
#ifdef BITPARITY_HAVE_CUDA
    return inputs_device_.emplace(name, gpu::upload(t)).first->second.data();
#else
    throw std::logic_error("device memory in a build without CUDA");
#endif
  }

  void* add_output(const std::string& name, DType dtype, const Shape& shape) {
    if (!device_) {
      Tensor& t = outputs_host_.emplace(name, Tensor(dtype, shape)).first->second;
      std::memset(t.data(), kPoisonByte, t.nbytes());
      return t.data();
    }
#ifdef BITPARITY_HAVE_CUDA
    return outputs_device_.emplace(name, gpu::allocate(TensorMeta{shape, dtype}, kPoisonByte)).first->second.data();
#else
    throw std::logic_error("device memory in a build without CUDA");
#endif
  }

  // After the plug-in returned: every enqueued kernel finished (a fault surfaces here, against this
  // case), then the outputs come home.
  TensorMap take_outputs() {
    if (!device_) return std::move(outputs_host_);
#ifdef BITPARITY_HAVE_CUDA
    gpu::synchronize();
    return gpu::download(outputs_device_);
#else
    return {};
#endif
  }

 private:
  bool device_;
  TensorMap inputs_host_, outputs_host_;
#ifdef BITPARITY_HAVE_CUDA
  gpu::DeviceTensorMap inputs_device_, outputs_device_;
#endif
};

// Everything one call hands the plug-in, kept alive until it returns.
struct CallState {
  explicit CallState(bool device) : memory(device) {}
  CallMemory memory;
  std::string op, direction, contract;
  std::vector<std::string> attr_names, attr_strings;
  std::vector<bitparity_attr> attrs;
  std::vector<std::unique_ptr<AbiTensor>> inputs, expected;
  std::set<std::string> allocated;  // the outputs allocate_output gave, by name
  std::vector<std::string> declared;  // the op's outputs in the case's direction, which it may allocate
  std::vector<bitparity_tensor> input_views, expected_views;
  std::string allocation_error;  // the first refused allocate_output, for the error message
};

extern "C" int32_t allocate_output(const bitparity_call* call, const char* name, int32_t dtype, int32_t rank,
                                   const int64_t* shape, void** data) {
  if (!call || !call->host || !data) return 1;
  auto& state = *static_cast<CallState*>(call->host);
  auto refuse = [&](const std::string& why) {
    if (state.allocation_error.empty()) state.allocation_error = why;
    return int32_t{1};
  };
  *data = nullptr;
  if (!name) return refuse("allocate_output without a name");
  const std::string_view raw(name, strnlen(name, 256));
  const std::string output = excerpt(raw);  // quoted, for messages
  // Only the outputs the op has in this direction (as for exec workers; one the case does not
  // expect is a finding): another name would reach a finding, and a corpus entry whose signature
  // no reader of the corpus accepts.
  if (std::find(state.declared.begin(), state.declared.end(), raw) == state.declared.end())
    return refuse("allocate_output(" + output + "): the op has no output of that name");
  const std::optional<DType> type = dtype_of(dtype);
  if (!type) return refuse("allocate_output(" + output + "): dtype " + std::to_string(dtype) + " is no bitparity_dtype");
  if (rank < 0 || rank > kMaxTensorRank || (rank > 0 && !shape))
    return refuse("allocate_output(" + output + "): rank " + std::to_string(rank) + " is outside 0.." +
                  std::to_string(kMaxTensorRank));
  if (state.allocated.count(std::string(raw))) return refuse("allocate_output(" + output + "): allocated twice");
  Shape dims(shape, shape + rank);
  try {
    check_shape_limits(dims);
    *data = state.memory.add_output(std::string(raw), *type, dims);
    if (shape_numel(dims) == 0) *data = nullptr;
    state.allocated.insert(std::string(raw));
  } catch (const std::exception& e) {
    *data = nullptr;
    return refuse("allocate_output(" + output + ", " + shape_string(dims) + "): " + e.what());
  }
  return 0;
}

bitparity_attr abi_attr(const std::string& name, const AttrValue& value, std::vector<std::string>& strings) {
  bitparity_attr a{};
  a.name = name.c_str();
  if (const auto* b = std::get_if<bool>(&value)) {
    a.type = BITPARITY_ATTR_BOOL;
    a.bool_value = *b ? 1 : 0;
  } else if (const auto* i = std::get_if<int64_t>(&value)) {
    a.type = BITPARITY_ATTR_INT;
    a.int_value = *i;
  } else if (const auto* d = std::get_if<double>(&value)) {
    a.type = BITPARITY_ATTR_FLOAT;
    a.float_value = *d;
  } else {
    a.type = BITPARITY_ATTR_STRING;
    a.string_value = strings.emplace_back(std::get<std::string>(value)).c_str();
  }
  return a;
}

// A loaded plug-in: its description and the lock that serializes its calls.
struct Plugin {
  const bitparity_plugin* description = nullptr;
  std::string kind, path;
  std::mutex lock;
};

TensorMap call_plugin(Plugin& plugin, const OpInfo& op, const Case& c, const ContractInfo& contract) {
  const bool device = plugin.description->memory == BITPARITY_MEMORY_CUDA;
  CallState state(device);
  for (const TensorSpec& spec : op.output_specs(c.direction)) state.declared.push_back(spec.name);
  state.op = c.op;
  state.direction = std::string(direction_name(c.direction));
  state.contract = contract.name;
  // Names first: the views point into these vectors, which must not grow afterwards.
  state.attr_strings.reserve(c.attrs.size());
  state.attr_names.reserve(c.attrs.size());
  for (const auto& [name, value] : c.attrs) state.attrs.push_back(abi_attr(state.attr_names.emplace_back(name), value, state.attr_strings));
  for (const auto& [name, tensor] : c.inputs) {
    auto t = std::make_unique<AbiTensor>();
    t->name = name;
    t->shape = tensor.shape();
    fill_view(*t, tensor.dtype(), state.memory.add_input(name, tensor), tensor.nbytes());
    state.input_views.push_back(t->view);
    state.inputs.push_back(std::move(t));
  }
  for (const auto& [name, meta] : op.validate(c, contract)) {
    auto t = std::make_unique<AbiTensor>();
    t->name = name;
    t->shape = meta.shape;
    fill_view(*t, meta.dtype, nullptr, 0);
    state.expected_views.push_back(t->view);
    state.expected.push_back(std::move(t));
  }

  bitparity_call call{};
  call.op = state.op.c_str();
  call.direction = state.direction.c_str();
  call.contract = state.contract.c_str();
  call.attrs = state.attrs.data();
  call.num_attrs = static_cast<int64_t>(state.attrs.size());
  call.inputs = state.input_views.data();
  call.num_inputs = static_cast<int64_t>(state.input_views.size());
  call.expected_outputs = state.expected_views.data();
  call.num_expected_outputs = static_cast<int64_t>(state.expected_views.size());
  call.stream = nullptr;  // the default stream, which take_outputs synchronizes
  call.allocate_output = allocate_output;
  call.host = &state;

  bitparity_error error{};
  const std::string who = "plug-in " + plugin.kind;
  const bitparity_status status = [&] {
    std::lock_guard<std::mutex> guard(plugin.lock);
    return plugin.description->compute(&call, &error);
  }();
  switch (status) {
    case BITPARITY_OK:
      break;
    case BITPARITY_REJECT: {
      const std::string error_class = bounded(error.error_class);
      // The class goes into findings' signatures ('|'-separated, no control characters); an outcome
      // that harnesses count as a finding (device_fault) is none.
      if (!error_class.empty() && !valid_reject_class(error_class))
        throw std::runtime_error(who + " rejected the case with the class " + excerpt(error_class) + ", which is not " +
                                 kRejectClassRule + " (" + printable(bounded(error.message)) + ")");
      throw RejectError(error_class.empty() ? "reject" : error_class, who + ": " + printable(bounded(error.message)));
    }
    case BITPARITY_ERROR: {
      std::string message = who + ": " + printable(bounded(error.message));
      if (!state.allocation_error.empty()) message += " (" + state.allocation_error + ")";
      throw std::runtime_error(message);
    }
    default:
      throw std::runtime_error(who + " returned status " + std::to_string(static_cast<int>(status)) +
                               ", which plug-in ABI " + std::to_string(BITPARITY_PLUGIN_ABI_VERSION) +
                               " does not define (0 ok, 1 reject, 2 error)");
  }
  if (!state.allocation_error.empty())
    throw std::runtime_error(who + " returned ok after a refused allocation: " + state.allocation_error);
  return state.memory.take_outputs();
}

std::string error_for(const std::filesystem::path& path, const std::string& what) {
  return "plug-in " + path.string() + ": " + what;
}

// The description's (op, contract) pairs, each checked against the registry.
std::vector<std::pair<std::string, std::string>> read_impls(const Registry& registry, const bitparity_plugin& d,
                                                            const std::filesystem::path& path) {
  if (d.num_impls < 1 || d.num_impls > kMaxPluginImpls || !d.impls)
    throw std::runtime_error(error_for(path, "num_impls is " + std::to_string(d.num_impls) + "; expected 1.." +
                                                 std::to_string(kMaxPluginImpls) + " with an impls array"));
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::pair<std::string, std::string>> seen;
  for (int64_t i = 0; i < d.num_impls; ++i) {
    const bitparity_impl& impl = d.impls[i];
    const std::string field = "impls[" + std::to_string(i) + "]";
    if (!impl.op || !impl.contract) throw std::runtime_error(error_for(path, field + " lacks its op or contract"));
    const std::string op(impl.op, strnlen(impl.op, 128)), contract(impl.contract, strnlen(impl.contract, 128));
    const OpInfo* info = registry.op(op);
    if (!info) throw std::runtime_error(error_for(path, field + ": no op \"" + op + "\" in this binary (see `bitparity list`)"));
    if (!info->has_contract(contract))
      throw std::runtime_error(error_for(path, field + ": " + op + " has no contract \"" + contract + "\""));
    if (!seen.insert({op, contract}).second)
      throw std::runtime_error(error_for(path, field + ": " + op + " under " + contract + " is listed twice"));
    out.emplace_back(op, contract);
  }
  return out;
}

const bitparity_plugin* open_description(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path))
    throw std::runtime_error(error_for(path, "no such file (a plug-in is a shared library: --plugin PATH.so)"));
  dlerror();
  // RTLD_NODELETE: kernels, static objects and CUDA modules of the library stay until the process
  // ends, whatever still refers to them.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    const char* why = dlerror();
    throw std::runtime_error(error_for(path, std::string("cannot be opened: ") + (why ? why : "dlopen failed")));
  }
  auto entry = reinterpret_cast<bitparity_plugin_entry>(dlsym(handle, BITPARITY_PLUGIN_ENTRY));
  if (!entry)
    throw std::runtime_error(error_for(path, std::string("has no entry point ") + BITPARITY_PLUGIN_ENTRY +
                                                 " (declare it extern \"C\" and export it; see bitparity/plugin.h)"));
  const bitparity_plugin* d = entry(BITPARITY_PLUGIN_ABI_VERSION);
  if (!d) throw std::runtime_error(error_for(path, std::string(BITPARITY_PLUGIN_ENTRY) + " returned NULL: it cannot serve this host (its stderr may say why)"));
  return d;
}

}  // namespace

PluginInfo add_plugin_backend(Registry& registry, const std::filesystem::path& given) {
  const std::filesystem::path path = std::filesystem::absolute(given);
  const bitparity_plugin* d = open_description(path);
  if (d->abi_version != BITPARITY_PLUGIN_ABI_VERSION)
    throw std::runtime_error(error_for(path, "built for plug-in ABI " + std::to_string(d->abi_version) +
                                                 "; this bitparity speaks ABI " +
                                                 std::to_string(BITPARITY_PLUGIN_ABI_VERSION) + " (rebuild it against this bitparity/plugin.h)"));
  const std::string kind = d->name ? std::string(d->name, strnlen(d->name, kMaxKindNameLength + 1)) : "";
  if (!valid_kind_name(kind))
    throw std::runtime_error(error_for(path, "its name (the backend kind) must match [a-z][a-z0-9_]* in at most " +
                                                 std::to_string(kMaxKindNameLength) + " characters"));
  if (registry.backend(kind))
    throw std::runtime_error(error_for(path, "backend kind \"" + kind + "\" exists already (a plug-in loaded twice, or a name the build uses)"));
  if (!d->compute) throw std::runtime_error(error_for(path, "compute is NULL"));
  if (d->memory != BITPARITY_MEMORY_HOST && d->memory != BITPARITY_MEMORY_CUDA)
    throw std::runtime_error(error_for(path, "memory is " + std::to_string(d->memory) + "; expected 0 (host) or 1 (CUDA)"));
  const bool device = d->memory == BITPARITY_MEMORY_CUDA;
#ifndef BITPARITY_HAVE_CUDA
  if (device)
    throw std::runtime_error(error_for(path, "works on device memory, and this bitparity was built without CUDA"));
#endif
  const auto impls = read_impls(registry, *d, path);

  auto plugin = std::make_shared<Plugin>();
  plugin->description = d;
  plugin->kind = kind;
  plugin->path = path.string();
  std::string doc = d->doc ? std::string(d->doc, strnlen(d->doc, 512)) : "";
  doc = "plug-in " + path.string() + (doc.empty() ? "" : ": " + doc) + (device ? " (CUDA memory)" : " (host memory)");
  std::function<std::optional<std::string>()> unavailable = [] { return std::optional<std::string>(); };
#ifdef BITPARITY_HAVE_CUDA
  if (device) unavailable = [] { return gpu::unavailable_reason(); };
#endif
  registry.add_backend({kind, doc, unavailable});
  for (const auto& [op, contract] : impls) {
    // A copy: the registry's ops may move as more are added.
    auto info = std::make_shared<const OpInfo>(*registry.op(op));
    registry.add_impl(op, kind, contract, [plugin, info](const Case& c, const ContractInfo& contract_info) {
      return call_plugin(*plugin, *info, c, contract_info);
    });
  }
  return {kind, path, device, impls};
}

}  // namespace bitparity::peers
