#include "lifecycle/model_io.h"

#include <algorithm>

namespace harrier {
namespace {

std::string Names(const std::vector<IoSpec>& specs) {
  std::string s = "[";
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i) s += ", ";
    s += "'" + specs[i].name + "'";
  }
  return s + "]";
}

bool DimsMatch(std::span<const int64_t> want, std::span<const int64_t> got) {
  if (want.size() != got.size()) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != -1 && want[i] != got[i]) return false;
  return true;
}

// Resolves a reshape target against the element count it must hold (one -1 may be inferred).
StatusOr<std::vector<int64_t>> ResolveReshape(const std::vector<int64_t>& reshape, int64_t count,
                                              const std::string& what) {
  std::vector<int64_t> out = reshape;
  int64_t known = 1;
  int free_dim = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (free_dim >= 0) return InvalidArgument(what + ": reshape has more than one -1 dim");
      free_dim = static_cast<int>(i);
    } else {
      known *= out[i];
    }
  }
  if (free_dim >= 0) {
    if (known == 0 || count % known != 0)
      return InvalidArgument(what + ": cannot reshape " + std::to_string(count) + " elements to " +
                             ShapeToString(reshape));
    out[free_dim] = count / known;
  } else if (known != count) {
    return InvalidArgument(what + ": cannot reshape " + std::to_string(count) + " elements to " +
                           ShapeToString(reshape));
  }
  return out;
}

// The sizes of `dims`' variable dims, taken from the model's tensor (`model_part`, batch dim
// excluded) where `reshape` has its variable dims; a lone variable dim is inferred from the
// element count when that does not give them.
StatusOr<std::vector<int64_t>> ConfigShape(const IoSpec& spec, std::span<const int64_t> model_part,
                                           const std::string& what) {
  const std::vector<int64_t>& reshape = *spec.reshape;
  const int64_t count = ElementCount(model_part).value_or(-1);
  std::vector<int64_t> values;
  if (model_part.size() == reshape.size()) {
    for (size_t i = 0; i < reshape.size(); ++i)
      if (reshape[i] == -1) values.push_back(model_part[i]);
  }
  std::vector<int64_t> shape = spec.dims;
  size_t next = 0;
  int variable = 0;
  for (int64_t& d : shape) {
    if (d != -1) continue;
    ++variable;
    if (next < values.size()) d = values[next++];
  }
  if (ElementCount(shape) == count) return shape;
  if (variable == 1) {
    shape = spec.dims;
    auto resolved = ResolveReshape(shape, count, what);
    if (resolved.ok()) return resolved;
  }
  return Internal(what + ": the model answered shape " + ShapeToString(model_part) +
                  ", which the config's dims " + ShapeToString(spec.dims) + " (reshape " +
                  ShapeToString(reshape) + ") cannot present");
}

}  // namespace

const IoSpec* ModelIO::FindInput(std::string_view name) const {
  for (const auto& s : inputs)
    if (s.name == name) return &s;
  return nullptr;
}

