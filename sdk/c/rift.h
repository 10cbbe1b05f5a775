/*
 * rift.h - riftgate guest kit for C (plugin ABI v1, see sdk/ABI.md).
 *
 * Header-only and libc-free: build a plugin with
 *
 *   clang --target=wasm32 -O2 -nostdlib -mbulk-memory -Wl,--no-entry \
 *         -I sdk/c -o plugin.wasm plugin.c
 *
 * and export entry points with RIFT_HANDLE(fn), RIFT_MATCH(fn) and
 * RIFT_DECORATE(fn), each at most once per module. The header itself
 * exports the rift_abi_v1 marker (a weak definition, so several source
 * files may include it); no -Wl,--export flags are needed.
 *
 * Memory: everything the kit hands out (the decoded request, the config,
 * flow values, rift_alloc) comes from one arena above __heap_base that is
 * reset at the start of every call, so a plugin never frees anything and
 * must keep nothing in memory between calls (keep state in the flow).
 */
#ifndef RIFT_H
#define RIFT_H

typedef __UINT8_TYPE__ uint8_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT64_TYPE__ uint64_t;

#define RIFT_IMPORT(name) __attribute__((import_module("rift_v1"), import_name(name)))

RIFT_IMPORT("request_read") int32_t rift_sys_request_read(uint8_t *buf, int32_t cap);
RIFT_IMPORT("config_read") int32_t rift_sys_config_read(uint8_t *buf, int32_t cap);
RIFT_IMPORT("flow_get") int32_t rift_sys_flow_get(const uint8_t *key, int32_t klen, uint8_t *buf, int32_t cap, uint8_t *ver_out);
RIFT_IMPORT("flow_put") int32_t rift_sys_flow_put(const uint8_t *key, int32_t klen, const uint8_t *val, int32_t vlen);
RIFT_IMPORT("flow_cas") int32_t rift_sys_flow_cas(const uint8_t *key, int32_t klen, int64_t expect, const uint8_t *val, int32_t vlen);
RIFT_IMPORT("flow_delete") int32_t rift_sys_flow_delete(const uint8_t *key, int32_t klen);
RIFT_IMPORT("response_write") int32_t rift_sys_response_write(const uint8_t *buf, int32_t len);
RIFT_IMPORT("log") void rift_sys_log(int32_t level, const uint8_t *buf, int32_t len);
RIFT_IMPORT("now_ms") int64_t rift_sys_now_ms(void);

/* ABI v1 statuses. */
enum {
	RIFT_OK = 0,
	RIFT_NOT_FOUND = 1,
	RIFT_CAS_MISMATCH = 2,
	RIFT_UNAVAILABLE = 3,
	RIFT_TOO_LARGE = 4,
	RIFT_BAD_MEMORY = 5,
	RIFT_MALFORMED = 100 /* kit-only: an envelope did not decode */
};

enum { RIFT_DEBUG = 0, RIFT_INFO = 1, RIFT_WARN = 2, RIFT_ERROR = 3 };

/* A byte string; not NUL-terminated. */
typedef struct {
	const char *ptr;
	uint32_t len;
} rift_str;

typedef struct {
	rift_str key, val;
} rift_pair;

/* A response envelope; status 0 means 200. */
typedef struct {
	uint32_t status;
	rift_pair *headers;
	uint32_t nheaders;
	rift_str body;
} rift_response;

typedef struct {
	rift_str method, path, body, flow, request_from;
	rift_pair *query;
	uint32_t nquery;
	rift_pair *headers;
	uint32_t nheaders;
	/* The response being decorated: decorate calls only. */
	int has_response;
	rift_response response;
} rift_request;

/* The ABI marker. Weak, so that every source file may include this header;
 * the linker keeps one. */
__attribute__((export_name("rift_abi_v1"), weak)) void rift_abi_v1(void) {}

/* ---- arena ---- */

extern uint8_t __heap_base;
static uint32_t rift_arena_top;

static inline void rift_arena_reset(void) { rift_arena_top = (uint32_t)&__heap_base; }

/* rift_alloc returns n bytes, 8-aligned, valid until the call ends; 0 when
 * memory cannot grow. */
