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
// 3. On Linux, the lock of `Locked`: a 4-byte futex lock (the classic three-state design: 0 free, 1
//    held, 2 held with sleepers), where a glibc `pthread_mutex_t` is 40 bytes and about 55
//    instructions a lock round. Built from C11-style atomics, which ThreadSanitizer sees when the
//    package is built with it (`swift test --sanitize=thread`), so it still checks what the lock
//    guards. Apple platforms use `os_unfair_lock` instead (see `Locked.swift`).
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

#if defined(__linux__)
#include <stdint.h>

// A lock is two words: `word[0]` the futex word (0 free, 1 held, 2 held with sleepers); `word[1]` its
// kind (the top bit: contended, spins before sleeping) and, in debug builds, the holder's thread id
// (the other bits; 0: none).

#define COMMAND_LOCK_CONTENDED 0x80000000u

/// Sleeps until the lock looks free, then takes it (marked "held with sleepers"); a contended lock
/// looks again a while first. Out of line: only reached when the lock was found held.
void command_lock_lock_slow(uint32_t *_Nonnull word);

/// Wakes one thread sleeping on the lock (the holder released it and had seen sleepers).
void command_lock_wake(uint32_t *_Nonnull word);

/// Takes the lock: one compare-and-swap when free.
static inline void command_lock_lock(uint32_t *_Nonnull word) {
    uint32_t expected = 0;
    if (__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    command_lock_lock_slow(word);
}

/// Releases the lock: one exchange, and a wake only if someone may sleep on it.
static inline void command_lock_unlock(uint32_t *_Nonnull word) {
    if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) == 2) command_lock_wake(word);
}

/// Whether the lock is held right now (for the check of a lock's end).
static inline int command_lock_is_held(uint32_t *_Nonnull word) { return __atomic_load_n(word, __ATOMIC_RELAXED) != 0; }

/// The holder's thread id as recorded by debug builds (0: none). Read without ordering: a thread
/// only compares it with its own id, which only that thread writes.
static inline uint32_t command_lock_owner(uint32_t *_Nonnull word) {
    return __atomic_load_n(word + 1, __ATOMIC_RELAXED) & ~COMMAND_LOCK_CONTENDED;
}

/// Records the holder (`id`, or 0 as it releases), keeping the lock's kind.
static inline void command_lock_set_owner(uint32_t *_Nonnull word, uint32_t id) {
    uint32_t kind = __atomic_load_n(word + 1, __ATOMIC_RELAXED) & COMMAND_LOCK_CONTENDED;
    __atomic_store_n(word + 1, kind | id, __ATOMIC_RELAXED);
}

extern _Thread_local uint32_t command_thread_id_cache;
extern uint32_t command_thread_id_next;

/// A number naming this thread (never 0; 31 bits), for debug builds' relock check.
static inline uint32_t command_thread_id(void) {
    while (command_thread_id_cache == 0) {
        command_thread_id_cache = __atomic_add_fetch(&command_thread_id_next, 1, __ATOMIC_RELAXED) & ~COMMAND_LOCK_CONTENDED;
    }
    return command_thread_id_cache;
}
#endif

#endif
