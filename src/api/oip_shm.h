/* oip_shm.h: Triton's system shared memory extension of the Open Inference
 * Protocol: a client on the same host registers a POSIX shared memory
 * object as a named region, then an infer request names the region (and an
 * offset and size in it) instead of carrying a tensor's bytes, for inputs
 * and for outputs. A 1x3x240x320 float frame is 921,600 bytes that would
 * otherwise cross loopback TCP and be parsed out of the body each frame.
 *
 * Routes (hearth_api_register_oip_shm, api.h), as Triton answers them:
 *   POST /v2/systemsharedmemory/region/{r}/register   {"key", "offset", "byte_size"}
 *   POST /v2/systemsharedmemory/region/{r}/unregister
 *   POST /v2/systemsharedmemory/unregister            (every region)
 *   GET  /v2/systemsharedmemory/status                [{"name","key","offset","byte_size"}, ...]
 *   GET  /v2/systemsharedmemory/region/{r}/status
 *
 * Regions belong to the process (Triton has one): under --workers N a
 * region registered through one worker would be unknown to the others, so
 * registration is refused there with the reason. */
#ifndef HEARTH_API_OIP_SHM_H
#define HEARTH_API_OIP_SHM_H

#include "api.h"

#include "base/buf.h"
#include "net/server.h"

#include <stdint.h>

typedef struct hearth_oip_shm hearth_oip_shm;

/* The region registered as name with a reference taken (the region stays
 * mapped until every reference is put back, even once unregistered), or
 * NULL. Thread-safe. */
hearth_oip_shm *hearth_oip_shm_get(const char *name);
void hearth_oip_shm_put(hearth_oip_shm *r);
/* Bytes [offset, offset + size) of the region (its own offset into the
 * shared memory object applied), or NULL when they are not all inside. */
char *hearth_oip_shm_at(hearth_oip_shm *r, uint64_t offset, uint64_t size);
const char *hearth_oip_shm_name(const hearth_oip_shm *r);
uint64_t hearth_oip_shm_size(const hearth_oip_shm *r);

/* Drops every region (those in use stay mapped until put back): tests. */
void hearth_oip_shm_clear(void);

#endif
