/*
 * echo-c: a templated echo for riftgate, in C without libc.
 *
 * The config holds a template; each {{name}} in it is replaced with a part
 * of the request and the result is the response body:
 *
 *   {"template": "hello {{path}} {{query.name}}", "contentType": "text/plain"}
 *
 * Names: method, path, body, flow, requestFrom, query.<param>,
 * header.<name> (any case). An unknown name or a missing parameter expands
 * to nothing; a "{{" without "}}" is copied as is.
 */
#include "rift.h"

static int starts_with(rift_str s, const char *prefix, rift_str *rest) {
	rift_str p = rift_cstr(prefix);
	if (s.len < p.len || !rift_str_eq((rift_str){s.ptr, p.len}, p))
		return 0;
	*rest = (rift_str){s.ptr + p.len, s.len - p.len};
	return 1;
}

static rift_str lookup(const rift_request *r, rift_str name) {
	rift_str rest;
	const rift_str *v = 0;
	if (rift_str_eq(name, rift_cstr("method")))
		return r->method;
	if (rift_str_eq(name, rift_cstr("path")))
		return r->path;
	if (rift_str_eq(name, rift_cstr("body")))
		return r->body;
	if (rift_str_eq(name, rift_cstr("flow")))
		return r->flow;
	if (rift_str_eq(name, rift_cstr("requestFrom")))
		return r->request_from;
	if (starts_with(name, "query.", &rest))
		v = rift_query(r, rest);
	else if (starts_with(name, "header.", &rest))
		v = rift_header(r, rest);
	return v ? *v : (rift_str){0, 0};
}

static int echo(const rift_request *r) {
	rift_str cfg = rift_config(), tpl, ctype = rift_cstr("text/plain");
	if (!rift_json_string(cfg, rift_cstr("template"), &tpl)) {
		rift_str msg = rift_cstr("echo-c: config must be {\"template\": \"...\"}");
		rift_pair h = {rift_cstr("Content-Type"), rift_cstr("text/plain")};
		return rift_respond(500, &h, 1, msg);
	}
	rift_json_string(cfg, rift_cstr("contentType"), &ctype);

	rift_buf out = {0, 0, 0, 0};
	uint32_t i = 0;
	while (i < tpl.len) {
		uint32_t end = 0;
		if (i + 1 < tpl.len && tpl.ptr[i] == '{' && tpl.ptr[i + 1] == '{') {
			for (uint32_t j = i + 2; j + 1 < tpl.len; j++)
				if (tpl.ptr[j] == '}' && tpl.ptr[j + 1] == '}') {
					end = j;
					break;
				}
		}
		if (end) {
			rift_buf_str(&out, lookup(r, (rift_str){tpl.ptr + i + 2, end - i - 2}));
			i = end + 2;
		} else {
			rift_buf_append(&out, tpl.ptr + i, 1);
			i++;
		}
	}
	if (out.err)
		return 1;
	rift_pair h = {rift_cstr("Content-Type"), ctype};
	return rift_respond(200, &h, 1, (rift_str){(const char *)out.b, out.len});
}

RIFT_HANDLE(echo)
