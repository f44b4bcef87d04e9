/* t_peak_rss.c -- the peak resident memory of a command
 * (tests/integration/test_reader_mem.py).
 *
 * `t_peak_rss CMD ARGS...` runs CMD, its output to /dev/null, and prints
 * "rc STATUS maxrss_kb KB". The command is forked from this small process:
 * Linux carries a process's peak across exec, so a command started straight
 * from a big parent (Python) would report the parent's peak instead. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: t_peak_rss CMD [ARGS...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid) return 2;
    printf("rc %d maxrss_kb %ld\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ru.ru_maxrss);
    return 0;
}
