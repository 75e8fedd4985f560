// syscalls_of COMMAND [ARGS...]: runs COMMAND and prints "syscalls N" on stderr: the system
// calls it made, with every thread and process it made (counted by the kernel as
// bench/costs.hpp counts ours), then "cpu_us N": its CPU time (user and system), so that
// a tool of rdma-core's (perftest, cmtime) is measured the way our benchmarks measure
// themselves. Exits with COMMAND's status; a TERM or INT it gets goes on to COMMAND (a
// server stopped so), and the counts are printed after.
#include "costs.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>

namespace {
volatile sig_atomic_t child_pid = 0;
extern "C" void pass_on(int sig) {
    if (child_pid > 0) ::kill(static_cast<pid_t>(child_pid), sig);
}
} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: syscalls_of COMMAND [ARGS...]\n");
        return 2;
    }
    const bench::costs::syscall_counter counter; // before the fork: the child inherits it
    if (!counter.error().empty()) {
        std::fprintf(stderr, "syscalls_of: %s\n", counter.error().c_str());
        return 2;
    }
    // A TERM that comes before the child is known waits (blocked), then goes on to it.
    sigset_t passed, before;
    sigemptyset(&passed);
    sigaddset(&passed, SIGTERM);
    sigaddset(&passed, SIGINT);
    ::sigprocmask(SIG_BLOCK, &passed, &before);
    struct sigaction pass {};
    pass.sa_handler = pass_on;
    ::sigaction(SIGTERM, &pass, nullptr);
    ::sigaction(SIGINT, &pass, nullptr);
    const pid_t child = ::fork();
    if (child < 0) return 2;
    if (child == 0) {
        ::signal(SIGTERM, SIG_DFL);
        ::signal(SIGINT, SIG_DFL);
        ::sigprocmask(SIG_SETMASK, &before, nullptr);
        ::execvp(argv[1], argv + 1);
        std::perror(argv[1]);
        ::_exit(127);
    }
    child_pid = child;
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    int status = 0;
    rusage used{};
    pid_t waited;
    while ((waited = ::wait4(child, &status, 0, &used)) < 0 && errno == EINTR) {}
    if (waited != child) return 2;
    // The child's count joined ours when it exited; ours since the fork is a handful
    // (fork, wait4, this read), left in: a constant per run, gone from differences of runs.
    std::fprintf(stderr, "syscalls %llu\n", static_cast<unsigned long long>(counter.read()));
    // Its CPU time, every thread's, user and system: a time (it moves with the host's load).
    auto us = [](const timeval& t) { return static_cast<long long>(t.tv_sec) * 1000000 + t.tv_usec; };
    std::fprintf(stderr, "cpu_us %lld\n", us(used.ru_utime) + us(used.ru_stime));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
