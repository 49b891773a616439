// Writes the /traces/view page for the fixed two-flush scenario to a file (argv[1]), so a
// headless browser can render it from file:// with no server and no network.
#include "trace_fixture.hpp"

#include <skiff/metrics/exposition.hpp>

#include <cstdio>
#include <fstream>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT.html\n", argv[0]);
        return 2;
    }
    skiff::metrics::trace_query q;
    q.root = "flush";
    q.limit = 30;
    q.linked = true;
    const std::string html = skiff::metrics::traces_view_html(skiff::metrics::traces_json(skiff::test::flush_scenario(), q));
    std::ofstream out(argv[1], std::ios::binary);
    out << html;
    if (!out) {
        std::fprintf(stderr, "cannot write %s\n", argv[1]);
        return 1;
    }
    return 0;
}
