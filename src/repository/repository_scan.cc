#include "repository/repository_scan.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <mutex>
#include <set>

#include "core/utf8.h"

namespace harrier {
namespace {

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

ModelDirectory ScanModel(const std::string& root, const std::string& name, const FileSystem& fs) {
  ModelDirectory model;
  model.name = name;
  model.path = JoinPath(root, name);

  StatusOr<std::vector<DirectoryEntry>> entries = fs.ListDirectory(model.path);
  if (!entries.ok()) {
    model.error = entries.status();
    return model;
  }
  for (const DirectoryEntry& entry : *entries) {
    if (entry.name == "config.pbtxt") {
      if (entry.type == FileType::kRegular) {
        model.config_path = JoinPath(model.path, entry.name);
      } else {
        // There, but not a file to read: the model fails saying so. It loaded with a completed
        // config instead, without a word, dropping what the config said (probe 29).
        model.error =
            !entry.error.ok() ? entry.error.WithContext("config.pbtxt")
            : entry.type == FileType::kNotFound
                ? InvalidArgument("config.pbtxt is a symbolic link to nothing")
            : entry.type == FileType::kDirectory
                ? InvalidArgument("config.pbtxt is a directory, not a file")
                : InvalidArgument("config.pbtxt is not a regular file (a FIFO, socket or device)");
      }
      continue;
    }
    if (entry.type != FileType::kDirectory) continue;
    int64_t version = ParseVersionDirectoryName(entry.name);
    if (version > 0) model.versions.push_back(version);
  }
  std::sort(model.versions.begin(), model.versions.end());
  model.versions.erase(std::unique(model.versions.begin(), model.versions.end()),
                       model.versions.end());
  return model;
}

}  // namespace

int64_t ParseVersionDirectoryName(std::string_view name) {
  if (name.empty() || name.front() == '0') return -1;  // Triton ignores "0" and leading zeros
  if (!std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  int64_t version = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), version);
  if (ec != std::errc() || end != name.data() + name.size()) return -1;  // out of range
  return version;
}

StatusOr<std::vector<ModelDirectory>> ScanRepository(const std::string& root,
                                                     const FileSystem& fs) {
  StatusOr<std::vector<DirectoryEntry>> entries = fs.ListDirectory(root);
  if (!entries.ok()) return entries.status().WithContext("model repository");

  std::vector<ModelDirectory> models;
  for (const DirectoryEntry& entry : *entries) {
    if (entry.name.empty() || entry.name.front() == '.') continue;
    const bool control = std::any_of(entry.name.begin(), entry.name.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (control || !IsValidUtf8(entry.name)) {
      // A model's name goes into JSON (the index, stats, errors) and the metrics' labels, which
      // must be UTF-8: one such directory made the whole index and every scrape unreadable
      // (probe 29). A control character (a newline) split the server log's lines (probe 32),
      // and the load API refuses such names already. Skipped, and said once per name.
      static std::mutex mu;
      static std::set<std::string> said;
      std::lock_guard lock(mu);
      if (said.insert(entry.name).second) {
        std::string shown;
        for (char c : entry.name) {
          const auto u = static_cast<unsigned char>(c);
          shown.push_back(u < 0x20 || u >= 0x7f ? '?' : c);
        }
        spdlog::warn(
            "model repository: '{}' (bytes that are not printable ASCII shown as '?') is "
            "skipped: a model's name must be UTF-8 without control characters",
            shown);
      }
      continue;
    }
    if (!entry.error.ok()) {  // it may be meant as a model: say why it cannot be one
      ModelDirectory model;
      model.name = entry.name;
      model.path = JoinPath(root, entry.name);
      model.error = entry.error;
      models.push_back(std::move(model));
      continue;
    }
    if (entry.type != FileType::kDirectory) continue;
    models.push_back(ScanModel(root, entry.name, fs));
  }
  std::sort(models.begin(), models.end(),
            [](const ModelDirectory& a, const ModelDirectory& b) { return a.name < b.name; });
  return models;
}

}  // namespace harrier
