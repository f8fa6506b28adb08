#include "CommandAtomics.h"
#include <limits.h>

_Atomic(int) command_atomics_log_threshold = INT_MAX;
