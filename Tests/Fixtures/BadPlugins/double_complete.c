/* Completes every call twice and emits on a completed call: the host must ignore the extras. */
#include <string.h>
#include "cmdbus.h"
static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
static void handle(void *s, uint32_t i, cmdbus_bytes p, cmdbus_call *c) {
    (void)s; (void)i;
    host->complete(c, CMDBUS_OK, p);
    host->complete(c, CMDBUS_FAILED, p);
    cmdbus_bytes empty = { 0, 0 };
    host->emit(c, "late", empty);
}
static const cmdbus_command_descriptor commands[] = { { "twice", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "twice", .version = "1",
    .command_count = 1, .commands = commands, .init = start, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
