/* Heap statistics for benchmarks (memory per session): bytes the allocator
 * has handed out and not yet had back. glibc's mallinfo2; 0 where unknown. */
#ifndef CB_HEAP_H
#define CB_HEAP_H
#include <stddef.h>

size_t cb_heap_bytes_in_use(void);

#endif
