/*
 * rusage: runs a command and reports its wall time, peak RSS and CPU time,
 * as /usr/bin/time -v would (which Debian does not install by default).
 *
 *   rusage PROGRAM [ARG...]
 *
 * The command's stdin, stdout and stderr are this process's.  When it has
 * exited, one line goes to stderr:
 *   kwatch-rusage {"status": S, "wall_s": W, "maxrss_kb": R, "user_s": U, "sys_s": Y}
 * from wait4() on that child alone (the kernel's accounting: ru_maxrss is
 * its peak resident set, ru_utime + ru_stime its CPU).
 *
 * Why a C launcher rather than os.wait4 in the Python harness: a child
 * inherits its parent's peak RSS as a floor of its own ru_maxrss (fork copies
 * the address space's high-water mark and exec keeps the larger of the old
 * and new images' marks), so a child of the harness would report at least the
 * harness's own RSS (tens of MB, and more after parsing a large list).  This
 * launcher's is about 1 MB.  Built by test/bench/anchors.py into the bench
 * directory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double
secs(struct timeval tv)
{
	return tv.tv_sec + tv.tv_usec / 1e6;
}

int
main(int argc, char **argv)
{
	struct timespec t0, t1;
	struct rusage ru;
	pid_t		pid;
	int			status;

	if (argc < 2)
	{
		fprintf(stderr, "usage: rusage PROGRAM [ARG...]\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = fork();
	if (pid < 0)
	{
		perror("rusage: fork");
		return 2;
	}
	if (pid == 0)
	{
		execvp(argv[1], argv + 1);
		perror("rusage: exec");
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0)
	{
		perror("rusage: wait4");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "kwatch-rusage {\"status\": %d, \"wall_s\": %.6f, \"maxrss_kb\": %ld, "
			"\"user_s\": %.6f, \"sys_s\": %.6f}\n",
			WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
			(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
			ru.ru_maxrss, secs(ru.ru_utime), secs(ru.ru_stime));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
