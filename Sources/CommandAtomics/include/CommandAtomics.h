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

#include <stdint.h>

extern _Thread_local uint32_t command_thread_number_cache;
extern _Atomic(uint32_t) command_thread_number_next;

/// A number naming the calling thread (never 0; given out in order, so not reused while the process
/// runs unless 2^32 threads were made): 4 bytes where a `pthread_t` is 8, for the thread a command ran
/// on (`CommandTiming.threadID`).
static inline uint32_t command_thread_number(void) {
    uint32_t number = command_thread_number_cache;
    while (number == 0) {
        number = atomic_fetch_add_explicit(&command_thread_number_next, 1, memory_order_relaxed) + 1;
        command_thread_number_cache = number;
    }
    return number;
}

/// The current frame's address: how deep this thread's stack is (it grows down), for the delivery
/// trampoline's bound on nesting (`Trampoline.nestingBudget`). The frame itself, not a local's address
/// (which AddressSanitizer may move to a heap "fake stack").
static inline uintptr_t command_stack_address(void) { return (uintptr_t)__builtin_frame_address(0); }

// The in-place claim word beside a command's lock (`ClaimWord` in `Locked.swift`): a value handed in
// place to a command's one idle observer marks it claimed under the lock; the delivering thread
// releases the claim afterwards without the lock (one fetch-and-subtract) unless a thread that took the
// lock meanwhile poked it (it gave the observer more to do, or looked at it), in which case the
// delivering thread takes the lock. Two bits of a 32-bit word whose other bits belong to the lock
// (on Linux: its kind and debug owner, see below) and to the command's end (`ENDED`: set once, under
// the lock, when the command ends, so that the end of its run's result can be checked without the
// lock); every write keeps them.

#define COMMAND_CLAIM_CLAIMED 0x40000000u
#define COMMAND_CLAIM_POKED 0x20000000u
#define COMMAND_CLAIM_BITS (COMMAND_CLAIM_CLAIMED | COMMAND_CLAIM_POKED)
#define COMMAND_CLAIM_ENDED 0x10000000u

/// Marks the command ended (under the lock, once); release order: what the end did happened before a
/// thread that sees the mark.
static inline void command_claim_mark_ended(uint32_t *_Nonnull word) {
    __atomic_fetch_or(word, COMMAND_CLAIM_ENDED, __ATOMIC_RELEASE);
}

/// Whether the command was marked ended (acquire: see above).
static inline int command_claim_ended(uint32_t *_Nonnull word) {
    return (__atomic_load_n(word, __ATOMIC_ACQUIRE) & COMMAND_CLAIM_ENDED) != 0;
}

/// The claim bits (0: no claim outstanding). Acquire: a claim released without the lock happened
/// before what the caller does next with the observer.
static inline uint32_t command_claim_load(uint32_t *_Nonnull word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE) & COMMAND_CLAIM_BITS;
}

/// Marks the word claimed (under the lock, with no claim outstanding: nothing else writes it now).
static inline void command_claim_set(uint32_t *_Nonnull word) {
    __atomic_store_n(word, __atomic_load_n(word, __ATOMIC_RELAXED) | COMMAND_CLAIM_CLAIMED, __ATOMIC_RELAXED);
}

/// Clears the claim bits (under the lock, by the delivering thread after a poke, or by the poker when
/// the claim was already released: nothing else writes them now).
static inline void command_claim_clear(uint32_t *_Nonnull word) {
    __atomic_store_n(word, __atomic_load_n(word, __ATOMIC_RELAXED) & ~COMMAND_CLAIM_BITS, __ATOMIC_RELAXED);
}

/// Pokes a claim (under the lock); returns the claim bits as they were: without `CLAIMED`, the
/// delivering thread had already released it.
static inline uint32_t command_claim_poke(uint32_t *_Nonnull word) {
    return __atomic_fetch_or(word, COMMAND_CLAIM_POKED, __ATOMIC_ACQ_REL) & COMMAND_CLAIM_BITS;
}

/// Releases a claim without the lock, by the delivering thread (which holds it: `CLAIMED` is set, so
/// subtracting it clears that bit alone): 1 if it was not poked (released, with release order: the
/// delivery happened before the next one), 0 if it was (only `POKED` is left: the word is not free
/// until the caller takes the lock and clears it, as after a refused release). One fetch-and-subtract,
/// which returns the old bits in one instruction where a compare-and-swap needed a load and a loop.
static inline int command_claim_release(uint32_t *_Nonnull word) {
    return (__atomic_fetch_sub(word, COMMAND_CLAIM_CLAIMED, __ATOMIC_RELEASE) & COMMAND_CLAIM_POKED) == 0;
}

#if defined(__linux__)

// A lock is two words: `word[0]` the futex word (0 free, 1 held, 2 held with sleepers); `word[1]` its
// kind (the top bit: contended, spins before sleeping), the in-place claim bits and the ended bit (the
// next three, see above) and, in debug builds, the holder's thread id (the low 28 bits; 0: none).

#define COMMAND_LOCK_CONTENDED 0x80000000u
#define COMMAND_LOCK_OWNER_BITS 0x0FFFFFFFu

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
    return __atomic_load_n(word + 1, __ATOMIC_RELAXED) & COMMAND_LOCK_OWNER_BITS;
}

/// Records the holder (`id` as it takes the lock, 0 as it releases it), keeping the other bits: atomic
/// read-modify-writes, because a delivering thread may release its claim in the same word meanwhile.
static inline void command_lock_set_owner(uint32_t *_Nonnull word, uint32_t id) {
    if (id == 0) {
        __atomic_fetch_and(word + 1, ~COMMAND_LOCK_OWNER_BITS, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_or(word + 1, id, __ATOMIC_RELAXED);
    }
}

extern _Thread_local uint32_t command_thread_id_cache;
extern uint32_t command_thread_id_next;

/// A number naming this thread (never 0; 28 bits), for debug builds' relock check.
static inline uint32_t command_thread_id(void) {
    while (command_thread_id_cache == 0) {
        command_thread_id_cache = __atomic_add_fetch(&command_thread_id_next, 1, __ATOMIC_RELAXED) & COMMAND_LOCK_OWNER_BITS;
    }
    return command_thread_id_cache;
}
#endif

#endif
