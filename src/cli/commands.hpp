// Sub-commands of the `skiff` binary. Each returns the process exit status.
#pragma once

#include <string>
#include <vector>

namespace skiff::cli {

int s3_command(const std::vector<std::string>& args);
int fsck_command(const std::vector<std::string>& args);
int serve_command(const std::vector<std::string>& args);

} // namespace skiff::cli
