#include "repository/model_fingerprint.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "repository/model_config_parser.h"

namespace harrier {
namespace {

// FNV-1a, 64 bits: stable across runs and releases (fingerprints are only compared within one
// process, but a fixed function keeps the tests' expectations meaningful).
class Digest {
 public:
  void Add(std::string_view bytes) {
    for (char c : bytes) {
      hash_ ^= static_cast<uint8_t>(c);
      hash_ *= 1099511628211ull;
    }
    Add(uint64_t{bytes.size()});  // so that "ab"+"c" differs from "a"+"bc"
  }
  void Add(uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      hash_ ^= (value >> (8 * i)) & 0xff;
      hash_ *= 1099511628211ull;
    }
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 14695981039346656037ull;
};

// The most entries a version's tree may hold. Depth alone did not bound the walk: four links
// to "." in a version directory made 4^16 listings, and the load (and the stop) never ended
// (probe 29).
constexpr int64_t kMaxTreeEntries = 100'000;

// Adds every entry under `path` (relative names from `prefix`), sorted, recursing into
// directories. Depth-limited (a repository has no reason to nest 16 deep) and bounded by
// `*budget` entries in all: a link cycle must not recurse forever, nor fan out.
Status AddTree(const FileSystem& fs, const std::string& path, const std::string& prefix, int depth,
               int64_t* budget, Digest* digest) {
  ASSIGN_OR_RETURN(std::vector<DirectoryEntry> entries, fs.ListDirectory(path));
  std::sort(entries.begin(), entries.end(),
            [](const DirectoryEntry& a, const DirectoryEntry& b) { return a.name < b.name; });
  for (const DirectoryEntry& e : entries) {
    if (--*budget < 0) {
      return InvalidArgument("the version's directory holds more than " +
                             std::to_string(kMaxTreeEntries) +
                             " entries (counting through links: a link to '.' or a parent?)");
    }
    const std::string name = prefix + e.name;
    digest->Add(name);
    digest->Add(static_cast<uint64_t>(e.type));
    digest->Add(e.size_bytes);
    digest->Add(static_cast<uint64_t>(e.modified_ns));
    digest->Add((uint64_t{e.mode} << 32) ^ e.owner);
    digest->Add(uint64_t{e.group});
    if (e.type == FileType::kDirectory && depth < 16)
      RETURN_IF_ERROR(AddTree(fs, path + "/" + e.name, name + "/", depth + 1, budget, digest));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<uint64_t> ModelFingerprint(const FileSystem& fs, const ModelDirectory& dir,
                                    int64_t version) {
  Digest digest;
  // The version's number too: two versions holding files of the same names and sizes, written
  // within one tick of the file system's clock, are not the same version.
  digest.Add(static_cast<uint64_t>(version));
  if (const std::optional<uint64_t> size =
          dir.config_path.empty() ? std::nullopt : OversizedConfigFile(dir.config_path)) {
    // Not read (its load fails on its size): its size and time say when it changes.
    std::error_code ec;
    const auto modified = std::filesystem::last_write_time(dir.config_path, ec);
    digest.Add(*size);
    digest.Add(static_cast<uint64_t>(ec ? 0 : modified.time_since_epoch().count()));
  } else if (!dir.config_path.empty()) {
    ASSIGN_OR_RETURN(std::string config, fs.ReadFile(dir.config_path));
    digest.Add(config);
  } else {
    digest.Add(std::string_view("no config"));
  }
  int64_t budget = kMaxTreeEntries;
  RETURN_IF_ERROR(AddTree(fs, dir.path + "/" + std::to_string(version), "", 0, &budget, &digest));
  return digest.value();
}

uint64_t UnreadableFingerprint(const Status& error) {
  Digest digest;
  digest.Add(std::string_view("unreadable"));
  digest.Add(static_cast<uint64_t>(error.code()));
  digest.Add(error.message());
  return digest.value() | 1;  // never 0, "no fingerprint"
}

}  // namespace harrier
