/*
 * A plugin whose handlers misbehave on purpose, for the isolation tests:
 *   bad.segv   segfaults            bad.abort  calls abort()
 *   bad.loop   never returns        bad.alloc  tries to allocate 10 GiB
 *   bad.print  writes to stdout, then answers   bad.exit   calls exit(3)
 *   ok.echo    answers with its payload
 * can_handle() takes everything; asked about ok.echo with {"slow": "PATH"}, it first appends a
 * line to PATH and takes 2 s, so a test can crash the worker while it is being asked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cmdbus.h"

static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }

static void answer(cmdbus_call *call, int32_t status, const char *text) {
    cmdbus_bytes body = { (const uint8_t *)text, strlen(text) };
    host->complete(call, status, body);
}

static void handle(void *state, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)state;
    switch (index) {
    case 0: { volatile int *nothing = 0; *nothing = 1; break; }
    case 1: abort();
    case 2: for (volatile int spin = 0;; spin++) {}
    case 3: {
        size_t size = (size_t)10 << 30;
        char *memory = malloc(size);
        if (!memory) { answer(call, CMDBUS_FAILED, "could not allocate 10 GiB"); return; }
        memset(memory, 1, size);
        free(memory);
        answer(call, CMDBUS_OK, "{\"allocated\":true}");
        return;
    }
    case 4:
    {
        /* Deliberate noise on stdout; scripts/test.sh sends it to a file ($CMDBUS_FIXTURE_NOISE)
           so the test log stays readable. */
        const char *path = getenv("CMDBUS_FIXTURE_NOISE");
        FILE *out = (path && *path) ? fopen(path, "a") : NULL;
        if (!out) out = stdout;
        for (int line = 0; line < 1000; line++) fprintf(out, "noise from a plugin on stdout, line %d\n", line);
        fflush(out);
        if (out != stdout) fclose(out);
    }
        answer(call, CMDBUS_OK, "{\"printed\":true}");
        return;
    case 6: exit(3);
    default:
        host->complete(call, CMDBUS_OK, payload);
    }
}

static int32_t can_handle(void *state, uint32_t index, cmdbus_bytes payload, cmdbus_call *call) {
    (void)state; (void)call;
    static const char key[] = "{\"slow\":\"";
    if (index != 5 || payload.length <= sizeof key || memcmp(payload.data, key, sizeof key - 1) != 0) return 1;
    char path[512];
    size_t length = 0;
    for (size_t at = sizeof key - 1; at < payload.length && payload.data[at] != '"' && length < sizeof path - 1; at++) path[length++] = (char)payload.data[at];
    path[length] = 0;
    FILE *asked = fopen(path, "a");
    if (asked) { fputs("asked\n", asked); fclose(asked); }
    sleep(2);
    return 1;
}

static const cmdbus_command_descriptor commands[] = {
    { "bad.segv", 0 }, { "bad.abort", 0 }, { "bad.loop", 0 }, { "bad.alloc", 0 }, { "bad.print", 0 }, { "ok.echo", 0 }, { "bad.exit", 0 },
};
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
    .struct_size = sizeof(cmdbus_plugin_descriptor), .name = "misbehave", .version = "1",
    .command_count = sizeof(commands) / sizeof(commands[0]), .commands = commands, .init = start, .can_handle = can_handle, .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
