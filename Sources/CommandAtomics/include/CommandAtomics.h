// What CommandCore needs from C11 that Swift does not give on every supported system. Internal to the
// package: `CommandCore` imports it with `internal import`.
//
// 1. One process-wide atomic integer, read on every command's start and end: the logging threshold of
//    `CommandLogging` (the lowest level a logger wants; INT_MAX when no logger is set). C11 atomics,
//    because Swift's own (`Synchronization`) need macOS 15 / iOS 18 and this package supports older
//    systems.
// 2. A few thread-local pointer slots (`_Thread_local`), read on every value a stage delivers: a
//    cache in front of `pthread_getspecific` for `ThreadLocal` (which still owns each value, and
//    releases it when the thread exits through its pthread key).
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

/// How many `ThreadLocal`s get a fast slot; later ones use only their pthread key.
#define COMMAND_THREAD_SLOT_COUNT 8

/// The slot kept for the delivery trampoline's queue (read on every value a stage delivers, by index,
/// with no Swift global to initialise first); `command_thread_slot_reserve` hands out the others.
#define COMMAND_DELIVERIES_SLOT 0

extern _Thread_local void *_Nullable command_thread_slots[COMMAND_THREAD_SLOT_COUNT];
extern _Atomic(int) command_thread_slots_reserved;

/// A slot index for a new `ThreadLocal` (once per instance); `COMMAND_THREAD_SLOT_COUNT` or more: none left.
static inline int command_thread_slot_reserve(void) {
    return atomic_fetch_add_explicit(&command_thread_slots_reserved, 1, memory_order_relaxed);
}

/// This thread's pointer in `slot` (NULL until set).
static inline void *_Nullable command_thread_slot_get(int slot) { return command_thread_slots[slot]; }

static inline void command_thread_slot_set(int slot, void *_Nullable value) { command_thread_slots[slot] = value; }

/// Clears this thread's slots holding `value` (its owner is releasing it as the thread exits).
static inline void command_thread_slots_clear(void *_Nullable value) {
    for (int slot = 0; slot < COMMAND_THREAD_SLOT_COUNT; slot++) {
        if (command_thread_slots[slot] == value) command_thread_slots[slot] = 0;
    }
}

#endif
