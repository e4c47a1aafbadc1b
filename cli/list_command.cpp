// `bitparity list`: everything the registry knows, so a user can write cases and pick pairs.
#include <iostream>

#include "cli/commands.h"

namespace bitparity::cli {
namespace {

std::string tensor_names(const std::vector<TensorSpec>& specs) {
  std::string s;
  for (const TensorSpec& t : specs) s += (s.empty() ? "" : ", ") + t.name + (t.optional ? " (optional)" : "");
  return s.empty() ? "none" : s;
}

void print_tensor_docs(std::ostream& out, const std::vector<TensorSpec>& specs) {
  for (const TensorSpec& t : specs)
    if (!t.doc.empty()) out << "        " << t.name << ": " << t.doc << "\n";
}

void print_op(std::ostream& out, const Registry& registry, const OpInfo& op) {
  out << "  " << op.name << " - " << op.doc << "\n";
  for (const auto& [direction, inputs] : op.inputs) {
    auto outputs = op.outputs.find(direction);
    out << "    " << direction_name(direction) << ": inputs " << tensor_names(inputs) << "; outputs "
        << (outputs == op.outputs.end() ? "none" : tensor_names(outputs->second)) << "\n";
    print_tensor_docs(out, inputs);
    if (outputs != op.outputs.end()) print_tensor_docs(out, outputs->second);
  }
  out << "    attributes (optional; absent means not given):" << (op.attrs.empty() ? " none" : "") << "\n";
  for (const AttrSpec& a : op.attrs)
    out << "      " << a.name << " (" << attr_type_name(a.type) << "): " << a.doc << "\n";
  out << "    contracts:\n";
  for (const ContractInfo& c : op.contracts) {
    out << "      " << c.name << ": " << c.doc
        << (c.derived_from.empty() ? "" : " [derived from " + c.derived_from + "]") << "\n";
    if (c.error_bound) out << "        judged within an error bound, not bit for bit: " << c.bound_doc << "\n";
    if (c.arrival_order_bound)
      out << "        where the order of arrival decides the bits, both sides are held within the bound every order "
             "keeps: "
          << c.bound_doc << "\n";
    if (c.order_depends_on_shape) out << "        its order depends on the shape: a row's bits may change with the row count\n";
  }
  std::string impls;
  for (const std::string& impl : registry.impls_of(op.name)) impls += (impls.empty() ? "" : ", ") + impl;
  out << "    implementations: " << (impls.empty() ? "none" : impls) << "\n";
}

void print_backends(std::ostream& out, const Registry& registry) {
  out << "backends:\n";
  for (const BackendKind& b : registry.backends()) {
    std::optional<std::string> why;
    if (b.unavailable_reason) why = b.unavailable_reason();
    out << "  " << b.name << " - " << b.doc << ": " << (why ? "unavailable (" + *why + ")" : "available") << "\n";
  }
}

}  // namespace

Command add_list(CLI::App& root, const Registry& registry) {
  CLI::App* app = root.add_subcommand("list",
                                      "List ops (directions, inputs, outputs, attributes), contracts, "
                                      "backends with their availability, and implementations per op.");
  app->footer("Example:\n  bitparity list");
  return {app, [&registry] {
            std::cout << "ops:\n";
            for (const OpInfo& op : registry.ops()) print_op(std::cout, registry, op);
            print_backends(std::cout, registry);
            return kExitOk;
          }};
}

}  // namespace bitparity::cli