static inline void *rift_alloc(uint32_t n) {
	if (rift_arena_top == 0)
		rift_arena_reset();
	uint32_t p = (rift_arena_top + 7u) & ~7u;
	if (n > 0xffffffffu - p)
		return 0;
	uint32_t end = p + n;
	uint32_t have = (uint32_t)__builtin_wasm_memory_size(0) * 65536u;
	if (end > have) {
		uint32_t pages = (end - have + 65535u) / 65536u;
		if (__builtin_wasm_memory_grow(0, pages) < 0)
			return 0;
	}
	rift_arena_top = end;
	return (void *)p;
}

/* ---- small string helpers (no libc) ---- */

static inline rift_str rift_cstr(const char *s) {
	uint32_t n = 0;
	while (s[n])
		n++;
	return (rift_str){s, n};
}

static inline int rift_str_eq(rift_str a, rift_str b) {
	if (a.len != b.len)
		return 0;
	for (uint32_t i = 0; i < a.len; i++)
		if (a.ptr[i] != b.ptr[i])
			return 0;
	return 1;
}

static inline char rift_lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c; }

static inline int rift_str_eq_fold(rift_str a, rift_str b) {
	if (a.len != b.len)
		return 0;
	for (uint32_t i = 0; i < a.len; i++)
		if (rift_lower(a.ptr[i]) != rift_lower(b.ptr[i]))
			return 0;
	return 1;
}

/* rift_header finds a header by name, ignoring ASCII case; 0 if absent. */
static inline const rift_str *rift_header(const rift_request *r, rift_str name) {
	for (uint32_t i = 0; i < r->nheaders; i++)
		if (rift_str_eq_fold(r->headers[i].key, name))
			return &r->headers[i].val;
	return 0;
}

/* rift_query finds a query parameter by exact name; 0 if absent. */
static inline const rift_str *rift_query(const rift_request *r, rift_str name) {
	for (uint32_t i = 0; i < r->nquery; i++)
		if (rift_str_eq(r->query[i].key, name))
			return &r->query[i].val;
	return 0;
}

/* ---- CBOR reader ---- */

typedef struct {
	const uint8_t *b;
	uint32_t len, off;
	int err;
} rift_cbor;

/* rift_cbor_head reads an item's major type and argument. Indefinite
 * lengths (which the host never writes) are errors. */
static inline int rift_cbor_head(rift_cbor *d, uint64_t *arg) {
	if (d->err || d->off >= d->len) {
		d->err = 1;
		return -1;
	}
	uint8_t ib = d->b[d->off++];
	uint8_t info = ib & 0x1f;
	uint32_t n;
	if (info < 24) {
		*arg = info;
		return ib >> 5;
	}
	switch (info) {
	case 24: n = 1; break;
	case 25: n = 2; break;
	case 26: n = 4; break;
	case 27: n = 8; break;
	default: d->err = 1; return -1;
	}
	if (d->len - d->off < n) {
		d->err = 1;
		return -1;
	}
	uint64_t v = 0;
	for (uint32_t i = 0; i < n; i++)
		v = v << 8 | d->b[d->off++];
	*arg = v;
	return ib >> 5;
}

/* rift_cbor_str reads a text (or, with allow_bytes, a byte) string without
 * copying: the result points into the envelope. */
static inline rift_str rift_cbor_str(rift_cbor *d, int allow_bytes) {
	uint64_t n;
	int m = rift_cbor_head(d, &n);
	rift_str s = {0, 0};
	if (m != 3 && !(allow_bytes && m == 2)) {
		d->err = 1;
		return s;
	}
	if (n > d->len - d->off) {
		d->err = 1;
		return s;
	}
	s.ptr = (const char *)d->b + d->off;
	s.len = (uint32_t)n;
	d->off += (uint32_t)n;
	return s;
}

/* rift_cbor_count checks a container length against the input left, so a
 * huge declared length fails before anything is allocated. */
static inline uint32_t rift_cbor_count(rift_cbor *d, uint64_t n, uint32_t min_item) {
	if (d->err || n > (d->len - d->off) / min_item) {
		d->err = 1;
		return 0;
	}
	return (uint32_t)n;
}

static inline void rift_cbor_skip(rift_cbor *d, int depth) {
	uint64_t n;
	if (depth > 32) {
		d->err = 1;
		return;
	}
	int m = rift_cbor_head(d, &n);
	switch (m) {
	case 2:
	case 3:
		if (n > d->len - d->off)
			d->err = 1;
		else
			d->off += (uint32_t)n;
		break;
	case 4:
		for (uint32_t i = 0, c = rift_cbor_count(d, n, 1); i < c && !d->err; i++)
			rift_cbor_skip(d, depth + 1);
		break;
	case 5:
		for (uint32_t i = 0, c = rift_cbor_count(d, n, 2); i < c && !d->err; i++) {
			rift_cbor_skip(d, depth + 1);
			rift_cbor_skip(d, depth + 1);
		}
		break;
	case 6:
		rift_cbor_skip(d, depth + 1);
		break;
	default: /* integers, simple values, floats: the head was all */
		break;
	}
}

