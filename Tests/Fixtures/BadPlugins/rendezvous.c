/* A plugin whose entry point returns only once two plugins have entered theirs (marker files in
 * $CMDBUS_TEST_RENDEZVOUS), and otherwise never: two copies pass a probe only if they are probed at
 * the same time. Build with -DPLUGIN_NAME='"…"' -DCOMMAND_NAME='"…"'. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cmdbus.h"
static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
static void handle(void *s, uint32_t i, cmdbus_bytes p, cmdbus_call *c) {
    (void)s; (void)i; (void)p;
    const char *body = "{}";
    cmdbus_bytes bytes = { (const uint8_t *)body, strlen(body) };
    host->complete(c, CMDBUS_OK, bytes);
}
static const cmdbus_command_descriptor commands[] = { { COMMAND_NAME, 0 } };
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = PLUGIN_NAME, .version = "1", .priority = 0,
    .command_count = 1, .commands = commands, .init = start, .handle = handle,
};
static int markers(const char *directory) {
    DIR *listing = opendir(directory);
    if (!listing) return 0;
    int count = 0;
    for (struct dirent *entry; (entry = readdir(listing));) count += entry->d_name[0] != '.';
    closedir(listing);
    return count;
}
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) {
    const char *directory = getenv("CMDBUS_TEST_RENDEZVOUS");
    if (!directory) return &descriptor;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-%d", directory, PLUGIN_NAME, (int)getpid());
    FILE *marker = fopen(path, "w");
    if (marker) fclose(marker);
    struct timespec tick = { 0, 10 * 1000 * 1000 };
    for (int waited = 0; waited < 500 && markers(directory) < 2; waited++) nanosleep(&tick, 0);
    while (markers(directory) < 2) pause();
    return &descriptor;
}
