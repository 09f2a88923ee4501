#ifndef CB_NET_WEB_H
#define CB_NET_WEB_H
/* The web app's files, compiled in by scripts/embed-web.sh (web_assets.c). */
#include <stddef.h>

typedef struct {
    const char *path; /* "/index.html" */
    const char *type; /* Content-Type */
    const char *etag; /* quoted, from the content's SHA-256 */
    const char *body;
    size_t len;
} net_web_asset_t;

extern const net_web_asset_t net_web_assets[];
extern const size_t net_web_assets_count;
#endif
