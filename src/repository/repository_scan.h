// Scanning a Triton-style model repository on disk:
//
//   <root>/<model>/config.pbtxt          optional
//   <root>/<model>/<version>/model.onnx  one directory per version, named by a number >= 1
//
// Rules (Triton's): every directory under the root is a model, except hidden ones (name
// starting with '.'); files directly under the root are ignored. Inside a model, a directory
// whose name is a positive decimal number without a leading zero is a version; anything else
// (non-numeric names, "0", "007", numbers beyond int64, plain files) is ignored. Symlinks are
// followed; a dangling one is ignored like a file. An entry under the root whose type cannot be
// found out -- a symbolic link loop, a target that cannot be inspected -- is a model whose
// directory cannot be read (ModelDirectory::error), so that it is reported rather than
// silently left out. The scan does not open model files or parse configs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harrier/status.h"
#include "repository/file_system.h"

namespace harrier {

// One model directory as found on disk.
struct ModelDirectory {
  std::string name;  // the directory name: the model's name
  std::string path;  // <root>/<name>
  // <path>/config.pbtxt when that is a regular file; empty when the model has no config file.
  std::string config_path;
  // Version numbers found, ascending, without duplicates. <path>/<version> is the directory.
  std::vector<int64_t> versions;
  // Not OK when the model directory could not be inspected (a symbolic link loop) or listed
  // (versions is then empty); the model should be reported UNAVAILABLE with this reason while
  // the other models still load.
  Status error;
};

// Scans `root`. Models come back sorted by name. Errors (the only ones that stop a server from
// starting): kNotFound when `root` does not exist, kInvalidArgument when it is not a
// directory, kInternal when it cannot be listed. A failure inside one model directory is
// recorded in that ModelDirectory's `error` instead.
StatusOr<std::vector<ModelDirectory>> ScanRepository(const std::string& root,
                                                     const FileSystem& fs = LocalFileSystem());

// The version number a directory name stands for, or -1 when the name is not a version
// (see the rules above).
int64_t ParseVersionDirectoryName(std::string_view name);

}  // namespace harrier
