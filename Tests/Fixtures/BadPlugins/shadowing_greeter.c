/* A C plugin that also handles "greet", at a higher priority than the Swift Greeter.
   -DGREETING='"..."' changes its answer, to tell two builds apart. */
#include <string.h>
#include "cmdbus.h"
#ifndef GREETING
#define GREETING "Bonjour!"
#endif
static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
static void handle(void *s, uint32_t i, cmdbus_bytes p, cmdbus_call *c) {
    (void)s; (void)i; (void)p;
    const char *body = "{\"greeting\":\"" GREETING "\"}";
    cmdbus_bytes bytes = { (const uint8_t *)body, strlen(body) };
    host->complete(c, CMDBUS_OK, bytes);
}
static const cmdbus_command_descriptor commands[] = { { "greet", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "bonjour", .version = "1", .priority = 10,
    .command_count = 1, .commands = commands, .init = start, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
