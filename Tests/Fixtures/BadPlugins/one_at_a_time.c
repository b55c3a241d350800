/* A plugin whose one command, "serial.work", runs one at a time on a host (max_concurrency 1):
 * each call takes MILLISECONDS (300 unless -DMILLISECONDS=…) on a thread of its own, then answers
 * with the host's process id, so a test sees where each ran and whether any overlapped. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cmdbus.h"
#ifndef MILLISECONDS
#define MILLISECONDS 300
#endif
static const cmdbus_host_api *host;
static int running;
static int overlapped;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
static void *work(void *call) {
    if (__atomic_add_fetch(&running, 1, __ATOMIC_SEQ_CST) > 1) __atomic_store_n(&overlapped, 1, __ATOMIC_SEQ_CST);
    struct timespec duration = { MILLISECONDS / 1000, (MILLISECONDS % 1000) * 1000000L };
    nanosleep(&duration, 0);
    __atomic_sub_fetch(&running, 1, __ATOMIC_SEQ_CST);
    char body[64];
    snprintf(body, sizeof body, "{\"pid\":%d,\"overlapped\":%s}", (int)getpid(), overlapped ? "true" : "false");
    cmdbus_bytes bytes = { (const uint8_t *)body, strlen(body) };
    host->complete(call, CMDBUS_OK, bytes);
    return 0;
}
static void handle(void *s, uint32_t i, cmdbus_bytes p, cmdbus_call *c) {
    (void)s; (void)i; (void)p;
    pthread_t thread;
    pthread_create(&thread, 0, work, c);
    pthread_detach(thread);
}
static const cmdbus_command_descriptor commands[] = { { "serial.work", 1 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "serial", .version = "1", .priority = 0,
    .command_count = 1, .commands = commands, .init = start, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
