/* Exports the v1 entry point but its descriptor says ABI 2.0. */
#include "cmdbus.h"
static void handle(void *s, uint32_t i, cmdbus_bytes p, cmdbus_call *c) { (void)s; (void)i; (void)p; (void)c; }
static const cmdbus_command_descriptor commands[] = { { "mismatch", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = 2, .abi_minor = 0, .struct_size = sizeof(cmdbus_plugin_descriptor),
    .name = "mismatch", .version = "1", .command_count = 1, .commands = commands, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
