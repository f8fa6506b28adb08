#include "CommandAtomics.h"
#include <limits.h>

_Atomic(int) command_atomics_log_threshold = INT_MAX;

_Thread_local void *_Nullable command_thread_slots[COMMAND_THREAD_SLOT_COUNT];
_Atomic(int) command_thread_slots_reserved = COMMAND_DELIVERIES_SLOT + 1;
