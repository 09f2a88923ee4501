#include "cb_heap.h"
#include <stdlib.h> /* defines __GLIBC__ on glibc */
#if defined(__GLIBC__)
#include <malloc.h>
#endif

size_t cb_heap_bytes_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    /* uordblks: allocated from the main heap; hblkhd: large blocks from mmap. */
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
#else
    return 0;
#endif
}
