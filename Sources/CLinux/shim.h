// Linux calls that Swift's Glibc module leaves out; the functions are in libc itself.
// pidfd_open (glibc 2.36): a pidfd becomes readable when its process ends, so a wait for a
// child is one poll() with a deadline, never a loop of waitpid(WNOHANG) and sleeps.
#include <sys/pidfd.h>
// timerfd: a timer that wakes a thread in poll() only if it fires, so arming and disarming
// one around a short piece of work wakes nobody.
#include <sys/timerfd.h>
