/*
 * sync.via sends sync.echo as a subcommand and blocks its thread until the reply arrives.
 * In a worker this deadlocked while handlers ran on the thread that reads the host's replies.
 */
#include <semaphore.h>
#include <string.h>
#include "cmdbus.h"
static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
struct waiter { sem_t done; int32_t status; uint8_t body[256]; size_t length; };
static void on_reply(void *user, int32_t status, cmdbus_bytes body) {
    struct waiter *waiter = user;
    waiter->status = status;
    waiter->length = body.length < sizeof(waiter->body) ? body.length : sizeof(waiter->body);
    if (waiter->length) memcpy(waiter->body, body.data, waiter->length);
    sem_post(&waiter->done);
}
static void handle(void *s, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)s;
    if (index == 1) { host->complete(call, CMDBUS_OK, payload); return; }
    struct waiter waiter;
    sem_init(&waiter.done, 0, 0);
    host->send(call, "sync.echo", payload, on_reply, &waiter);
    while (sem_wait(&waiter.done) != 0) {}
    cmdbus_bytes body = { waiter.body, waiter.length };
    host->complete(call, waiter.status, body);
}
static const cmdbus_command_descriptor commands[] = { { "sync.via", 0 }, { "sync.echo", 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "sync", .version = "1",
    .command_count = 2, .commands = commands, .init = start, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
