/*
 * A plugin that links a library of its own, libcmdbus_needed.so (built from this file with
 * -DNEEDED_LIBRARY), found through its rpath: it loads only where that library is.
 *   needed.answer   answers {"answer":42}, the library's number
 */
#include <stdio.h>
#include <string.h>
#include "cmdbus.h"

#ifdef NEEDED_LIBRARY
__attribute__((visibility("default"))) int cmdbus_needed_answer(void) { return 42; }
#else
extern int cmdbus_needed_answer(void);

static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }

static void handle(void *state, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)state; (void)index; (void)payload;
    char answer[32];
    snprintf(answer, sizeof answer, "{\"answer\":%d}", cmdbus_needed_answer());
    cmdbus_bytes body = { (const uint8_t *)answer, strlen(answer) };
    host->complete(call, CMDBUS_OK, body);
}

static int32_t can_handle(void *state, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)state; (void)index; (void)payload; (void)call;
    return 1;
}

static const cmdbus_command_descriptor commands[] = { { "needed.answer", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "needs-library", .version = "1",
    .command_count = 1, .commands = commands, .init = start, .can_handle = can_handle, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
#endif
