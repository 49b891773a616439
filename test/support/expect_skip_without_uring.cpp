// Runs a test binary on a machine that has "no io_uring" (a seccomp filter makes io_uring_setup
// fail with ENOSYS, as on kernels built without it) and passes only if the binary reports
// itself skipped (exit status 77), which is what run_task.hpp promises. Without this check the
// skip path would never run here, where io_uring works.
//
// usage: expect_skip_without_uring <test binary> [args...]
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace {

constexpr int skip_exit_status = 77;

#if defined(__x86_64__)
constexpr unsigned this_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned this_arch = AUDIT_ARCH_AARCH64;
#else
#error "expect_skip_without_uring: add this architecture's AUDIT_ARCH_ value"
#endif

bool deny_io_uring_setup() {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, this_arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), // another ABI: leave it alone
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s <test binary> [args...]\n", argv[0]);
        return 2;
    }
    const pid_t child = fork();
    if (child < 0) {
        std::perror("fork");
        return 2;
    }
    if (child == 0) {
        if (!deny_io_uring_setup()) {
            std::perror("seccomp");
            _exit(3);
        }
        execv(argv[1], argv + 1);
        std::perror("execv");
        _exit(4);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) {
        std::perror("waitpid");
        return 2;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == skip_exit_status) return 0;
    if (WIFEXITED(status)) {
        std::fprintf(stderr, "%s without io_uring exited with %d, not %d (skipped)\n", argv[1],
                     WEXITSTATUS(status), skip_exit_status);
    } else {
        std::fprintf(stderr, "%s without io_uring died of signal %d instead of skipping\n", argv[1],
                     WTERMSIG(status));
    }
    return 1;
}
