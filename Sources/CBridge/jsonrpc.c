#include "cb_jsonrpc.h"
#include "cb_error.h"
#include <stdio.h>
#include <string.h>

const char *cb_jsonrpc_code_message(int code) {
    switch (code) {
    case CB_JSONRPC_PARSE_ERROR: return "Parse error";
    case CB_JSONRPC_INVALID_REQUEST: return "Invalid Request";
    case CB_JSONRPC_METHOD_NOT_FOUND: return "Method not found";
    case CB_JSONRPC_INVALID_PARAMS: return "Invalid params";
    case CB_JSONRPC_INTERNAL_ERROR: return "Internal error";
    default: return "Server error";
    }
}

/* Depth of [ and { outside strings. jansson's own limit (2048) is far deeper
 * than any real message and every later consumer recurses, so we cut earlier. */
static int too_deep(const char *s, size_t n, size_t max_depth, size_t *at) {
    size_t depth = 0;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') in_str = 1;
        else if (c == '[' || c == '{') {
            if (++depth > max_depth) { *at = i; return 1; }
        } else if ((c == ']' || c == '}') && depth) depth--;
    }
    return 0;
}

json_t *cb_jsonrpc_parse(const char *text, size_t len, size_t max_depth, json_t **error_data) {
    size_t at = 0;
    if (error_data) *error_data = NULL;
    if (max_depth && too_deep(text, len, max_depth, &at)) {
        if (error_data)
            *error_data = json_pack("{s:s, s:I, s:I}", "reason", "nesting too deep",
                                    "maxDepth", (json_int_t)max_depth, "position", (json_int_t)at);
        return NULL;
    }
    json_error_t err;
    /* DECODE_ANY: `1` is valid JSON but not a request, which is -32600, not -32700.
     * ALLOW_NUL: "\u0000" inside strings is valid JSON. jansson rejects invalid UTF-8. */
    json_t *v = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!v && error_data) {
        *error_data = json_pack("{s:s, s:i, s:i, s:i}", "reason", err.text, "line", err.line,
                                "column", err.column, "position", err.position);
    }
    return v;
}

static int valid_id(json_t *id) {
    return json_is_string(id) || json_is_number(id) || json_is_null(id);
}

void cb_jsonrpc_classify(json_t *v, cb_jsonrpc_msg_t *m) {
    memset(m, 0, sizeof *m);
    m->kind = CB_MSG_INVALID;
    if (!json_is_object(v)) {
        m->error = "a request must be a JSON object";
        return;
    }
    json_t *id = json_object_get(v, "id");
    /* The id is echoed in the error reply only when it is a valid id. */
    m->id = (id && valid_id(id)) ? id : NULL;
    json_t *ver = json_object_get(v, "jsonrpc");
    if (!ver) { m->error = "missing \"jsonrpc\": \"2.0\""; m->member = "jsonrpc"; return; }
    if (!json_is_string(ver) || json_string_length(ver) != 3 || memcmp(json_string_value(ver), "2.0", 3)) {
        m->error = "\"jsonrpc\" must be exactly \"2.0\"";
        m->member = "jsonrpc";
        return;
    }
    if (id && !valid_id(id)) {
        m->error = "\"id\" must be a string, a number or null";
        m->member = "id";
        return;
    }
    json_t *method = json_object_get(v, "method");
    if (!method) {
        if (id && (json_object_get(v, "result") || json_object_get(v, "error"))) {
            m->kind = CB_MSG_RESPONSE;
            return;
        }
        m->error = "missing \"method\"";
        m->member = "method";
        return;
    }
    if (!json_is_string(method)) {
        m->error = "\"method\" must be a string";
        m->member = "method";
        return;
    }
    m->method = json_string_value(method);
    m->method_len = json_string_length(method);
    if (strlen(m->method) != m->method_len) {
        m->error = "\"method\" must not contain NUL";
        m->member = "method";
        return;
    }
    json_t *params = json_object_get(v, "params");
    if (params && !json_is_object(params) && !json_is_array(params)) {
        m->error = "\"params\" must be an object or an array";
        m->member = "params";
        return;
    }
    m->params = params;
    m->kind = id ? CB_MSG_REQUEST : CB_MSG_NOTIFICATION;
}

static int dump_cb(const char *buf, size_t size, void *data) {
    return cb_buf_append((cb_buf_t *)data, buf, size) ? -1 : 0;
}

int cb_jsonrpc_write_value(cb_buf_t *out, json_t *v) {
    if (!v) return cb_buf_append(out, "null", 4);
    /* Integers are the common id: print them without jansson's machinery. */
    if (json_is_integer(v)) {
        char tmp[32];
        int n = snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return cb_buf_append(out, tmp, (size_t)n);
    }
    if (json_dump_callback(v, dump_cb, out, JSON_COMPACT | JSON_ENCODE_ANY) != 0) return CB_ENOMEM;
    return 0;
}

#define LIT(out, s) cb_buf_append((out), (s), sizeof(s) - 1)

int cb_jsonrpc_write_result_raw(cb_buf_t *out, json_t *id, const char *raw, size_t raw_len) {
    size_t mark = out->len;
    if (LIT(out, "{\"jsonrpc\":\"2.0\",\"id\":") || cb_jsonrpc_write_value(out, id) ||
        LIT(out, ",\"result\":") || cb_buf_append(out, raw, raw_len) || LIT(out, "}")) {
        out->len = mark;
        return CB_ENOMEM;
    }
    return 0;
}

int cb_jsonrpc_write_result(cb_buf_t *out, json_t *id, json_t *result) {
    size_t mark = out->len;
    if (LIT(out, "{\"jsonrpc\":\"2.0\",\"id\":") || cb_jsonrpc_write_value(out, id) ||
        LIT(out, ",\"result\":") || cb_jsonrpc_write_value(out, result ? result : json_null()) ||
        LIT(out, "}")) {
        out->len = mark;
        return CB_ENOMEM;
    }
    return 0;
}

int cb_jsonrpc_write_error(cb_buf_t *out, json_t *id, int code, const char *message, json_t *data) {
    size_t mark = out->len;
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%d", code);
    json_t *msg = json_string(message ? message : cb_jsonrpc_code_message(code));
    if (!msg) msg = json_string(cb_jsonrpc_code_message(code)); /* message was not UTF-8 */
    int rc = LIT(out, "{\"jsonrpc\":\"2.0\",\"id\":") || cb_jsonrpc_write_value(out, id) ||
             LIT(out, ",\"error\":{\"code\":") || cb_buf_append(out, tmp, (size_t)n) ||
             LIT(out, ",\"message\":") || cb_jsonrpc_write_value(out, msg);
    if (!rc && data) rc = LIT(out, ",\"data\":") || cb_jsonrpc_write_value(out, data);
    if (!rc) rc = LIT(out, "}}");
    json_decref(msg);
    if (rc) { out->len = mark; return CB_ENOMEM; }
    return 0;
}

int cb_jsonrpc_write_notification(cb_buf_t *out, const char *method, json_t *params) {
    size_t mark = out->len;
    json_t *m = json_string(method);
    int rc = !m || LIT(out, "{\"jsonrpc\":\"2.0\",\"method\":") || cb_jsonrpc_write_value(out, m);
    if (!rc && params) rc = LIT(out, ",\"params\":") || cb_jsonrpc_write_value(out, params);
    if (!rc) rc = LIT(out, "}");
    json_decref(m);
    if (rc) { out->len = mark; return rc < 0 ? rc : CB_EINVAL; }
    return 0;
}
