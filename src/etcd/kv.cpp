#include <skiff/etcd/kv.hpp>

namespace skiff::etcd {

std::string prefix_end(std::string_view prefix) {
    // etcd's clientv3.GetPrefixRangeEnd: drop trailing 0xff bytes (they cannot be incremented
    // without carrying), then increment the last byte left.
    std::string end(prefix);
    while (!end.empty()) {
        auto& last = end.back();
        if (static_cast<unsigned char>(last) != 0xff) {
            last = static_cast<char>(static_cast<unsigned char>(last) + 1);
            return end;
        }
        end.pop_back();
    }
    return end;
}

} // namespace skiff::etcd
