// Linux's process descriptors (pidfd_open, glibc 2.36), which Swift's Glibc module leaves out;
// the function is in libc itself. A pidfd becomes readable when its process ends, so a wait
// for a child is one poll() with a deadline, never a loop of waitpid(WNOHANG) and sleeps.
#include <sys/pidfd.h>
