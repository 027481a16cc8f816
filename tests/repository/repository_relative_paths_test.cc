#include "repository/repository_relative_paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace harrier {
namespace {

TEST(RepositoryRelativePathsTest, Table) {
  const struct {
    const char* root;
    const char* message;
    const char* client;
  } cases[] = {
      {"/srv/models", "/srv/models/resnet/1/model.onnx: Protobuf parsing failed.",
       "resnet/1/model.onnx: Protobuf parsing failed."},
      {"/srv/models/",
       "reading model '/srv/models/resnet/1/model.onnx': Load model from "
       "/srv/models/resnet/1/model.onnx failed",
       "reading model 'resnet/1/model.onnx': Load model from resnet/1/model.onnx failed"},
      {"/srv/models", "no version directories in /srv/models/bert",
       "no version directories in bert"},
      {"/srv/models", "cannot inspect '/srv/models/loop': Too many levels of symbolic links",
       "cannot inspect 'loop': Too many levels of symbolic links"},
      {"/srv/models", "x (/srv/models/a) [/srv/models/b] path=/srv/models/c,/srv/models/d",
       "x (a) [b] path=c,d"},
      {"/srv/models", "/srv/models//doubled/1", "doubled/1"},
      // Not this repository: another directory that ends the same way, or a longer name.
      {"models", "/data/models/a/1/model.onnx", "/data/models/a/1/model.onnx"},
      {"/srv/models", "/srv/models2/a", "/srv/models2/a"},
      {"/srv/models", "/srv/modelsx and /srv/models", "/srv/modelsx and /srv/models"},
      {"/srv/models", "no path at all", "no path at all"},
      {"/srv/models", "", ""},
      // Relative roots as given on the command line.
      {"models", "models/a/1/model.onnx: bad", "a/1/model.onnx: bad"},
      {"./models", "in './models/a'", "in 'a'"},
      {"/", "cannot inspect '/loop'", "cannot inspect 'loop'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.root) + " | " + c.message);
    EXPECT_EQ(RepositoryRelativePaths(c.root).Rewrite(c.message), c.client);
  }
}

TEST(RepositoryRelativePathsTest, TheAbsoluteFormOfARelativeRootIsRecognisedToo) {
  const std::string absolute = (std::filesystem::current_path() / "models").string();
  RepositoryRelativePaths paths("./models/");
  EXPECT_EQ(paths.Rewrite("Load model from " + absolute + "/a/1/model.onnx failed"),
            "Load model from a/1/model.onnx failed");
  EXPECT_EQ(paths.Rewrite("./models/a and " + absolute + "/b"), "a and b");
}

}  // namespace
}  // namespace harrier
