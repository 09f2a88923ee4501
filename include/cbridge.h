/* CBridge: the C runtime of CodingBridge Core. One header per concept;
 * this umbrella is what Swift imports. Every public name is prefixed cb_. */
#ifndef CBRIDGE_H
#define CBRIDGE_H
#include "cb_error.h"
#include "cb_buf.h"
#include "cb_framing.h"
#include "cb_jsonrpc.h"
#include "cb_rpc.h"
#include "cb_conn.h"
#include "cb_listen.h"
#include "cb_net.h"
#include "cb_http2.h"
#include "cb_signal.h"
#include "cb_deadline.h"
#include "cb_store.h"
#include "cb_elapsed.h"
#include "cb_timeouts.h"
#include "cb_redact.h"
#include "cb_heap.h"
#include "cb_token.h"
#include "cb_push_crypto.h"
#endif
