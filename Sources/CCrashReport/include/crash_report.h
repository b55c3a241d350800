#ifndef CMDBUS_CRASH_REPORT_H
#define CMDBUS_CRASH_REPORT_H
#include <stdint.h>

/*
 * The host's last words when a plugin loaded into its process takes it down: one line on
 * stderr naming the plugin, its file, the command and the signal (or exit()), and what to
 * do next. Host-only: plugins never link it.
 */

/** Installs the handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT (chaining to the
    ones installed before, such as Swift's backtracer) and an atexit() hook; once per process. */
void cmdbus_crash_report_install(void);

/** Marks this thread as inside `plugin`'s code (from `file`) for `command`, until leave().
    The strings must stay valid until then. */
void cmdbus_crash_report_enter(const char *plugin, const char *file, const char *command);

/** Marks this thread as back in the host. */
void cmdbus_crash_report_leave(void);

/*
 * An isolated worker's last word when a plugin's code crashes it: the id of the call the
 * crashing thread was running, so the host fails that call for the crash and the others the
 * worker was running as ones that may run again. Worker-only: plugins never link it.
 */

/** Installs handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT that write the crashing
    thread's call id (8 bytes, native order; nothing if it runs none) to `descriptor`, then
    let the signal end the process as it would have. */
void cmdbus_worker_crash_install(int descriptor);

/** Marks this thread as running call `id` (not 0) in the plugin's code, until leave(). */
void cmdbus_worker_crash_enter_call(uint64_t id);

/** Marks this thread as running no call. */
void cmdbus_worker_crash_leave_call(void);

#endif
