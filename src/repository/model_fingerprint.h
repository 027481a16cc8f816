// ModelFingerprint: a digest of what one model version is loaded from — its config.pbtxt's
// content and every file under its version directory (relative path, size, modification
// time, who may read it), and the label files its config names — so that a repository poll can tell
// which versions changed and reload only those.
//
// A file rewritten in place with the same size within the file system's timestamp resolution
// goes unnoticed; every other change (a new model file, a config edit, a file added, removed or
// replaced) changes the fingerprint.
#pragma once

#include <cstdint>
#include <string>

#include "harrier/status.h"
#include "repository/file_system.h"
#include "repository/repository_scan.h"

namespace harrier {

// The fingerprint of version `version` of `dir`. Errors: those of `fs` for the version
// directory (or config.pbtxt, when the model has one) that cannot be read. A sub-directory that
// cannot be read counts as its error; a tree past 10,000 entries is taken as far as that.
StatusOr<uint64_t> ModelFingerprint(const FileSystem& fs, const ModelDirectory& dir,
                                    int64_t version);

// The fingerprint of a version whose files could not be walked (ModelFingerprint's error):
// the same while the error is, and never 0. A poll then retries the version when the error
// changes, or when it ends, not at every poll (probe 68: a version directory made unreadable
// was reloaded, and logged, every second).
uint64_t UnreadableFingerprint(const Status& error);

}  // namespace harrier
