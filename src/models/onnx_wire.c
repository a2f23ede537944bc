/* onnx_wire.c: says where a protobuf is malformed, once libprotobuf-c has
 * refused it (its unpack returns NULL and says nothing of where or why).
 *
 * How: a walk over the wire format (tag varint, then a varint, 8 bytes, a
 * length and its bytes, or 4 bytes), driven by the descriptors protoc-c
 * generated from onnx.proto, so the schema is written once: a field the
 * descriptor knows must come with a wire type its declared type can have
 * (a repeated scalar may also come packed, as protobuf-c accepts), a packed
 * array must hold whole values, and a known message field is walked in turn.
 * Unknown fields are only skipped, as protobuf-c skips them. The walk
 * allocates nothing and reads only inside [data, data + len); depth is
 * bounded (hearth's schema has no recursive message, but a bound costs
 * nothing should one come).
 *
 * Rejected: walking first on every load (the walk only explains; a file
 * protobuf-c reads needs no second pass) and a hand-written table of
 * ONNX's field numbers (a second copy of the schema that could drift from
 * onnx.proto). */
#include "onnx_int.h"

#include <stdio.h>
#include <string.h>

#define WIRE_MAX_DEPTH 32

enum { WT_VARINT = 0, WT_64BIT = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_32BIT = 5 };

static const char *wire_name(unsigned wt)
{
    static const char *const names[8] = {"varint", "64-bit", "length-delimited", "start-group",
                                         "end-group", "32-bit", "undefined", "undefined"};
    return names[wt & 7];
}

/* What a walk finds: a malformed field, or one cut short by the end of
 * the bytes (a truncated file, where the innermost cut field is worth
 * naming). */
enum { WALK_OK = 0, WALK_BAD = -1, WALK_CUT = -2 };

/* Reads a varint at data[*pos] (at most 10 bytes): WALK_CUT when len comes
 * first, WALK_BAD when it is longer. */
static int read_varint(const uint8_t *data, size_t len, size_t *pos, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (*pos >= len)
            return WALK_CUT;
        uint8_t b = data[(*pos)++];
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = r;
            return WALK_OK;
        }
    }
    return WALK_BAD;
}

static const char *varint_fault(int rc) { return rc == WALK_CUT ? "is cut off by the end" : "is longer than 10 bytes"; }

/* The wire type a non-packed value of type t has. */
static unsigned wire_of(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return WT_64BIT;
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return WT_32BIT;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return WT_LEN;
    default:
        return WT_VARINT;
    }
}

/* Checks a packed array of type t in data[0, n). */
static int check_packed(const uint8_t *data, size_t n, ProtobufCType t, char *why, size_t why_n)
{
    unsigned wt = wire_of(t);
    if (wt == WT_32BIT || wt == WT_64BIT) {
        size_t w = wt == WT_32BIT ? 4 : 8;
        if (n % w) {
            snprintf(why, why_n, "a packed array of %zu bytes is not whole %zu-byte values", n, w);
            return WALK_BAD;
        }
        return 0;
    }
    size_t pos = 0;
    uint64_t v;
    while (pos < n) {
        size_t at = pos;
        if (read_varint(data, n, &pos, &v) < 0) {
            snprintf(why, why_n, "a packed array's varint at its byte %zu is cut off or longer than 10 bytes", at);
            return WALK_BAD;
        }
    }
    return 0;
}

/* why = "<prefix> > <why>" */
static void prepend(char *why, size_t why_n, const char *msg, const char *field)
{
    char tmp[384];
    snprintf(tmp, sizeof tmp, "%s.%s > %s", msg, field, why);
    snprintf(why, why_n, "%s", tmp);
}

