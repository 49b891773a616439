// Sub-commands of the `skiff` binary. Each returns the process exit status.
#pragma once

#include <string>
#include <vector>

namespace skiff::cli {

int s3_command(const std::vector<std::string>& args);
int fsck_command(const std::vector<std::string>& args);
int serve_command(const std::vector<std::string>& args);
int topic_command(const std::vector<std::string>& args);   // topic_cmd.cpp
int cluster_command(const std::vector<std::string>& args); // cluster_cmd.cpp
int user_command(const std::vector<std::string>& args);    // user_cmd.cpp
int acl_command(const std::vector<std::string>& args);     // acl_cmd.cpp
int group_command(const std::vector<std::string>& args);   // group_cmd.cpp
int produce_command(const std::vector<std::string>& args); // produce_cmd.cpp
int consume_command(const std::vector<std::string>& args); // consume_cmd.cpp
int cat_command(const std::vector<std::string>& args);     // cat_cmd.cpp
int sql_command(const std::vector<std::string>& args);     // sql_cmd.cpp
int iceberg_command(const std::vector<std::string>& args); // iceberg_cmd.cpp

} // namespace skiff::cli
