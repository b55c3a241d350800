/* A plugin whose entry point never returns. */
#include "cmdbus.h"
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) {
    for (volatile int spin = 0;; spin++) {}
    return 0;
}
