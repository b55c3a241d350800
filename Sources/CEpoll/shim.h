// Linux's epoll and eventfd, which Swift's Glibc module leaves out; the functions are in libc itself.
#include <sys/epoll.h>
#include <sys/eventfd.h>
