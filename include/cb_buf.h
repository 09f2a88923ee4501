#ifndef CB_BUF_H
#define CB_BUF_H
/* A growable byte buffer. The transport builds every outgoing frame in one of
 * these so a burst of replies becomes one write() instead of one per reply. */
#include <stddef.h>

typedef struct cb_buf_s {
    char *p;
    size_t len;
    size_t cap;
} cb_buf_t;

/* Makes room for `extra` more bytes; 0 or CB_ENOMEM. */
int cb_buf_reserve(cb_buf_t *b, size_t extra);
/* Appends n bytes; 0 or CB_ENOMEM. */
int cb_buf_append(cb_buf_t *b, const void *bytes, size_t n);
/* Frees the storage and leaves an empty buffer. */
void cb_buf_free(cb_buf_t *b);
/* Hands the storage to the caller (who free()s it) and leaves an empty buffer. */
char *cb_buf_detach(cb_buf_t *b, size_t *len);
#endif
