/* The ABI target is header-only; SwiftPM wants one source file in a C target. */
#include "cmdbus.h"
