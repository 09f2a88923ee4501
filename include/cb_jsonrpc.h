#ifndef CB_JSONRPC_H
#define CB_JSONRPC_H
/* JSON-RPC 2.0 codec on jansson: parse one message, classify an envelope with
 * the spec's exact rules, and serialise responses/notifications. No I/O here. */
#include <jansson.h>
#include <stddef.h>
#include "cb_buf.h"

#define CB_JSONRPC_PARSE_ERROR      (-32700)
#define CB_JSONRPC_INVALID_REQUEST  (-32600)
#define CB_JSONRPC_METHOD_NOT_FOUND (-32601)
#define CB_JSONRPC_INVALID_PARAMS   (-32602)
#define CB_JSONRPC_INTERNAL_ERROR   (-32603)

#define CB_JSONRPC_DEFAULT_MAX_DEPTH 128

typedef enum {
    CB_MSG_REQUEST = 0,      /* method + id: gets exactly one response */
    CB_MSG_NOTIFICATION = 1, /* method, no id: never answered */
    CB_MSG_RESPONSE = 2,     /* result/error + id: a response sent by the peer */
    CB_MSG_INVALID = 3,      /* answer with -32600; error_* say why */
} cb_msg_kind;

/* A classified envelope. Pointers borrow from the parsed value. */
typedef struct {
    cb_msg_kind kind;
    const char *method;
    size_t method_len;
    json_t *params;      /* NULL when absent */
    json_t *id;          /* NULL when absent; json null when the id is null */
    const char *error;   /* CB_MSG_INVALID: what is wrong (static string) */
    const char *member;  /* CB_MSG_INVALID: the member at fault, or NULL */
} cb_jsonrpc_msg_t;

/* Parses text as one JSON value (any type), rejecting invalid UTF-8 and nesting
 * deeper than max_depth. On failure returns NULL and writes a description
 * (`reason`, `line`, `column`, `position`) into *error_data (a new object). */
json_t *cb_jsonrpc_parse(const char *text, size_t len, size_t max_depth, json_t **error_data);

/* The shape most requests have: {"jsonrpc":"2.0","id":ID,"method":"NAME"} in
 * any member order with any whitespace, ID an integer or a string, NAME and a
 * string ID plain ASCII without escapes. For exactly that shape the reply can be
 * built from the raw bytes, with no JSON tree at all; anything else (params,
 * escapes, non-ASCII, duplicates, odd numbers) returns 0 and takes the general
 * path, so the spec's semantics are never approximated. */
typedef struct {
    const char *method;
    size_t method_len;
    const char *id;  /* the id's JSON text, spliced verbatim into the reply */
    size_t id_len;
} cb_jsonrpc_simple_t;
int cb_jsonrpc_scan_simple(const char *text, size_t len, cb_jsonrpc_simple_t *out);

/* Classifies one element (a whole message, or one member of a batch). */
void cb_jsonrpc_classify(json_t *v, cb_jsonrpc_msg_t *out);

/* Appends the compact serialisation of a response / error / notification. The
 * id is written as given (string, number or null; NULL means null). */
int cb_jsonrpc_write_result(cb_buf_t *out, json_t *id, json_t *result);
int cb_jsonrpc_write_result_raw(cb_buf_t *out, json_t *id, const char *raw, size_t raw_len);
/* Same, with the id given as JSON text. */
int cb_jsonrpc_write_result_raw_id(cb_buf_t *out, const char *id, size_t id_len, const char *raw, size_t raw_len);
int cb_jsonrpc_write_error(cb_buf_t *out, json_t *id, int code, const char *message, json_t *data);
int cb_jsonrpc_write_notification(cb_buf_t *out, const char *method, json_t *params);
/* Appends compact JSON of any value. */
int cb_jsonrpc_write_value(cb_buf_t *out, json_t *v);
/* The standard message for a standard code ("Parse error", ...), else "Server error". */
const char *cb_jsonrpc_code_message(int code);
#endif
