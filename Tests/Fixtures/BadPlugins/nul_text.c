/*
 * A plugin whose events and failures carry a NUL character, which PostgreSQL's jsonb and text
 * columns cannot keep:
 *   nul.event   emits 'note' with {"t":"a\u0000b"}, then 'note' with {"t":"ok"}, and answers
 *               {"r":"a\u0000b"} (a result is bytea on the bus: any byte goes)
 *   nul.fail    fails with the message "bad<NUL>byte" (a message crosses as bytes and a length)
 */
#include <string.h>
#include "cmdbus.h"

static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }

static void handle(void *state, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)state; (void)payload;
    if (index == 1) {
        cmdbus_bytes message = { (const uint8_t *)"bad\0byte", 8 };
        host->complete(call, CMDBUS_FAILED, message);
        return;
    }
    const char *nul = "{\"t\":\"a\\u0000b\"}", *plain = "{\"t\":\"ok\"}", *result = "{\"r\":\"a\\u0000b\"}";
    cmdbus_bytes first = { (const uint8_t *)nul, strlen(nul) }, second = { (const uint8_t *)plain, strlen(plain) };
    host->emit(call, "note", first);
    host->emit(call, "note", second);
    cmdbus_bytes body = { (const uint8_t *)result, strlen(result) };
    host->complete(call, CMDBUS_OK, body);
}

static const cmdbus_command_descriptor commands[] = { { "nul.event", 0 }, { "nul.fail", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "nul-text", .version = "1",
    .command_count = sizeof(commands) / sizeof(commands[0]), .commands = commands, .init = start, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
