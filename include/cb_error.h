#ifndef CB_ERROR_H
#define CB_ERROR_H
/* Errors are negative ints, like libuv's. Values below CB_E_BASE are our own;
 * anything else is a libuv error code passed through (uv_strerror explains it). */
#define CB_E_BASE      (-10000)
#define CB_ENOMEM      (-10001) /* allocation failed */
#define CB_EINVAL      (-10002) /* argument out of range or malformed */
#define CB_ETOOBIG     (-10003) /* input over a configured limit */
#define CB_ENOTFOUND   (-10004) /* no such handle / id / key */
#define CB_ELIMIT      (-10005) /* a regex match/depth/heap limit was hit */
#define CB_ESTORE      (-10006) /* the durable store failed (see cb_store_errmsg) */
#define CB_EBUSY       (-10007) /* resource held by another process */
#define CB_ECLOSED     (-10008) /* handle or connection already closed */

/* A static, human-readable description of any cb_ or libuv error code. */
const char *cb_strerror(int err);
#endif