static inline rift_pair *rift_cbor_text_map(rift_cbor *d, uint32_t *count) {
	uint64_t n;
	*count = 0;
	if (rift_cbor_head(d, &n) != 5) {
		d->err = 1;
		return 0;
	}
	uint32_t c = rift_cbor_count(d, n, 2);
	rift_pair *p = c ? (rift_pair *)rift_alloc(c * (uint32_t)sizeof(rift_pair)) : 0;
	if (c && !p)
		d->err = 1;
	for (uint32_t i = 0; i < c && !d->err; i++) {
		p[i].key = rift_cbor_str(d, 0);
		p[i].val = rift_cbor_str(d, 0);
	}
	if (!d->err)
		*count = c;
	return p;
}

/* rift_cbor_key reads a map key: 1 with *k set for a small unsigned
 * integer, else 0 after skipping the key (the caller skips its value). */
static inline int rift_cbor_key(rift_cbor *d, uint64_t *k) {
	if (d->off < d->len && (d->b[d->off] >> 5) != 0) {
		rift_cbor_skip(d, 0);
		return 0;
	}
	return rift_cbor_head(d, k) == 0;
}

static inline void rift_decode_response(rift_cbor *d, rift_response *r) {
	uint64_t n, k;
	*r = (rift_response){0};
	if (rift_cbor_head(d, &n) != 5) {
		d->err = 1;
		return;
	}
	uint32_t c = rift_cbor_count(d, n, 2);
	for (uint32_t i = 0; i < c && !d->err; i++) {
		if (!rift_cbor_key(d, &k)) {
			rift_cbor_skip(d, 1);
			continue;
		}
		switch (k) {
		case 1:
			if (rift_cbor_head(d, &n) != 0 || n > 999)
				d->err = 1;
			r->status = (uint32_t)n;
			break;
		case 2: r->headers = rift_cbor_text_map(d, &r->nheaders); break;
		case 3: r->body = rift_cbor_str(d, 1); break;
		default: rift_cbor_skip(d, 1); break;
		}
	}
}

/* rift_decode_request decodes an envelope in place: strings point into b.
 * Keys may come in any order; unknown keys are skipped. */
static inline int rift_decode_request(const uint8_t *b, uint32_t len, rift_request *r) {
	rift_cbor d = {b, len, 0, 0};
	uint64_t n, k;
	*r = (rift_request){0};
	if (rift_cbor_head(&d, &n) != 5)
		return RIFT_MALFORMED;
	uint32_t c = rift_cbor_count(&d, n, 2);
	for (uint32_t i = 0; i < c && !d.err; i++) {
		if (!rift_cbor_key(&d, &k)) {
			rift_cbor_skip(&d, 1);
			continue;
		}
		switch (k) {
		case 1: r->method = rift_cbor_str(&d, 0); break;
		case 2: r->path = rift_cbor_str(&d, 0); break;
		case 3: r->query = rift_cbor_text_map(&d, &r->nquery); break;
		case 4: r->headers = rift_cbor_text_map(&d, &r->nheaders); break;
		case 5: r->body = rift_cbor_str(&d, 1); break;
		case 6: r->flow = rift_cbor_str(&d, 0); break;
		case 7: r->request_from = rift_cbor_str(&d, 0); break;
		case 8:
			rift_decode_response(&d, &r->response);
			r->has_response = 1;
			break;
		default: rift_cbor_skip(&d, 1); break;
		}
	}
	if (d.err || d.off != d.len)
		return RIFT_MALFORMED;
	return RIFT_OK;
}

/* ---- CBOR writer (a growable buffer in the arena) ---- */

typedef struct {
	uint8_t *b;
	uint32_t len, cap;
	int err;
} rift_buf;

static inline void rift_buf_append(rift_buf *w, const void *p, uint32_t n) {
	if (w->err)
		return;
	if (n > w->cap - w->len) {
		uint32_t cap = w->cap * 2 + n + 64;
		uint8_t *nb = (uint8_t *)rift_alloc(cap);
		if (!nb) {
			w->err = 1;
			return;
		}
		__builtin_memcpy(nb, w->b, w->len);
		w->b = nb;
		w->cap = cap;
	}
	__builtin_memcpy(w->b + w->len, p, n);
	w->len += n;
}

