#include <sqlite3.h>

// sqlite3_config is variadic, which Swift cannot call: these name the settings the journal uses.

// Turns off SQLite's memory statistics, which take a global mutex on every allocation and free
// (two per bound value, several per statement). The journal never reads them. Only takes
// effect before SQLite initializes; afterwards SQLite refuses it with SQLITE_MISUSE, harmlessly.
static inline int cmdbus_sqlite3_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
