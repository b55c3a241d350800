#define _GNU_SOURCE
#include "crash_report.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static _Thread_local const char *current_plugin;
static _Thread_local const char *current_file;
static _Thread_local const char *current_command;
/* The last plugin call any thread entered: for exit(), which may come from a plugin's own thread. */
static const char *volatile last_plugin;
static const char *volatile last_file;
static const char *volatile last_command;

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
static struct sigaction previous[sizeof(fatal_signals) / sizeof(fatal_signals[0])];
static volatile sig_atomic_t reported;

/* Async-signal-safe string building: appends `text` to `buffer` of `size` bytes at *used. */
static void append(char *buffer, size_t size, size_t *used, const char *text) {
    while (text && *text && *used + 1 < size) buffer[(*used)++] = *text++;
    buffer[*used] = 0;
}

static const char *signal_name(int signal) {
    switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "a signal";
    }
}

static const char *last_component(const char *path) {
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path;
}

/* Appends "<before>the last plugin call was 'C' in plugin 'P' (F)<after>", if there was one. */
static void append_last_call(char *line, size_t size, size_t *used, const char *before, const char *after) {
    if (!last_plugin) return;
    append(line, size, used, before);
    append(line, size, used, "the last plugin call was '");
    append(line, size, used, last_command);
    append(line, size, used, "' in plugin '");
    append(line, size, used, last_plugin);
    append(line, size, used, "' (");
    append(line, size, used, last_component(last_file));
    append(line, size, used, ")");
    append(line, size, used, after);
}

static void on_fatal(int signal, siginfo_t *info, void *context) {
    (void)info;
    if (!reported) {
        reported = 1;
        char line[1024];
        size_t used = 0;
        line[0] = 0;
        if (current_plugin) {
            append(line, sizeof line, &used, "cmdbus: error: plugin '");
            append(line, sizeof line, &used, current_plugin);
            append(line, sizeof line, &used, "' (");
            append(line, sizeof line, &used, last_component(current_file));
            append(line, sizeof line, &used, ") crashed the host with ");
            append(line, sizeof line, &used, signal_name(signal));
            append(line, sizeof line, &used, " while running '");
            append(line, sizeof line, &used, current_command);
            append(line, sizeof line, &used, "'");
        } else {
            /* No plugin call on this thread (a plugin's own task or thread): name the library
               the faulting instruction is in, if it is not the host's. */
            Dl_info where;
            const void *pc = NULL;
#if defined(__x86_64__)
            pc = (const void *)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
            pc = (const void *)((ucontext_t *)context)->uc_mcontext.pc;
#endif
            append(line, sizeof line, &used, "cmdbus: error: the host crashed with ");
            append(line, sizeof line, &used, signal_name(signal));
            if (pc && dladdr(pc, &where) && where.dli_fname && strstr(where.dli_fname, ".so")) {
                append(line, sizeof line, &used, " in ");
                append(line, sizeof line, &used, last_component(where.dli_fname));
            }
            append_last_call(line, sizeof line, &used, "; ", "");
        }
        append(line, sizeof line, &used,
               "; a journaled command stays for 'cmdbus journal recover'; run untrusted plugins with --isolate so a crash fails only its command\n");
        (void)!write(STDERR_FILENO, line, used);
    }
    /* Hand over to whoever handled the signal before (Swift's backtracer, or the default). */
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
        if (fatal_signals[i] == signal) sigaction(signal, &previous[i], NULL);
    }
    if (signal != SIGSEGV && signal != SIGBUS && signal != SIGILL && signal != SIGFPE) raise(signal);
    /* A fault re-runs the faulting instruction on return, and now meets the previous handler. */
}

static void on_exit_hook(void) {
    /* The host leaves with _exit(): exit() means a plugin (or a library it loaded) called it. */
    char line[1024];
    size_t used = 0;
    line[0] = 0;
    append(line, sizeof line, &used, "cmdbus: error: a plugin ended the host with exit()");
    append_last_call(line, sizeof line, &used, " (", ")");
    append(line, sizeof line, &used,
           "; a journaled command stays for 'cmdbus journal recover'; run untrusted plugins with --isolate so this ends only their worker\n");
    (void)!write(STDERR_FILENO, line, used);
}

void cmdbus_crash_report_install(void) {
    static int installed;
    if (installed) return;
    installed = 1;
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = on_fatal;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        sigaction(fatal_signals[i], &action, &previous[i]);
    }
    atexit(on_exit_hook);
}

void cmdbus_crash_report_enter(const char *plugin, const char *file, const char *command) {
    current_plugin = plugin;
    current_file = file;
    current_command = command;
    last_plugin = plugin;
    last_file = file;
    last_command = command;
}

void cmdbus_crash_report_leave(void) {
    current_plugin = NULL;
    current_file = NULL;
    current_command = NULL;
}

/* An isolated worker's side (see crash_report.h). In this file rather than one of its own:
   valgrind 3.19 gave up reading the debug information of a binary with a second C file here. */

/* The call this thread is running in the plugin's code, 0 for none. */
static _Thread_local uint64_t current_call;
static volatile int culprit_descriptor = -1;

static void on_worker_fatal(int signal) {
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
        action.sa_handler = on_worker_fatal;
        action.sa_flags = SA_RESETHAND | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        sigaction(fatal_signals[i], &action, NULL);
    }
}

void cmdbus_worker_crash_enter_call(uint64_t id) { current_call = id; }

void cmdbus_worker_crash_leave_call(void) { current_call = 0; }
