#pragma once
// Deterministic costs of a benchmark's phases, printed beside its times (TCG moves times
// ±40 % run to run; these repeat): system calls per operation, counted by the kernel for
// every thread of the process (the raw_syscalls:sys_enter tracepoint through
// perf_event_open, inherited by threads made after `costs::start()`), and user-space
// instructions per operation of every thread when the benchmark runs under callgrind
// (bench/costs.sh): what every thread did before a stretch of a phase is dumped (as
// "between phases") when it begins, and what they did in it under the phase's name when it
// ends; the script adds the dumps up by name. Not callgrind's collection toggle, nor its
// zeroing: both act on the calling thread only, so a phase whose work runs on other
// threads (a server's, a pool's shards) counted only the thread that toggled, and a
// destroyer thread's work before it spilled into the next phase.
#include <valgrind/callgrind.h>

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace bench {

class costs {
public:
    // Before any thread is made: the counter is inherited by the threads made afterwards.
    static void start() { counter(); }

    // A phase: stretches of measured work, and how many operations they did.
    class phase {
    public:
        explicit phase(std::string name) : name_(std::move(name)) {}
        // (The CPU clock is read outside the counted stretch: its call is not counted.)
        void begin() {
            cpu_at_ = cpu_us();
            syscalls_at_ = counter().read();
            CALLGRIND_DUMP_STATS_AT("between phases");
        }
        void end(std::uint64_t ops) {
            CALLGRIND_DUMP_STATS_AT(name_.c_str());
            syscalls_ += counter().read() - syscalls_at_ - 1; // (that read itself)
            cpu_ += cpu_us() - cpu_at_;
            ops_ += ops;
        }
        // "costs NAME: N ops, S syscalls/op, C cpu_us/op" (what bench/costs.sh reads, with
        // the dumps). The CPU time is a time: it moves with the host's load, as the others
        // do not.
        void print() const {
            const double ops = ops_ ? static_cast<double>(ops_) : 1.0;
            if (counter().error().empty())
                std::printf("costs %s: %llu ops, %.2f syscalls/op, %.2f cpu_us/op\n", name_.c_str(),
                            static_cast<unsigned long long>(ops_), static_cast<double>(syscalls_) / ops, cpu_ / ops);
            else
                std::printf("costs %s: %llu ops, syscalls not counted (%s)\n", name_.c_str(),
                            static_cast<unsigned long long>(ops_), counter().error().c_str());
        }

    private:
        std::string name_;
        std::uint64_t syscalls_at_ = 0, syscalls_ = 0, ops_ = 0;
        double cpu_at_ = 0, cpu_ = 0;
    };

    // The CPU time of every thread of this process so far (user and system), in µs.
    static double cpu_us() {
        rusage u{};
        ::getrusage(RUSAGE_SELF, &u);
        auto us = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec); };
        return us(u.ru_utime) + us(u.ru_stime);
    }

    // Every system call of this process from now on, of the threads and processes it makes
    // afterwards included (inherited: an exited child's count is added to the parent's).
    class syscall_counter {
    public:
        syscall_counter() {
            std::uint64_t id = 0;
            for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"})
                if (std::ifstream f(std::string(dir) + "/events/raw_syscalls/sys_enter/id"); f >> id) break;
            if (id == 0) {
                error_ = "no raw_syscalls:sys_enter tracepoint: is tracefs mounted?";
                return;
            }
            perf_event_attr attr{};
            attr.size = sizeof attr;
            attr.type = PERF_TYPE_TRACEPOINT;
            attr.config = id;
            attr.inherit = 1; // the threads made later count too (read() adds theirs)
            fd_ = static_cast<int>(::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
            if (fd_ < 0) error_ = std::string("perf_event_open: ") + std::strerror(errno);
        }
        ~syscall_counter() {
            if (fd_ >= 0) ::close(fd_);
        }
        std::uint64_t read() const {
            std::uint64_t n = 0;
            if (fd_ >= 0 && ::read(fd_, &n, sizeof n) != static_cast<ssize_t>(sizeof n)) n = 0;
            return n;
        }
        const std::string& error() const { return error_; }

    private:
        int fd_ = -1;
        std::string error_;
    };

private:
    static syscall_counter& counter() {
        static syscall_counter c;
        return c;
    }
};

} // namespace bench
