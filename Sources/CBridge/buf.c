#include "cb_buf.h"
#include "cb_error.h"
#include <stdlib.h>
#include <string.h>

int cb_buf_reserve(cb_buf_t *b, size_t extra) {
    if (b->cap - b->len >= extra) return 0;
    size_t need = b->len + extra;
    if (need < b->len) return CB_ENOMEM; /* overflow */
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p) return CB_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int cb_buf_append(cb_buf_t *b, const void *bytes, size_t n) {
    int rc = cb_buf_reserve(b, n);
    if (rc) return rc;
    if (n) memcpy(b->p + b->len, bytes, n);
    b->len += n;
    return 0;
}

void cb_buf_free(cb_buf_t *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

char *cb_buf_detach(cb_buf_t *b, size_t *len) {
    char *p = b->p;
    if (len) *len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}
