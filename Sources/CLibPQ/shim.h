// PostgreSQL's client library as the system has it (Debian: libpq-dev; Homebrew: libpq, then
// PKG_CONFIG_PATH="$(brew --prefix libpq)/lib/pkgconfig"). Reached only from
// Sources/CommandDurablePostgres/Platform/LibPQ.swift.
#include <libpq-fe.h>
