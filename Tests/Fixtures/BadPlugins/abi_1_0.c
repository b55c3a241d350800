/* A plugin built against ABI 1.0: its descriptor ends before the 1.1 fields. It must still load. */
#include <stddef.h>
#include "cmdbus.h"
static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
static void handle(void *s, uint32_t i, cmdbus_bytes p, cmdbus_call *c) { (void)s; (void)i; host->complete(c, CMDBUS_OK, p); }
static const cmdbus_command_descriptor commands[] = { { "old.echo", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = 1, .abi_minor = 0,
    .struct_size = offsetof(cmdbus_plugin_descriptor, command_flags),
    .name = "old", .version = "1", .command_count = 1, .commands = commands, .init = start, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