static inline void rift_buf_str(rift_buf *w, rift_str s) { rift_buf_append(w, s.ptr, s.len); }

static inline void rift_cbor_put_head(rift_buf *w, uint8_t major, uint64_t n) {
	uint8_t h[9];
	uint32_t len;
	major <<= 5;
	if (n < 24) {
		h[0] = major | (uint8_t)n;
		len = 1;
	} else if (n <= 0xff) {
		h[0] = major | 24;
		h[1] = (uint8_t)n;
		len = 2;
	} else if (n <= 0xffff) {
		h[0] = major | 25;
		len = 3;
	} else if (n <= 0xffffffffu) {
		h[0] = major | 26;
		len = 5;
	} else {
		h[0] = major | 27;
		len = 9;
	}
	if (len > 2)
		for (uint32_t i = 1; i < len; i++)
			h[i] = (uint8_t)(n >> (8 * (len - 1 - i)));
	rift_buf_append(w, h, len);
}

static inline void rift_cbor_put_text(rift_buf *w, rift_str s) {
	rift_cbor_put_head(w, 3, s.len);
	rift_buf_str(w, s);
}

/* ---- host calls ---- */

/* rift_read grows a buffer in the arena until the host's data fits. */
typedef int32_t (*rift_reader)(uint8_t *buf, int32_t cap, void *ctx);

static inline int32_t rift_read(rift_reader rd, void *ctx, uint32_t cap, rift_str *out) {
	for (;;) {
		uint8_t *buf = (uint8_t *)rift_alloc(cap);
		if (!buf)
			return -RIFT_TOO_LARGE;
		int32_t n = rd(buf, (int32_t)cap, ctx);
		if (n < 0)
			return n;
		if ((uint32_t)n <= cap) {
			*out = (rift_str){(const char *)buf, (uint32_t)n};
			return n;
		}
		cap = (uint32_t)n;
	}
}

static inline int32_t rift_rd_request(uint8_t *b, int32_t cap, void *ctx) {
	(void)ctx;
	return rift_sys_request_read(b, cap);
}

static inline int32_t rift_rd_config(uint8_t *b, int32_t cap, void *ctx) {
	(void)ctx;
	return rift_sys_config_read(b, cap);
}

typedef struct {
	rift_str key;
	uint8_t ver[8];
} rift_get_ctx;

static inline int32_t rift_rd_flow(uint8_t *b, int32_t cap, void *ctx) {
	rift_get_ctx *g = (rift_get_ctx *)ctx;
	return rift_sys_flow_get((const uint8_t *)g->key.ptr, (int32_t)g->key.len, b, cap, g->ver);
}

/* rift_request_read reads and decodes the current call's request. */
static inline int rift_request_read(int32_t req_len, rift_request *r) {
	rift_str raw;
	if (rift_read(rift_rd_request, 0, req_len > 0 ? (uint32_t)req_len : 0, &raw) < 0)
		return RIFT_MALFORMED;
	return rift_decode_request((const uint8_t *)raw.ptr, raw.len, r);
}

/* rift_config returns the stub's config as JSON text ("null" if none). */
static inline rift_str rift_config(void) {
	rift_str s = {0, 0};
	rift_read(rift_rd_config, 0, 256, &s);
	return s;
}

/* rift_flow_get reads key: RIFT_OK with *val and *ver set, RIFT_NOT_FOUND,
 * or another status. */
static inline int rift_flow_get(rift_str key, rift_str *val, int64_t *ver) {
	rift_get_ctx g = {key, {0}};
	int32_t n = rift_read(rift_rd_flow, &g, 256, val);
	if (n == -1)
		return RIFT_NOT_FOUND;
	if (n < 0)
		return -n;
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | g.ver[i];
	*ver = (int64_t)v;
	return RIFT_OK;
}

static inline int rift_flow_put(rift_str key, rift_str val) {
	return rift_sys_flow_put((const uint8_t *)key.ptr, (int32_t)key.len, (const uint8_t *)val.ptr, (int32_t)val.len);
}

/* rift_flow_cas writes only if key's version is still expect (0: only if
 * absent); RIFT_CAS_MISMATCH means read again and retry. */
