/* A plugin whose entry point dereferences NULL: SIGSEGV while loading. */
#include "cmdbus.h"
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) {
    volatile int *nothing = 0;
    *nothing = 1;
    return 0;
}
