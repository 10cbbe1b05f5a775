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
 *
 * The module has two more entry points. matches is a predicate: it matches
 * when the name in the config's "require" (e.g. "query.name") has a
 * non-empty value. decorate keeps the decorated response and adds the
 * filled template as a header, named by the config's "header" (default
 * X-Echo).
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

/* expand fills tpl from r into out. */
static void expand(const rift_request *r, rift_str tpl, rift_buf *out) {
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
			rift_buf_str(out, lookup(r, (rift_str){tpl.ptr + i + 2, end - i - 2}));
			i = end + 2;
		} else {
			rift_buf_append(out, tpl.ptr + i, 1);
			i++;
		}
	}
}

static int bad_config(void) {
	rift_str msg = rift_cstr("echo-c: config must be {\"template\": \"...\"}");
	rift_pair h = {rift_cstr("Content-Type"), rift_cstr("text/plain")};
	return rift_respond(500, &h, 1, msg);
}

static int echo(const rift_request *r) {
	rift_str cfg = rift_config(), tpl, ctype = rift_cstr("text/plain");
	if (!rift_json_string(cfg, rift_cstr("template"), &tpl))
		return bad_config();
	rift_json_string(cfg, rift_cstr("contentType"), &ctype);
	rift_buf out = {0, 0, 0, 0};
	expand(r, tpl, &out);
	if (out.err)
		return 1;
	rift_pair h = {rift_cstr("Content-Type"), ctype};
	return rift_respond(200, &h, 1, (rift_str){(const char *)out.b, out.len});
}

static int has_required(const rift_request *r) {
	rift_str name;
	if (!rift_json_string(rift_config(), rift_cstr("require"), &name))
		return 0;
	return lookup(r, name).len > 0;
}

static int add_header(const rift_request *r) {
	rift_str cfg = rift_config(), tpl, name = rift_cstr("X-Echo");
	if (!r->has_response || !rift_json_string(cfg, rift_cstr("template"), &tpl))
		return 1;
	rift_json_string(cfg, rift_cstr("header"), &name);
	rift_buf val = {0, 0, 0, 0};
	expand(r, tpl, &val);
	const rift_response *in = &r->response;
	rift_pair *hs = (rift_pair *)rift_alloc((in->nheaders + 1) * (uint32_t)sizeof(rift_pair));
	if (val.err || !hs)
		return 1;
	for (uint32_t i = 0; i < in->nheaders; i++)
		hs[i] = in->headers[i];
	hs[in->nheaders] = (rift_pair){name, (rift_str){(const char *)val.b, val.len}};
	return rift_respond(in->status, hs, in->nheaders + 1, in->body);
}

RIFT_HANDLE(echo)
RIFT_MATCH(has_required)
RIFT_DECORATE(add_header)
