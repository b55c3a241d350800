#define _GNU_SOURCE
#include "crash_report.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

/* The call this thread is running in the plugin's code, 0 for none. */
static _Thread_local uint64_t current_call;
static volatile int culprit_descriptor = -1;

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };

static void on_fatal(int signal) {
    (void)signal;
    uint64_t call = current_call;
    if (call != 0 && culprit_descriptor >= 0) (void)!write(culprit_descriptor, &call, sizeof call);
    /* SA_RESETHAND has put the default action back: a fault re-runs its instruction and meets
       it, and abort() raises SIGABRT again, so the process ends by the signal as it would have. */
}

void cmdbus_worker_crash_install(int descriptor) {
    culprit_descriptor = descriptor;
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = on_fatal;
        action.sa_flags = SA_RESETHAND | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        sigaction(fatal_signals[i], &action, NULL);
    }
}

void cmdbus_worker_crash_enter_call(uint64_t id) { current_call = id; }

void cmdbus_worker_crash_leave_call(void) { current_call = 0; }
