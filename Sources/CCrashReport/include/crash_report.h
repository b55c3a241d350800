#ifndef CMDBUS_CRASH_REPORT_H
#define CMDBUS_CRASH_REPORT_H

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

#endif
