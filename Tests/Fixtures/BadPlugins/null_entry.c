/* A plugin whose entry point returns NULL. */
#include "cmdbus.h"
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v1(void) { return 0; }