static int walk(const uint8_t *data, size_t len, const ProtobufCMessageDescriptor *desc, int depth,
                uint64_t *off, char *why, size_t why_n)
{
    size_t pos = 0;
    while (pos < len) {
        size_t at = pos;
        uint64_t tag, v;
        int rc = read_varint(data, len, &pos, &tag);
        if (rc < 0) {
            *off = at;
            snprintf(why, why_n, "%s: a field tag %s", desc->short_name, varint_fault(rc));
            return rc;
        }
        unsigned wt = (unsigned)(tag & 7);
        uint64_t id = tag >> 3;
        if (id == 0 || id > 0x1fffffff) {
            *off = at;
            snprintf(why, why_n, "%s: field number %llu is outside 1..2^29-1", desc->short_name, (unsigned long long)id);
            return WALK_BAD;
        }
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(desc, (unsigned)id);
        const char *fname = f ? f->name : "?";
        size_t body = pos, body_n = 0;
        switch (wt) {
        case WT_VARINT:
            rc = read_varint(data, len, &pos, &v);
            if (rc < 0) {
                *off = at;
                snprintf(why, why_n, "%s field %llu (%s): its varint %s", desc->short_name, (unsigned long long)id, fname,
                         varint_fault(rc));
                return rc;
            }
            break;
        case WT_64BIT:
        case WT_32BIT: {
            size_t w = wt == WT_64BIT ? 8 : 4;
            if (len - pos < w) {
                *off = at;
                snprintf(why, why_n, "%s field %llu (%s): its %zu-byte value runs past the end (%zu bytes left)",
                         desc->short_name, (unsigned long long)id, fname, w, len - pos);
                return WALK_CUT;
            }
            pos += w;
            break;
        }
        case WT_LEN:
            rc = read_varint(data, len, &pos, &v);
            if (rc < 0) {
                *off = at;
                snprintf(why, why_n, "%s field %llu (%s): its length varint %s", desc->short_name, (unsigned long long)id,
                         fname, varint_fault(rc));
                return rc;
            }
            if (v > len - pos) {
                /* A cut file: where a known message was cut, a walk of what
                 * is left of it names the innermost field cut short ("... >
                 * TensorProto field 4 (float_data): length ..."). Only when
                 * that walk too ends at a cut: a length that is simply wrong
                 * would have it misread the bytes after and blame them. */
                uint64_t sub = 0;
                if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && depth + 1 <= WIRE_MAX_DEPTH &&
                    walk(data + pos, len - pos, f->descriptor, depth + 1, &sub, why, why_n) == WALK_CUT) {
                    *off = pos + sub;
                    prepend(why, why_n, desc->short_name, fname);
                    return WALK_CUT;
                }
                *off = at;
                snprintf(why, why_n, "%s field %llu (%s): length %llu runs past the end of its message (%zu bytes left)",
                         desc->short_name, (unsigned long long)id, fname, (unsigned long long)v, len - pos);
                return WALK_CUT;
            }
            body = pos;
            body_n = (size_t)v;
            pos += (size_t)v;
            break;
        default:
            *off = at;
            snprintf(why, why_n, "%s field %llu (%s): wire type %u (%s), which protobuf-c does not read", desc->short_name,
                     (unsigned long long)id, fname, wt, wire_name(wt));
            return WALK_BAD;
        }
        if (!f)
            continue;
        bool packed = f->label == PROTOBUF_C_LABEL_REPEATED && wt == WT_LEN && wire_of(f->type) != WT_LEN;
        if (!packed && wt != wire_of(f->type)) {
            *off = at;
            snprintf(why, why_n, "%s.%s (field %llu) comes as %s, its declared type wants %s", desc->short_name, fname,
                     (unsigned long long)id, wire_name(wt), wire_name(wire_of(f->type)));
            return WALK_BAD;
        }
        if (packed && check_packed(data + body, body_n, f->type, why, why_n) < 0) {
            *off = at;
            prepend(why, why_n, desc->short_name, fname);
            return WALK_BAD;
        }
        if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            if (depth + 1 > WIRE_MAX_DEPTH) {
                *off = at;
                snprintf(why, why_n, "%s.%s: messages nested deeper than %d", desc->short_name, fname, WIRE_MAX_DEPTH);
                return WALK_BAD;
            }
            uint64_t sub = 0;
            /* inside a whole message, a field cut by its end is malformed, not a cut file */
            if (walk(data + body, body_n, f->descriptor, depth + 1, &sub, why, why_n) < 0) {
                *off = body + sub;
                prepend(why, why_n, desc->short_name, fname);
                return WALK_BAD;
            }
        }
    }
    return WALK_OK;
}

int onnx_wire_check(const uint8_t *data, size_t len, const ProtobufCMessageDescriptor *desc, uint64_t *off,
                    char *why, size_t why_n)
{
    *off = 0;
    if (why_n)
        why[0] = '\0';
    return walk(data, len, desc, 0, off, why, why_n) < 0 ? -1 : 0;
}
