// Linux calls that Swift's Glibc module leaves out; the functions are in libc itself.
// pidfd_open (glibc 2.36): a pidfd becomes readable when its process ends, so a wait for a
// child is one poll() with a deadline, never a loop of waitpid(WNOHANG) and sleeps.
#include <sys/pidfd.h>
// timerfd: a timer that wakes a thread in poll() only if it fires, so arming and disarming
// one around a short piece of work wakes nobody.
#include <sys/timerfd.h>
// posix_spawn_file_actions_addchdir_np (glibc 2.29): a spawned child starts in a directory of
// the parent's choosing without the parent changing its own. Glibc's header hides it unless
// _GNU_SOURCE is set before its first inclusion, which a Swift module cannot arrange.
#include <spawn.h>
int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *actions, const char *path);
// pipe2 (glibc 2.9), hidden for the same reason: a pipe created close-on-exec, with no moment in
// which a child that another thread spawns could inherit it.
int pipe2(int pipefd[2], int flags);
// copy_file_range (glibc 2.27), hidden for the same reason: a file copied inside the kernel,
// shared rather than copied where the file system can (btrfs, XFS).
ssize_t copy_file_range(int infd, __off64_t *pinoff, int outfd, __off64_t *poutoff, size_t length, unsigned int flags);
// malloc_trim: hands the memory free at the top of the heap and in whole free pages inside
// it back to the system; an idle server calls it after a burst of work (IdleMemoryTrim).
#include <malloc.h>
// pthread_setname_np (glibc 2.12), hidden for the same reason: a thread's name as `top -H`,
// `ps -L`, `perf` and a debugger show it (at most 15 bytes).
#include <pthread.h>
int pthread_setname_np(pthread_t thread, const char *name);
