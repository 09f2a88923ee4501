#include "cb_error.h"
#include <uv.h>

const char *cb_strerror(int err) {
    switch (err) {
    case 0: return "success";
    case CB_ENOMEM: return "out of memory";
    case CB_EINVAL: return "invalid argument";
    case CB_ETOOBIG: return "input exceeds limit";
    case CB_ENOTFOUND: return "not found";
    case CB_ELIMIT: return "match limit exceeded";
    case CB_ESTORE: return "durable store error";
    case CB_EBUSY: return "resource busy";
    case CB_ECLOSED: return "already closed";
    default: return err > CB_E_BASE ? uv_strerror(err) : "unknown error";
    }
}
