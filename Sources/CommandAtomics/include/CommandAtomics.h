// One process-wide atomic integer, read on every command's start and end: the logging threshold of
// `CommandLogging` (the lowest level a logger wants; INT_MAX when no logger is set). C11 atomics,
// because Swift's own (`Synchronization`) need macOS 15 / iOS 18 and this package supports older
// systems. Internal to the package: `CommandCore` imports it with `internal import`.
#ifndef COMMAND_ATOMICS_H
#define COMMAND_ATOMICS_H

#include <stdatomic.h>

extern _Atomic(int) command_atomics_log_threshold;

/// The threshold, read with relaxed order (one load).
static inline int command_atomics_load_log_threshold(void) {
    return atomic_load_explicit(&command_atomics_log_threshold, memory_order_relaxed);
}

/// Sets the threshold (the logger itself is published under `CommandLogging`'s lock).
static inline void command_atomics_store_log_threshold(int value) {
    atomic_store_explicit(&command_atomics_log_threshold, value, memory_order_relaxed);
}

#endif
