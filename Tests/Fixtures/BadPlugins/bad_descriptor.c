/*
 * Descriptors that break the rules, one per -D flag; each must be refused with the rule it broke,
 * before anything past a bound is read:
 *   CONTROL_NAME  a command name with an escape sequence and a newline
 *   LONG_NAME     a command name of 300 bytes
 *   SPACED_NAME   a command name of two words
 *   DUPLICATE     the same command declared twice
 *   NO_INIT       no init(): handle() could never complete a call
 *   HUGE_SIZE     struct_size of 1 GiB
 *   TOO_MANY      command_count of 100,000 over a table of one
 */
#include <string.h>
#include "cmdbus.h"
static const cmdbus_host_api *host;
static int32_t start(const cmdbus_host_api *api, void **state) { (void)state; host = api; return 0; }
static void handle(void *s, uint32_t i, cmdbus_bytes p, cmdbus_call *c) { (void)s; (void)i; host->complete(c, CMDBUS_OK, p); }
#define L "0123456789"
static const cmdbus_command_descriptor commands[] = {
#if defined(CONTROL_NAME)
    { "evil\x1b[31m.red\nnext", 0 },
#elif defined(SPACED_NAME)
    { "two words", 0 },
#elif defined(LONG_NAME)
    { L L L L L L L L L L L L L L L L L L L L L L L L L L L L L L, 0 },
#else
    { "ok.echo", 0 },
#endif
#if defined(DUPLICATE)
    { "ok.echo", 0 },
#endif
};
static const cmdbus_plugin_descriptor descriptor = {
    .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = CMDBUS_ABI_VERSION_MAJOR, .abi_minor = CMDBUS_ABI_VERSION_MINOR,
#if defined(HUGE_SIZE)
    .struct_size = 1u << 30,
#else
    .struct_size = sizeof(cmdbus_plugin_descriptor),
#endif
    .name = "bad", .version = "1",
#if defined(TOO_MANY)
    .command_count = 100000,
#else
    .command_count = sizeof(commands) / sizeof(commands[0]),
#endif
    .commands = commands,
#if !defined(NO_INIT)
    .init = start,
#endif
    .handle = handle,
};
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return &descriptor; }