static inline int rift_flow_cas(rift_str key, int64_t expect, rift_str val) {
	return rift_sys_flow_cas((const uint8_t *)key.ptr, (int32_t)key.len, expect, (const uint8_t *)val.ptr, (int32_t)val.len);
}

static inline int rift_flow_delete(rift_str key) {
	return rift_sys_flow_delete((const uint8_t *)key.ptr, (int32_t)key.len);
}

static inline void rift_log(int level, rift_str msg) {
	rift_sys_log(level, (const uint8_t *)msg.ptr, (int32_t)msg.len);
}

static inline int64_t rift_now_ms(void) { return rift_sys_now_ms(); }

/* rift_respond writes the response envelope: status 0 means 200. */
static inline int rift_respond(uint32_t status, const rift_pair *headers, uint32_t nheaders, rift_str body) {
	rift_buf w = {0, 0, 0, 0};
	rift_cbor_put_head(&w, 5, (status != 0) + (nheaders != 0) + (body.len != 0));
	if (status) {
		rift_cbor_put_head(&w, 0, 1);
		rift_cbor_put_head(&w, 0, status);
	}
	if (nheaders) {
		rift_cbor_put_head(&w, 0, 2);
		rift_cbor_put_head(&w, 5, nheaders);
		for (uint32_t i = 0; i < nheaders; i++) {
			rift_cbor_put_text(&w, headers[i].key);
			rift_cbor_put_text(&w, headers[i].val);
		}
	}
	if (body.len) {
		rift_cbor_put_head(&w, 0, 3);
		rift_cbor_put_head(&w, 2, body.len);
		rift_buf_str(&w, body);
	}
	if (w.err)
		return RIFT_TOO_LARGE;
	return rift_sys_response_write(w.b, (int32_t)w.len);
}

/* ---- config helper: one top-level string member of a JSON object ---- */

static inline uint32_t rift_json_ws(rift_str s, uint32_t i) {
	while (i < s.len && (s.ptr[i] == ' ' || s.ptr[i] == '\t' || s.ptr[i] == '\n' || s.ptr[i] == '\r'))
		i++;
	return i;
}

/* rift_json_skip_string returns the index after the string starting at i
 * (a '"'), or s.len + 1 when it is unterminated. */
static inline uint32_t rift_json_skip_string(rift_str s, uint32_t i) {
	for (i++; i < s.len; i++) {
		if (s.ptr[i] == '\\')
			i++;
		else if (s.ptr[i] == '"')
			return i + 1;
	}
	return s.len + 1;
}

