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

static const char *skip_ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* A string of printable ASCII without escapes; p at the opening quote. */
static const char *plain_string(const char *p, const char *e, const char **s, size_t *n) {
    if (p >= e || *p != '"') return NULL;
    const char *q = ++p;
    while (q < e && *q != '"') {
        unsigned char c = (unsigned char)*q;
        if (c < 0x20 || c > 0x7e || c == '\\') return NULL;
        q++;
    }
    if (q >= e) return NULL;
    *s = p;
    *n = (size_t)(q - p);
    return q + 1;
}

int cb_jsonrpc_scan_simple(const char *text, size_t len, cb_jsonrpc_simple_t *out) {
    const char *p = text, *e = text + len;
    int seen = 0; /* bit 1 jsonrpc, 2 id, 4 method */
    p = skip_ws(p, e);
    if (p >= e || *p++ != '{') return 0;
    for (;;) {
        const char *k;
        size_t kn;
        p = skip_ws(p, e);
        if (!(p = plain_string(p, e, &k, &kn))) return 0;
        p = skip_ws(p, e);
        if (p >= e || *p++ != ':') return 0;
        p = skip_ws(p, e);
        if (kn == 7 && !memcmp(k, "jsonrpc", 7)) {
            const char *v;
            size_t vn;
            if ((seen & 1) || !(p = plain_string(p, e, &v, &vn)) || vn != 3 || memcmp(v, "2.0", 3)) return 0;
            seen |= 1;
        } else if (kn == 6 && !memcmp(k, "method", 6)) {
            if ((seen & 4) || !(p = plain_string(p, e, &out->method, &out->method_len))) return 0;
            seen |= 4;
        } else if (kn == 2 && !memcmp(k, "id", 2)) {
            if (seen & 2) return 0;
            const char *start = p;
            if (p < e && *p == '"') {
                const char *v;
                size_t vn;
                if (!(p = plain_string(p, e, &v, &vn))) return 0;
            } else {
                /* an integer as jansson would print it back: no "-0", no leading zeros */
                if (p < e && *p == '-') p++;
                const char *d = p;
                while (p < e && *p >= '0' && *p <= '9') p++;
                size_t nd = (size_t)(p - d);
                if (nd == 0 || nd > 18 || (*d == '0' && (nd > 1 || d != start))) return 0;
                if (p < e && (*p == '.' || *p == 'e' || *p == 'E')) return 0;
            }
            out->id = start;
            out->id_len = (size_t)(p - start);
            seen |= 2;
        } else {
            return 0;
        }
        p = skip_ws(p, e);
        if (p >= e) return 0;
        if (*p == ',') { p++; continue; }
        if (*p != '}') return 0;
        p = skip_ws(p + 1, e);
        return p == e && seen == 7;
    }
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

int cb_jsonrpc_write_result_raw_id(cb_buf_t *out, const char *id, size_t id_len, const char *raw,
                                   size_t raw_len) {
    size_t mark = out->len;
    if (LIT(out, "{\"jsonrpc\":\"2.0\",\"id\":") || cb_buf_append(out, id, id_len) ||
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
