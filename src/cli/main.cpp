// skiff: a Kafka-protocol broker whose log lives in S3. This binary hosts the operator
// commands; each sub-command lives in its own file.
#include "commands.hpp"

#include <skiff/core/allocator.hpp>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace {
void usage(std::FILE* out) {
    std::fputs("usage: skiff <command> [args]\n"
               "\n"
               "commands:\n"
               "  serve                   run the Kafka broker (see `skiff serve --help`)\n"
               "  s3 ls|get|put|rm|stat   talk to S3 with skiff's own client (see `skiff s3 --help`)\n"
               "  fsck TARGET [--repair]  check a namespace's segments and indexes (see `skiff fsck --help`)\n"
               "  topic create|list|describe|delete|add-partitions|alter-config\n"
               "                          manage topics on any Kafka-compatible broker (see `skiff topic --help`)\n"
               "  cluster info            cluster id, controller, brokers and topic count\n"
               "  user add|rm|list        SASL/SCRAM users (passwords stored salted and hashed)\n"
               "  acl add|rm|list         ACLs (with skiff serve --authorizer acl)\n"
               "  group list|describe|delete|reset-offsets\n"
               "                          consumer groups: members, lag, offset resets (see `skiff group --help`)\n"
               "  produce -t TOPIC        write records from stdin, one per line (see `skiff produce --help`)\n"
               "  consume -t TOPIC        print a topic's records, or JSON lines (see `skiff consume --help`)\n"
               "  cat TARGET/TOPIC        print a topic's records straight from the bucket, no broker (see `skiff cat --help`)\n"
               "  sql --listen ADDR       SQL over the bucket's topics on the Postgres wire protocol (see `skiff sql --help`)\n"
               "  iceberg TARGET --topic T  append topics to Iceberg tables in the same store (see `skiff iceberg --help`)\n"
               "  version                 print the version\n",
               out);
}
} // namespace

int main(int argc, char** argv) {
    skiff::tune_allocator();
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) {
        usage(stderr);
        return 2;
    }
    std::string_view cmd = args[0];
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (cmd == "serve") return skiff::cli::serve_command(rest);
    if (cmd == "s3") return skiff::cli::s3_command(rest);
    if (cmd == "fsck") return skiff::cli::fsck_command(rest);
    if (cmd == "topic") return skiff::cli::topic_command(rest);
    if (cmd == "cluster") return skiff::cli::cluster_command(rest);
    if (cmd == "user") return skiff::cli::user_command(rest);
    if (cmd == "acl") return skiff::cli::acl_command(rest);
    if (cmd == "group") return skiff::cli::group_command(rest);
    if (cmd == "produce") return skiff::cli::produce_command(rest);
    if (cmd == "consume") return skiff::cli::consume_command(rest);
    if (cmd == "cat") return skiff::cli::cat_command(rest);
    if (cmd == "sql") return skiff::cli::sql_command(rest);
    if (cmd == "iceberg") return skiff::cli::iceberg_command(rest);
    if (cmd == "version" || cmd == "--version") {
        std::puts("skiff 0.1.0");
        return 0;
    }
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
        usage(stdout);
        return 0;
    }
    std::fprintf(stderr, "skiff: unknown command '%s'\n", args[0].c_str());
    usage(stderr);
    return 2;
}
