// RepositoryRelativePaths: rewrites the paths in a message so that they are relative to the
// model repository, for text that goes to clients: "/srv/models/resnet/1/model.onnx: Protobuf
// parsing failed" becomes "resnet/1/model.onnx: Protobuf parsing failed".
//
// Why: load failures are reported to clients (repository index reasons, a model's "not ready"
// error, the status page), and the messages come from everywhere -- the scan, the config
// parser, the backend and ONNX Runtime's own text -- each naming files by the paths the server
// built from the repository root. A client needs to know which file of the model is wrong, not
// where the server keeps its repository on disk. Logs keep the full paths.
//
// What is recognised: the repository path as the server was given it (relative or absolute,
// trailing slashes ignored) and its absolute, normalised form, each when followed by '/' and
// when it starts a path in the message (at the start, or after a space, quote, bracket, '=',
// ':', ',' or ';'), so that a different directory that merely ends the same way is left alone.
// Text without those paths comes back unchanged.
//
// Immutable after construction; Rewrite may be called from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace harrier {

class RepositoryRelativePaths {
 public:
  explicit RepositoryRelativePaths(std::string_view repository_path);

  // `message` with every "<repository>/" that starts a path removed (several slashes count as
  // one).
  std::string Rewrite(std::string_view message) const;

 private:
  std::vector<std::string> roots_;  // without trailing slashes; longest first
};

}  // namespace harrier
