/* debug.h: test endpoints behind `hearth serve --debug-routes` (off by
 * default): they exercise deferred and streamed replies, cancellation and
 * drain without a model, so the server core is tested on its own. */
#ifndef HEARTH_API_DEBUG_H
#define HEARTH_API_DEBUG_H

#include "net/server.h"

/* POST /debug/echo             echoes the body (any framing) with its length
 * GET  /debug/sleep?ms=N       answers after N ms from another thread
 * GET  /debug/stream?n=N&ms=M  N server-sent events, one every M ms, from another thread */
int hearth_api_register_debug(hearth_server *s);

/* Waits for the endpoints' threads to return; called at process exit, after
 * the connections closed (which cancels every job), before the loops go. */
void hearth_api_debug_stop(void);

#endif