const IoSpec* ModelIO::FindOutput(std::string_view name) const {
  for (const auto& s : outputs)
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<int64_t> ModelIO::ClientShape(const IoSpec& spec) const {
  std::vector<int64_t> shape;
  if (max_batch_size > 0) shape.push_back(-1);
  shape.insert(shape.end(), spec.dims.begin(), spec.dims.end());
  return shape;
}

Status ValidateAndPrepare(const ModelIO& io, std::string_view model_name, InferenceRequest* request,
                          std::vector<std::string>* output_names, AllOutputs all_outputs) {
  // The labels of the error messages are formatted only for an error: a valid request
  // allocates none of them.
  const auto model = [model_name] { return "model '" + std::string(model_name) + "'"; };
  // Which inputs came: a bit each (a vector only for models with more than 64 inputs).
  uint64_t seen_bits = 0;
  std::vector<bool> seen_more(io.inputs.size() > 64 ? io.inputs.size() : 0, false);
  auto seen = [&](size_t i) { return i < 64 ? ((seen_bits >> i) & 1) != 0 : bool(seen_more[i]); };
  auto mark_seen = [&](size_t i) {
    if (i < 64) {
      seen_bits |= uint64_t{1} << i;
    } else {
      seen_more[i] = true;
    }
  };
  int64_t batch = -1;  // the batch size shared by every input, when max_batch_size > 0

  for (Tensor& t : request->inputs) {
    const IoSpec* spec = io.FindInput(t.name);
    if (spec == nullptr) {
      return InvalidArgument("unexpected input '" + t.name + "' for " + model() +
                             "; it expects " + Names(io.inputs));
    }
    size_t index = spec - io.inputs.data();
    if (seen(index)) return InvalidArgument("input '" + t.name + "' already exists in request");
    mark_seen(index);
    const auto what = [&] { return "input '" + t.name + "' of " + model(); };

    // Triton's words first for the refusals its clients and QA tests match on (its
    // InferenceRequest::Normalize), Harrier's detail after.
    if (t.dtype != spec->dtype) {
      return InvalidArgument("inference input data-type is '" +
                             std::string(DataTypeName(t.dtype)) + "', model expects '" +
                             std::string(DataTypeName(spec->dtype)) + "' for '" +
                             std::string(model_name) + "' (input '" + t.name + "')");
    }
    std::span<const int64_t> dims_part(t.shape);
    if (io.max_batch_size > 0) {
      if (t.shape.empty()) {
        return InvalidArgument("input '" + t.name +
                               "' has no shape but model requires batch dimension for '" +
                               std::string(model_name) + "'; expected " +
                               ShapeToString(io.ClientShape(*spec)));
      }
      int64_t b = t.shape[0];
      if (b > io.max_batch_size) {
        return InvalidArgument("inference request batch-size must be <= " +
                               std::to_string(io.max_batch_size) + " for '" +
                               std::string(model_name) + "'; input '" + t.name +
                               "' has batch size " + std::to_string(b));
      }
      if (b < 1) {
        return InvalidArgument(what() + " has batch size " + std::to_string(b) +
                               ", the model accepts 1 to " + std::to_string(io.max_batch_size));
      }
      if (batch >= 0 && b != batch) {
        return InvalidArgument("input '" + t.name + "' batch size does not match other inputs for '" +
                               std::string(model_name) + "' (" + std::to_string(b) + " against " +
                               std::to_string(batch) + ")");
      }
      batch = b;
      dims_part = dims_part.subspan(1);
    }
    // With a config reshape, the model's own shape is accepted too: a scalar input (dims [1],
    // reshape []) takes a rank-0 request, as the KServe v2 protocol allows.
    const bool model_shape =
        !DimsMatch(spec->dims, dims_part) && spec->reshape && DimsMatch(*spec->reshape, dims_part);
    if (!DimsMatch(spec->dims, dims_part) && !model_shape) {
      return InvalidArgument("unexpected shape for input '" + t.name + "' for model '" +
                             std::string(model_name) + "'. Expected " +
                             ShapeToString(io.ClientShape(*spec)) + ", got " +
                             ShapeToString(t.shape));
    }
    std::optional<int64_t> count = ElementCount(t.shape);
    if (!count) return InvalidArgument(what() + " has an invalid shape " + ShapeToString(t.shape));
    if (t.dtype == DataType::kBytes) {
      RETURN_IF_ERROR(ValidateBytesTensor(t.bytes(), *count).WithContext(what()));
    } else {
      const uint64_t want = static_cast<uint64_t>(*count) * DataTypeByteSize(t.dtype);
      if (t.size_bytes != want) {
        return InvalidArgument(what() + " carries " + std::to_string(t.size_bytes) +
                               " bytes; shape " + ShapeToString(t.shape) + " of " +
                               std::string(DataTypeName(t.dtype)) + " needs " +
                               std::to_string(want));
      }
    }
    if (spec->reshape && !model_shape) {
      const int64_t per_item =
          io.max_batch_size > 0 ? *count / std::max<int64_t>(batch, 1) : *count;
      ASSIGN_OR_RETURN(std::vector<int64_t> target, ResolveReshape(*spec->reshape, per_item, what()));
      std::vector<int64_t> shape;
      if (io.max_batch_size > 0) shape.push_back(batch);
      shape.insert(shape.end(), target.begin(), target.end());
      t.shape = std::move(shape);
    }
  }
  for (size_t i = 0; i < io.inputs.size(); ++i) {
    if (!seen(i) && !io.inputs[i].optional) {
      // Triton counts inputs (it has no optional ones here); so do these words, when the model
      // has no optional input either.
      const bool any_optional = std::any_of(io.inputs.begin(), io.inputs.end(),
                                            [](const IoSpec& in) { return in.optional; });
      const std::string triton =
          any_optional ? std::string()
                       : "expected " + std::to_string(io.inputs.size()) + " inputs but got " +
                             std::to_string(request->inputs.size()) + " inputs for " + model() +
                             ": ";
      return InvalidArgument(triton + "missing input '" + io.inputs[i].name + "' for " +
                             model() + "; it expects " + Names(io.inputs));
    }
  }

  output_names->clear();
  if (request->outputs.empty()) {
    if (all_outputs == AllOutputs::kListed) {
      for (const auto& o : io.outputs) output_names->push_back(o.name);
    }
    return Status::Ok();
  }
  for (const RequestedOutput& o : request->outputs) {
    if (io.FindOutput(o.name) == nullptr) {
      return InvalidArgument("unknown output '" + o.name + "' requested from " + model() +
                             "; it has " + Names(io.outputs));
    }
    if (std::find(output_names->begin(), output_names->end(), o.name) != output_names->end()) {
      return InvalidArgument("output '" + o.name + "' is requested more than once");
    }
    if (o.classification < 0) {
      return InvalidArgument("output '" + o.name + "': classification must be positive");
    }
    output_names->push_back(o.name);
  }
  return Status::Ok();
}

Status PresentOutputs(const ModelIO& io, std::string_view model_name,
                      std::vector<Tensor>* outputs) {
  for (Tensor& t : *outputs) {
    const IoSpec* spec = io.FindOutput(t.name);
    if (spec == nullptr || !spec->reshape) continue;
    const size_t batch_dims = io.max_batch_size > 0 && !t.shape.empty() ? 1 : 0;
    const std::span<const int64_t> model_part =
        std::span<const int64_t>(t.shape).subspan(batch_dims);
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, ConfigShape(*spec, model_part,
                                                            "output '" + t.name + "' of model '" +
                                                                std::string(model_name) + "'"));
    Shape shape(t.shape.begin(), t.shape.begin() + static_cast<std::ptrdiff_t>(batch_dims));
    shape.insert(shape.end(), dims.begin(), dims.end());
    t.shape = std::move(shape);
  }
  return Status::Ok();
}

}  // namespace harrier
