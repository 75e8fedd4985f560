#pragma once
// This process's open file descriptors, as what each refers to (sorted, numbers left
// out): a leaked channel or id shows up as one more, and the check says which.
#include <algorithm>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

namespace rdmacm::test {

inline std::vector<std::string> open_fds() {
    std::vector<std::string> targets;
    for (auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        auto target = std::filesystem::read_symlink(e.path(), ec);
        if (!ec) targets.push_back(target.string());
    }
    std::sort(targets.begin(), targets.end());
    return targets;
}

// What is open now that was not in `before` ("" when nothing): an fd closed meanwhile by
// something older than the test is not a leak of the test's.
inline std::string fds_opened_since(const std::vector<std::string>& before) {
    std::vector<std::string> now = open_fds(), opened;
    std::set_difference(now.begin(), now.end(), before.begin(), before.end(), std::back_inserter(opened));
    std::string all;
    for (auto& t : opened) all += (all.empty() ? "" : ", ") + t;
    return all;
}

} // namespace rdmacm::test
