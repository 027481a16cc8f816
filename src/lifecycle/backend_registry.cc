#include "lifecycle/backend_registry.h"

#include <algorithm>

#include "repository/model_config.pb.h"

namespace harrier {
namespace {

bool IsRegularFile(const FileSystem& files, const std::string& path) {
  auto type = files.GetFileType(path);
  return type.ok() && *type == FileType::kRegular;
}

}  // namespace

std::vector<BackendRegistry::KnownGenerator> BackendRegistry::KnownGenerators() {
  return {{"llama.cpp", "model.gguf"}};
}

std::string BackendRegistry::Names() const {
  std::string names;
  auto add = [&names](std::string_view name) {
    names += (names.empty() ? "'" : ", '") + std::string(name) + "'";
  };
  for (const Backend* t : tensor_) add(t->name());
  for (const GenerativeBackend* g : generative_) add(g->name());
  return names;
}

void BackendRegistry::AddTensorBackend(Backend* backend) {
  tensor_.push_back(backend);
}

void BackendRegistry::AddGenerativeBackend(GenerativeBackend* backend) {
  generative_.push_back(backend);
}

BackendRegistry::Choice BackendRegistry::Choose(const inference::ModelConfig& config,
                                                const std::string& version_dir,
                                                const FileSystem& files) const {
  Choice choice;
  const std::string& backend = config.backend();
  const std::string& platform = config.platform();
  auto registered = [&](std::string_view name) {
    return std::any_of(generative_.begin(), generative_.end(),
                       [&](const GenerativeBackend* g) { return g->name() == name; });
  };
  auto generator = [&](GenerativeBackend* g) {
    choice.generative = true;
    choice.generator = g;
    return choice;
  };
  auto missing = [&](std::string_view name) {
    choice.generative = true;
    choice.missing = name;
    return choice;
  };
  for (GenerativeBackend* g : generative_)
    if (backend == g->name() || platform == g->platform()) return generator(g);
  for (const KnownGenerator& known : KnownGenerators())
    if (backend == known.name && !registered(known.name)) return missing(known.name);
  if (!backend.empty() || !platform.empty()) {
    choice.tensor = default_tensor_backend();
    bool named = backend.empty();
    bool matched = false;
    for (Backend* t : tensor_) {
      named = named || backend == t->name();
      if (backend == t->name() || platform == t->platform()) {
        choice.tensor = t;
        matched = true;
        break;
      }
    }
    if (!named) choice.unknown = backend;
    if (backend.empty() && !matched) choice.unknown_platform = platform;
    return choice;
  }
  const bool tensor_file = std::any_of(tensor_.begin(), tensor_.end(), [&](const Backend* t) {
    return IsRegularFile(files, version_dir + std::string(t->default_model_filename()));
  });
  if (!tensor_file) {
    for (GenerativeBackend* g : generative_) {
      const std::string file = config.default_model_filename().empty()
                                   ? std::string(g->default_model_filename())
                                   : config.default_model_filename();
      if (IsRegularFile(files, version_dir + file)) return generator(g);
    }
    for (const KnownGenerator& known : KnownGenerators()) {
      if (!registered(known.name) &&
          IsRegularFile(files, version_dir + std::string(known.default_model_filename)))
        return missing(known.name);
    }
  }
  choice.tensor = default_tensor_backend();
  for (Backend* t : tensor_) {
    if (IsRegularFile(files, version_dir + std::string(t->default_model_filename()))) {
      choice.tensor = t;
      break;
    }
  }
  return choice;
}

}  // namespace harrier
