/* A plugin whose entry point dereferences NULL: SIGSEGV while loading. Built with
 * -DCRASH_WHILE_FILE_EXISTS='"PATH"', it crashes only while PATH exists, and otherwise is a plugin
 * whose one command, "steady.echo", answers with its payload: a file the probe quarantined that
 * loads once what broke it is gone. */
#include <string.h>
#include <unistd.h>
#include "cmdbus.h"
#ifdef CRASH_WHILE_FILE_EXISTS
static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
static void handle(void *s, uint32_t i, cmdbus_bytes payload, cmdbus_call *call) {
    (void)s; (void)i;
    host->complete(call, CMDBUS_OK, payload);
}
static const cmdbus_command_descriptor commands[] = { { "steady.echo", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "steady", .version = "1", .priority = 0,
    .command_count = 1, .commands = commands, .init = start, .handle = handle,
};
#endif
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) {
#ifdef CRASH_WHILE_FILE_EXISTS
    if (access(CRASH_WHILE_FILE_EXISTS, F_OK) != 0) return &descriptor;
#endif
    volatile int *nothing = 0;
    *nothing = 1;
    return 0;
}
