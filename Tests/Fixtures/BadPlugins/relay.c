/*
 * relay.fail sends fixture.fail, retryably, as a subcommand, and relay.sleep sends a 4 s
 * fixture.sleep; each answers with its child's reply, failing for good if the child failed: on the
 * shared bus, a parent on one host whose child runs on another (the fixture plugin's host).
 */
#include "cmdbus.h"
static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
/* The parent fails for good once its child has: only the child is retried. */
static void on_reply(void *user, int32_t status, cmdbus_bytes body) {
    host->complete((cmdbus_call *)user, status == CMDBUS_OK ? CMDBUS_OK : CMDBUS_FAILED, body);
}
static void handle(void *s, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)s; (void)payload;
    static const char failing[] = "{\"message\":\"try again\",\"retryable\":true}";
    static const char sleeping[] = "{\"milliseconds\":4000}";
    cmdbus_bytes body = index == 0
        ? (cmdbus_bytes){ (const uint8_t *)failing, sizeof failing - 1 }
        : (cmdbus_bytes){ (const uint8_t *)sleeping, sizeof sleeping - 1 };
    host->send(call, index == 0 ? "fixture.fail" : "fixture.sleep", body, on_reply, call);
}
static const cmdbus_command_descriptor commands[] = { { "relay.fail", 0 }, { "relay.sleep", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "relay", .version = "1",
    .command_count = 2, .commands = commands, .init = start, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
