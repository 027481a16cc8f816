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

// The most entries of a version's tree a fingerprint takes. Depth alone did not bound the walk:
// four links to "." in a version directory made 4^16 listings, and the load (and the stop)
// never ended (probe 29). Each entry costs a poll a stat and an ACL read: 100,000 took about a
// second of CPU at every poll (probe 72); a version holds a few files, ONNX external data at
// most some hundreds.
constexpr int64_t kMaxTreeEntries = 10'000;

void AddEntry(std::string_view name, const DirectoryEntry& e, Digest* digest) {
  digest->Add(name);
  digest->Add(static_cast<uint64_t>(e.type));
  digest->Add(e.size_bytes);
  digest->Add(static_cast<uint64_t>(e.modified_ns));
  digest->Add(e.access);
}

// Adds the entries of the directory `entries` were listed from (relative names from
// `prefix`), sorted, then what each sub-directory holds: a directory's own files count whatever
// its sub-directories hold (probe 71: four links to '.' spent the budget before model.onnx was
// reached, so a new model.onnx went unseen). A sub-directory that cannot be listed is one entry
// (its error), and the walk goes on. Depth-limited (a repository has no reason to nest 16 deep)
// and bounded by `*budget` entries in all: a link cycle must not recurse forever, nor fan out;
// what is past the budget is left out.
void AddEntries(const FileSystem& fs, const std::string& path, std::vector<DirectoryEntry> entries,
                const std::string& prefix, int depth, int64_t* budget, Digest* digest) {
  std::sort(entries.begin(), entries.end(),
            [](const DirectoryEntry& a, const DirectoryEntry& b) { return a.name < b.name; });
  for (const DirectoryEntry& e : entries) {
    if (--*budget < 0) {
      digest->Add(std::string_view("past the entry budget"));
      return;
    }
    AddEntry(prefix + e.name, e, digest);
  }
  for (const DirectoryEntry& e : entries) {
    if (e.type != FileType::kDirectory || depth >= 16 || *budget < 0) continue;
    const std::string sub = path + "/" + e.name;
    StatusOr<std::vector<DirectoryEntry>> listed = fs.ListDirectory(sub);
    if (!listed.ok()) {
      digest->Add(listed.status().message());
      continue;
    }
    AddEntries(fs, sub, std::move(listed).value(), prefix + e.name + "/", depth + 1, budget,
               digest);
  }
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
    // The label files its outputs name (label_filename, in the model's directory) are read at
    // load too: a fixed one is a change (probe 71: a label file made readable was never
    // retried). A config that does not parse fails its load with or without them.
    if (StatusOr<inference::ModelConfig> parsed = ParseModelConfig(config, dir.config_path);
        parsed.ok()) {
      for (const inference::ModelOutput& out : parsed->output()) {
        if (out.label_filename().empty()) continue;
        // Only one the load would read: a name that leaves the model's directory fails the
        // load whatever it names (probe 72: a label_filename of '../../server.log' was
        // watched, and each failure's log line made the next poll retry it).
        StatusOr<std::string> inside = ResolveInside(dir.path, out.label_filename());
        DirectoryEntry label{out.label_filename(), FileType::kRegular, Status::Ok()};
        if (!inside.ok() || !StampEntry(*inside, &label)) {
          digest.Add(std::string_view("no label file"));
          continue;
        }
        AddEntry(label.name, label, &digest);
      }
    }
  } else {
    digest.Add(std::string_view("no config"));
  }
  int64_t budget = kMaxTreeEntries;
  const std::string version_path = dir.path + "/" + std::to_string(version);
  ASSIGN_OR_RETURN(std::vector<DirectoryEntry> entries, fs.ListDirectory(version_path));
  AddEntries(fs, version_path, std::move(entries), "", 0, &budget, &digest);
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
