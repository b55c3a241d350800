/*
 * relay.fail sends fixture.fail, retryably, as a subcommand and answers with its reply, failing
 * for good if it failed: on the shared bus, a parent on one host whose child runs on another
 * (the fixture plugin's host).
 */
#include "cmdbus.h"
static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
/* The parent fails for good once its child has: only the child is retried. */
static void on_reply(void *user, int32_t status, cmdbus_bytes body) {
    host->complete((cmdbus_call *)user, status == CMDBUS_OK ? CMDBUS_OK : CMDBUS_FAILED, body);
}
static void handle(void *s, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)s; (void)index; (void)payload;
    static const char child[] = "{\"message\":\"try again\",\"retryable\":true}";
    cmdbus_bytes body = { (const uint8_t *)child, sizeof child - 1 };
    host->send(call, "fixture.fail", body, on_reply, call);
}
static const cmdbus_command_descriptor commands[] = { { "relay.fail", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "relay", .version = "1",
    .command_count = 1, .commands = commands, .init = start, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
