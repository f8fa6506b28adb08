#include "CommandAtomics.h"
#include <limits.h>

_Atomic(int) command_atomics_log_threshold = INT_MAX;

_Thread_local void *_Nullable command_thread_slots[COMMAND_THREAD_SLOT_COUNT];
_Atomic(int) command_thread_slots_reserved = COMMAND_DELIVERIES_SLOT + 1;

_Thread_local uint32_t command_thread_number_cache = 0;
_Atomic(uint32_t) command_thread_number_next = 0;

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

_Thread_local uint32_t command_thread_id_cache = 0;
uint32_t command_thread_id_next = 0;

void command_lock_lock_slow(uint32_t *word) {
    // A contended lock (held a few hundred instructions at a time by many threads) looks again a
    // while first, as glibc's adaptive mutex does; a command's own lock sleeps at once, as glibc's
    // normal mutex does.
    int spins = (__atomic_load_n(word + 1, __ATOMIC_RELAXED) & COMMAND_LOCK_CONTENDED) ? 100 : 0;
    for (int attempt = 0; attempt < spins; attempt++) {
        uint32_t seen = __atomic_load_n(word, __ATOMIC_RELAXED);
        if (seen == 0) {
            uint32_t expected = 0;
            if (__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
        } else if (seen == 2) {
            break;  // others already sleep: join them
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
    }
    // Mark it "held with sleepers" and sleep until it was free when marked (then it is ours, still
    // marked: the release wakes one more sleeper, if any, which finds it held and sleeps again).
    while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0) {
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 2, (void *)0, (void *)0, 0);
    }
}

void command_lock_wake(uint32_t *word) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, (void *)0, (void *)0, 0);
}
#endif
