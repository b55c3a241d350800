/*
 * A CommandBus plugin written in C against cmdbus.h alone.
 *
 *   c.echo {...}    answers with its payload, unchanged
 *   c.fail {...}    fails with a message, to show error reporting
 */
#include <string.h>
#include "cmdbus.h"

static const cmdbus_host_api *host;

static const cmdbus_command_descriptor commands[] = {
    { "c.echo", 0 },
    { "c.fail", 0 },
};

static int32_t echo_init(const cmdbus_host_api *api, void **state) {
    (void)state;
    if (api->abi_major != CMDBUS_ABI_VERSION_MAJOR) return 1;
    host = api;
    return 0;
}

static int32_t echo_can_handle(void *state, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)state; (void)index; (void)call;
    /* Cheap and honest: a JSON payload is at least "{}" or "[]" or a scalar. */
    return payload.length > 0 ? 1 : 0;
}

static void echo_handle(void *state, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)state;
    if (index == 0) {
        host->complete(call, CMDBUS_OK, payload);
    } else {
        const char *message = "c.fail always fails, as asked";
        cmdbus_bytes body = { (const uint8_t *)message, strlen(message) };
        host->complete(call, CMDBUS_FAILED, body);
    }
}

static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC,
    .abi_major = CMDBUS_ABI_VERSION_MAJOR,
    .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor),
    .name = "c-echo",
    .version = "1.0.0",
    .sdk_version = NULL,
    .swift_version = NULL,
    .priority = 0,
    .command_count = sizeof(commands) / sizeof(commands[0]),
    .commands = commands,
    .init = echo_init,
    .can_handle = echo_can_handle,
    .handle = echo_handle,
    .cancel = NULL,
};

__attribute__((visibility("default")))
const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) {
    return &descriptor;
}
