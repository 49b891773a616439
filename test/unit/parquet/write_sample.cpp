// Writes the sample table (sample.hpp) for test/clients/test_parquet.py:
//   parquet_write_sample <dir>
// makes <dir>/zstd.parquet (ZSTD pages, dictionaries where they pay, small pages),
// <dir>/plain.parquet (uncompressed, PLAIN only) and <dir>/expected.json (the rows, computed
// from the formula rather than read back, and the schema's field ids in depth-first order).
#include "sample.hpp"

#include <cstdio>
#include <string>

namespace {

bool save(const std::string& path, const std::string& bytes) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    return std::fclose(f) == 0 && ok;
}

void schema_json(const skiff::parquet::node& n, std::string& out) {
    out += (out.back() == '[' ? "" : ",");
    out += "[\"" + n.name + "\"," + (n.field_id ? std::to_string(*n.field_id) : "null") + "]";
    for (const auto& c : n.children) schema_json(c, out);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: parquet_write_sample <dir>\n");
        return 2;
    }
    const std::string dir = argv[1];
    std::int64_t rows = 0;
    for (auto n : sample::group_sizes()) rows += n;

    skiff::parquet::writer_options z;
    z.compression = skiff::parquet::codec::zstd;
    z.page_size = 256; // many pages per chunk, dictionary indices and list levels included
    z.key_value_metadata = {{"skiff.sample", "zstd"}, {"iceberg.schema", "{}"}};
    skiff::parquet::writer_options p;
    p.compression = skiff::parquet::codec::uncompressed;
    p.dictionary = false;
    p.page_size = 64 << 10;
    p.key_value_metadata = {{"skiff.sample", "plain"}};

    std::string schema = "[";
    schema_json([] {
        skiff::parquet::node root;
        root.name = "kafka_record";
        root.is_group = true;
        root.children = sample::make_schema().fields();
        return root;
    }(), schema);
    schema += "]";

    const std::string expected = "{\"schema\":" + schema + ",\n\"rows\":" + sample::rows_json(rows) + "}\n";
    if (!save(dir + "/zstd.parquet", sample::write(z).bytes) || !save(dir + "/plain.parquet", sample::write(p).bytes) ||
        !save(dir + "/expected.json", expected)) {
        std::fprintf(stderr, "parquet_write_sample: cannot write into %s\n", dir.c_str());
        return 1;
    }
    return 0;
}
