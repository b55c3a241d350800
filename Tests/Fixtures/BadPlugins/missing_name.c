/* A descriptor that is missing its name. */
#include "cmdbus.h"
static void handle(void *s, uint32_t i, cmdbus_bytes p, cmdbus_call *c) { (void)s; (void)i; (void)p; (void)c; }
static const cmdbus_command_descriptor commands[] = { { "nameless", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = 0, .version = "1",
    .command_count = 1, .commands = commands, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
