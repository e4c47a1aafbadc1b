// How RapidCheck prints bitparity values in a counterexample: the case format's JSON, so every
// element appears as its hex bit pattern and the printed case can be replayed as it stands.
#pragma once

#include <ostream>

#include "core/case.h"
#include "core/case_json.h"

namespace bitparity {

inline void showValue(const Case& c, std::ostream& os) { os << case_to_json(c).dump(); }
inline void showValue(const Tensor& t, std::ostream& os) { os << tensor_to_json(t).dump(); }
inline void showValue(const TensorMap& tensors, std::ostream& os) { os << tensors_to_json(tensors).dump(); }

}  // namespace bitparity
