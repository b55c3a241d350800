/*
 * recurse.down sends itself as a subcommand, and completes with what that answers: a plugin's bug
 * that, unchecked, makes a tree of work without end (a task and a journal entry a level).
 */
#include "cmdbus.h"
/* Built with -DHANDLES='"a"' -DSENDS='"b"' (and -DPLUGIN='"…"') it is one of two plugins that send
 * each other, on two hosts of the shared bus. */
#ifndef HANDLES
#define HANDLES "recurse.down"
#endif
#ifndef SENDS
#define SENDS HANDLES
#endif
#ifndef PLUGIN
#define PLUGIN "recurse"
#endif
static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
static void on_reply(void *user, int32_t status, cmdbus_bytes body) { host->complete((cmdbus_call *)user, status, body); }
static void handle(void *s, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)s; (void)index;
    host->send(call, SENDS, payload, on_reply, call);
}
static const cmdbus_command_descriptor commands[] = { { HANDLES, 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = PLUGIN, .version = "1",
    .command_count = 1, .commands = commands, .init = start, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
