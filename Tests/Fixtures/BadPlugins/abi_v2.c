/* A plugin built against a future ABI: it exports only cmdbus_plugin_v2. */
#include "cmdbus.h"
static const cmdbus_plugin_descriptor descriptor = { .magic = CMDBUS_PLUGIN_MAGIC, .abi_major = 2 };
__attribute__((visibility("default"))) const cmdbus_plugin_descriptor *cmdbus_plugin_v2(void) { return &descriptor; }
