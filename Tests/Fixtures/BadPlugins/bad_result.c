/*
 * A plugin whose handlers answer with results that are not JSON, which the ABI does not allow:
 *   result.text     answers the text `not json`
 *   result.bytes    answers {"a":"<0xFF>"}: JSON but for a byte that is not UTF-8
 *   result.empty    answers nothing at all (zero bytes)
 *   result.json     answers {"ok":true}, as a handler should
 *   event.text      emits 'odd' twice with the payload `not json`, then answers {}
 */
#include <string.h>
#include "cmdbus.h"

static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }

static void handle(void *state, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)state; (void)payload;
    static const char *const answers[] = { "not json", "{\"a\":\"\xff\"}", "", "{\"ok\":true}", "{}" };
    if (index == 4) {
        cmdbus_bytes odd = { (const uint8_t *)"not json", 8 };
        host->emit(call, "odd", odd);
        host->emit(call, "odd", odd);
    }
    cmdbus_bytes body = { (const uint8_t *)answers[index], strlen(answers[index]) };
    host->complete(call, CMDBUS_OK, body);
}

static int32_t can_handle(void *state, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)state; (void)index; (void)payload; (void)call;
    return 1;
}

static const cmdbus_command_descriptor commands[] = {
    { "result.text", 0 }, { "result.bytes", 0 }, { "result.empty", 0 }, { "result.json", 0 }, { "event.text", 0 },
};
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "bad-result", .version = "1",
    .command_count = sizeof(commands) / sizeof(commands[0]), .commands = commands, .init = start, .can_handle = can_handle, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
