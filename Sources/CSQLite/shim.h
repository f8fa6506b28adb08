// SQLite's C library as the system has it (Debian: libsqlite3-dev). On Apple platforms the SDK's
// SQLite3 module is used instead (see Sources/CommandDurable/Platform/SQLite.swift).
#include <sqlite3.h>