/* rift_json_skip_value returns the index after the value starting at i. */
static inline uint32_t rift_json_skip_value(rift_str s, uint32_t i) {
	uint32_t depth = 0;
	while (i < s.len) {
		char c = s.ptr[i];
		if (c == '"') {
			i = rift_json_skip_string(s, i);
			if (depth == 0)
				return i;
			continue;
		}
		if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']') {
			if (depth == 0)
				return i;
			if (--depth == 0)
				return i + 1;
		} else if (depth == 0 && (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r'))
			return i;
		i++;
	}
	return i;
}

static inline int rift_hex(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	c = rift_lower(c);
	return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* rift_json_unescape decodes a JSON string body (without quotes) into the
 * arena. \uXXXX escapes become UTF-8; surrogate pairs are joined. */
static inline int rift_json_unescape(rift_str in, rift_str *out) {
	char *o = (char *)rift_alloc(in.len);
	uint32_t n = 0;
	if (!o && in.len)
		return 0;
	for (uint32_t i = 0; i < in.len; i++) {
		char c = in.ptr[i];
		if (c != '\\') {
			o[n++] = c;
			continue;
		}
		if (++i >= in.len)
			return 0;
		switch (in.ptr[i]) {
		case 'n': o[n++] = '\n'; break;
		case 't': o[n++] = '\t'; break;
		case 'r': o[n++] = '\r'; break;
		case 'b': o[n++] = '\b'; break;
		case 'f': o[n++] = '\f'; break;
		case 'u': {
			uint32_t cp = 0;
			for (int k = 0; k < 4; k++) {
				int h = ++i < in.len ? rift_hex(in.ptr[i]) : -1;
				if (h < 0)
					return 0;
				cp = cp << 4 | (uint32_t)h;
			}
			if (cp >= 0xd800 && cp < 0xdc00 && i + 6 < in.len && in.ptr[i + 1] == '\\' && in.ptr[i + 2] == 'u') {
				uint32_t lo = 0;
				for (int k = 3; k < 7; k++) {
					int h = rift_hex(in.ptr[i + k]);
					if (h < 0)
						return 0;
					lo = lo << 4 | (uint32_t)h;
				}
				if (lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					i += 6;
				}
			}
			/* \uXXXX takes 6 input bytes and at most 4 output bytes. */
			if (cp < 0x80)
				o[n++] = (char)cp;
			else if (cp < 0x800) {
				o[n++] = (char)(0xc0 | cp >> 6);
				o[n++] = (char)(0x80 | (cp & 0x3f));
			} else if (cp < 0x10000) {
				o[n++] = (char)(0xe0 | cp >> 12);
				o[n++] = (char)(0x80 | (cp >> 6 & 0x3f));
				o[n++] = (char)(0x80 | (cp & 0x3f));
			} else {
				o[n++] = (char)(0xf0 | cp >> 18);
				o[n++] = (char)(0x80 | (cp >> 12 & 0x3f));
				o[n++] = (char)(0x80 | (cp >> 6 & 0x3f));
				o[n++] = (char)(0x80 | (cp & 0x3f));
			}
			break;
		}
		default: o[n++] = in.ptr[i]; break; /* \" \\ \/ */
		}
	}
	*out = (rift_str){o, n};
	return 1;
}

/* rift_json_string finds the top-level member name of the JSON object doc
 * and, if its value is a string, stores it unescaped in *out. Returns 1 if
 * found. Enough for a plugin's config; not a general JSON parser. */
static inline int rift_json_string(rift_str doc, rift_str name, rift_str *out) {
	uint32_t i = rift_json_ws(doc, 0);
	if (i >= doc.len || doc.ptr[i] != '{')
		return 0;
	i++;
	for (;;) {
		i = rift_json_ws(doc, i);
		if (i >= doc.len || doc.ptr[i] != '"')
			return 0;
		uint32_t kend = rift_json_skip_string(doc, i);
		if (kend > doc.len)
			return 0;
		rift_str key = {doc.ptr + i + 1, kend - i - 2};
		i = rift_json_ws(doc, kend);
		if (i >= doc.len || doc.ptr[i] != ':')
			return 0;
		i = rift_json_ws(doc, i + 1);
		uint32_t vend = rift_json_skip_value(doc, i);
		if (vend > doc.len)
			return 0;
		if (rift_str_eq(key, name)) {
			if (doc.ptr[i] != '"' || vend - i < 2)
				return 0;
			return rift_json_unescape((rift_str){doc.ptr + i + 1, vend - i - 2}, out);
		}
		i = rift_json_ws(doc, vend);
		if (i >= doc.len || doc.ptr[i] != ',')
			return 0;
		i++;
	}
}

/* rift_enter starts an entry point: it resets the arena and decodes the
 * request; 0 on success. */
static inline int rift_enter(int32_t req_len, rift_request *req) {
	rift_arena_reset();
	if (rift_request_read(req_len, req) != RIFT_OK) {
		rift_log(RIFT_ERROR, rift_cstr("rift: malformed request envelope"));
		return 3;
	}
	return 0;
}

/* RIFT_HANDLE(fn) exports handle for int fn(const rift_request *), which
 * returns 0 after rift_respond (anything else fails the call). */
#define RIFT_HANDLE(fn)                                                          \
	__attribute__((export_name("handle"))) int32_t rift_handle(int32_t req_len) { \
		rift_request req;                                                        \
		int st = rift_enter(req_len, &req);                                      \
		return st ? st : fn(&req);                                               \
	}

/* RIFT_MATCH(fn) exports the predicate matches for
 * int fn(const rift_request *), which returns 1 to match and 0 not to. */
#define RIFT_MATCH(fn)                                                            \
	__attribute__((export_name("matches"))) int32_t rift_matches(int32_t req_len) { \
		rift_request req;                                                         \
		int st = rift_enter(req_len, &req);                                       \
		return st ? st : (fn(&req) ? 1 : 0);                                      \
	}

/* RIFT_DECORATE(fn) exports decorate for int fn(const rift_request *): the
 * response being decorated is req->response; fn returns 0, after
 * rift_respond to replace it or without to keep it. */
#define RIFT_DECORATE(fn)                                                           \
	__attribute__((export_name("decorate"))) int32_t rift_decorate(int32_t req_len) { \
		rift_request req;                                                           \
		int st = rift_enter(req_len, &req);                                         \
		return st ? st : fn(&req);                                                  \
	}

#endif /* RIFT_H */
