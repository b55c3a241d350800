/*
 * Keeps every call's handle and completes it again during the next call. Before call ids,
 * a freed call's address was reused by the next call, so the stale answer ({"stale":true})
 * became the next command's result. The host must ignore it, and warn once.
 */
#include <string.h>
#include "cmdbus.h"
static const cmdbus_host_api *host;
static cmdbus_call *previous;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
static void handle(void *s, uint32_t i, cmdbus_bytes payload, cmdbus_call *call) {
    (void)s; (void)i;
    if (previous) {
        static const char stale[] = "{\"stale\":true}";
        cmdbus_bytes body = { (const uint8_t *)stale, sizeof(stale) - 1 };
        host->complete(previous, CMDBUS_OK, body);
    }
    previous = call;
    host->complete(call, CMDBUS_OK, payload);
}
static const cmdbus_command_descriptor commands[] = { { "stale.echo", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "stale", .version = "1",
    .command_count = 1, .commands = commands, .init = start, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
