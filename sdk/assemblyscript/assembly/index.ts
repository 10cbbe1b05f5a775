// riftgate guest kit for AssemblyScript (plugin ABI v1, see sdk/ABI.md).
//
// Build a plugin with
//   asc plugin.ts -O3 --runtime minimal --use abort= -o plugin.wasm
// and in it
//   export { rift_abi_v1 } from "@riftgate/sdk/assembly";
//   export function handle(len: i32): i32 { return rift.serve(len, onRequest); }
//
// --runtime minimal never collects by itself; serve() calls __collect()
// after each call, when no managed object is live on the stack, so memory
// stays flat over an instance's lifetime. (The stub runtime never frees, and
// a pooled instance serves up to 100000 calls.) --use abort= turns an abort
// into a trap, so the module imports nothing from "env".

@external("rift_v1", "request_read")
declare function sys_request_read(buf: usize, cap: i32): i32;
@external("rift_v1", "config_read")
declare function sys_config_read(buf: usize, cap: i32): i32;
@external("rift_v1", "flow_get")
declare function sys_flow_get(key: usize, klen: i32, buf: usize, cap: i32, verOut: usize): i32;
@external("rift_v1", "flow_put")
declare function sys_flow_put(key: usize, klen: i32, val: usize, vlen: i32): i32;
@external("rift_v1", "flow_cas")
declare function sys_flow_cas(key: usize, klen: i32, expect: i64, val: usize, vlen: i32): i32;
@external("rift_v1", "flow_delete")
declare function sys_flow_delete(key: usize, klen: i32): i32;
@external("rift_v1", "response_write")
declare function sys_response_write(buf: usize, len: i32): i32;
@external("rift_v1", "log")
declare function sys_log(level: i32, buf: usize, len: i32): void;
@external("rift_v1", "now_ms")
declare function sys_now_ms(): i64;

/** The ABI marker; re-export it from the plugin's entry file. */
export function rift_abi_v1(): void {}

// ABI v1 statuses.
export const OK: i32 = 0;
export const NOT_FOUND: i32 = 1;
export const CAS_MISMATCH: i32 = 2;
export const UNAVAILABLE: i32 = 3;
export const TOO_LARGE: i32 = 4;
export const BAD_MEMORY: i32 = 5;

export const DEBUG: i32 = 0;
export const INFO: i32 = 1;
export const WARN: i32 = 2;
export const ERROR: i32 = 3;

/** The decoded request envelope. */
export class Request {
  method: string = "";
  /** The path, without the query string. */
  path: string = "";
  /** Query parameters; repeated values joined with ",". */
  query: Map<string, string> = new Map<string, string>();
  /** Headers, names as received; see header(). */
  headers: Map<string, string> = new Map<string, string>();
  body: Uint8Array = new Uint8Array(0);
  /** The scoped flow id. */
  flow: string = "";
  /** The client's ip:port. */
  requestFrom: string = "";
  /** The response being decorated (decorate calls only). */
  response: Response | null = null;

  /** The value of a header, ignoring case; "" when absent. */
  header(name: string): string {
    if (this.headers.has(name)) return this.headers.get(name);
    const want = name.toLowerCase();
    const keys = this.headers.keys();
    for (let i = 0; i < keys.length; i++) {
      if (keys[i].toLowerCase() == want) return this.headers.get(keys[i]);
    }
    return "";
  }
}

/** A response envelope; status 0 means 200. */
export class Response {
  status: i32 = 0;
  headers: Map<string, string> = new Map<string, string>();
  body: Uint8Array = new Uint8Array(0);

  static text(status: i32, body: string): Response {
    const r = new Response();
    r.status = status;
    r.headers.set("Content-Type", "text/plain");
    r.body = Uint8Array.wrap(String.UTF8.encode(body));
    return r;
  }

  /** encode writes the response envelope, leaving out host defaults. */
  encode(): Writer {
    const w = new Writer();
    const keys = this.headers.keys();
    let n: u64 = 0;
    if (this.status != 0) n++;
    if (keys.length > 0) n++;
    if (this.body.length > 0) n++;
    w.head(5, n);
    if (this.status != 0) {
      w.head(0, 1);
      w.head(0, <u64>this.status);
    }
    if (keys.length > 0) {
      w.head(0, 2);
      w.head(5, <u64>keys.length);
      for (let i = 0; i < keys.length; i++) {
        w.text(keys[i]);
        w.text(this.headers.get(keys[i]));
      }
    }
    if (this.body.length > 0) {
      w.head(0, 3);
      w.head(2, <u64>this.body.length);
      w.bytes(this.body.dataStart, this.body.length);
    }
    return w;
  }
}

/** A growable CBOR writer. */
export class Writer {
  buf: Uint8Array = new Uint8Array(64);
  len: i32 = 0;

  private reserve(n: i32): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    if (cap < this.len + n) cap = this.len + n;
    const nb = new Uint8Array(cap);
    memory.copy(nb.dataStart, this.buf.dataStart, this.len);
    this.buf = nb;
  }

  byte(b: u8): void {
    this.reserve(1);
    store<u8>(this.buf.dataStart + this.len, b);
    this.len++;
  }

  bytes(ptr: usize, n: i32): void {
    this.reserve(n);
    memory.copy(this.buf.dataStart + this.len, ptr, n);
    this.len += n;
  }

  head(major: u8, n: u64): void {
    const m = <u8>(major << 5);
    let size = 0;
    if (n < 24) {
      this.byte(m | <u8>n);
      return;
    } else if (n <= 0xff) {
      this.byte(m | 24);
      size = 1;
    } else if (n <= 0xffff) {
      this.byte(m | 25);
      size = 2;
    } else if (n <= 0xffffffff) {
      this.byte(m | 26);
      size = 4;
    } else {
      this.byte(m | 27);
      size = 8;
    }
    for (let i = size - 1; i >= 0; i--) this.byte(<u8>(n >> (<u64>i * 8)));
  }

  text(s: string): void {
    const b = String.UTF8.encode(s);
    this.head(3, <u64>b.byteLength);
    this.bytes(changetype<usize>(b), b.byteLength);
  }
}

/** A CBOR reader; the first error sets err and stops further reads. */
export class Reader {
  err: bool = false;
  off: i32 = 0;
  major: u8 = 0;
  constructor(public buf: Uint8Array) {}

  /** head reads an item's major type (into this.major) and argument. */
  head(): u64 {
    if (this.err || this.off >= this.buf.length) {
      this.err = true;
      return 0;
    }
    const ib = this.buf[this.off++];
    this.major = ib >> 5;
    const info = ib & 0x1f;
    if (info < 24) return <u64>info;
    let n = 0;
    if (info == 24) n = 1;
    else if (info == 25) n = 2;
    else if (info == 26) n = 4;
    else if (info == 27) n = 8;
    else {
      this.err = true; // indefinite lengths are never written by the host
      return 0;
    }
    if (this.buf.length - this.off < n) {
      this.err = true;
      return 0;
    }
    let v: u64 = 0;
    for (let i = 0; i < n; i++) v = (v << 8) | <u64>this.buf[this.off++];
    return v;
  }

  /** count rejects a container longer than the input could hold. */
  count(n: u64, minItem: i32): i32 {
    if (this.err || n > <u64>((this.buf.length - this.off) / minItem)) {
      this.err = true;
      return 0;
    }
    return <i32>n;
  }

  private payload(n: u64): i32 {
    if (this.err || n > <u64>(this.buf.length - this.off)) {
      this.err = true;
      return -1;
    }
    const at = this.off;
    this.off += <i32>n;
    return at;
  }

  text(): string {
    const n = this.head();
    if (this.major != 3) this.err = true;
    const at = this.payload(n);
    if (this.err) return "";
    return String.UTF8.decodeUnsafe(this.buf.dataStart + at, <usize>n);
  }

  bytesOrText(): Uint8Array {
    const n = this.head();
    if (this.major != 2 && this.major != 3) this.err = true;
    const at = this.payload(n);
    if (this.err) return new Uint8Array(0);
    return this.buf.slice(at, at + <i32>n);
  }

  textMap(): Map<string, string> {
    const m = new Map<string, string>();
    const n = this.head();
    if (this.major != 5) this.err = true;
    const c = this.count(n, 2);
    for (let i = 0; i < c && !this.err; i++) {
      const k = this.text();
      m.set(k, this.text());
    }
    return m;
  }

  skip(depth: i32): void {
    if (depth > 32) {
      this.err = true;
      return;
    }
    const n = this.head();
    if (this.err) return;
    const m = this.major;
    if (m == 2 || m == 3) {
      this.payload(n);
    } else if (m == 4) {
      const c = this.count(n, 1);
      for (let i = 0; i < c && !this.err; i++) this.skip(depth + 1);
    } else if (m == 5) {
      const c = this.count(n, 2);
      for (let i = 0; i < c && !this.err; i++) {
        this.skip(depth + 1);
        this.skip(depth + 1);
      }
    } else if (m == 6) {
      this.skip(depth + 1);
    } // integers, simple values and floats: the head was all
  }
}

function decodeResponse(d: Reader): Response {
  const r = new Response();
  const n = d.head();
  if (d.major != 5) d.err = true;
  const c = d.count(n, 2);
  for (let i = 0; i < c && !d.err; i++) {
    if (d.off < d.buf.length && d.buf[d.off] >> 5 != 0) {
      d.skip(0);
      d.skip(1);
      continue;
    }
    const k = d.head();
    if (k == 1) {
      const st = d.head();
      if (d.major != 0 || st > 999) d.err = true;
      r.status = <i32>st;
    } else if (k == 2) r.headers = d.textMap();
    else if (k == 3) r.body = d.bytesOrText();
    else d.skip(1);
  }
  return r;
}

/**
 * decodeRequest decodes an envelope; null when it is malformed. Keys may
 * come in any order; unknown keys are skipped.
 */
export function decodeRequest(buf: Uint8Array): Request | null {
  const d = new Reader(buf);
  const r = new Request();
  const n = d.head();
  if (d.major != 5) return null;
  const c = d.count(n, 2);
  for (let i = 0; i < c && !d.err; i++) {
    if (d.off < buf.length && buf[d.off] >> 5 != 0) {
      d.skip(0); // a key that is not an unsigned integer
      d.skip(1);
      continue;
    }
    const k = d.head();
    if (k == 1) r.method = d.text();
    else if (k == 2) r.path = d.text();
    else if (k == 3) r.query = d.textMap();
    else if (k == 4) r.headers = d.textMap();
    else if (k == 5) r.body = d.bytesOrText();
    else if (k == 6) r.flow = d.text();
    else if (k == 7) r.requestFrom = d.text();
    else if (k == 8) r.response = decodeResponse(d);
    else d.skip(1);
  }
  if (d.err || d.off != buf.length) return null;
  return r;
}

/** The request of the current call; null if it did not decode. */
export function request(reqLen: i32): Request | null {
  const buf = new Uint8Array(reqLen);
  const n = sys_request_read(buf.dataStart, reqLen);
  if (n != reqLen) return null;
  return decodeRequest(buf);
}

/** The stub's config as JSON text ("null" when it has none). */
export function config(): string {
  let buf = new Uint8Array(256);
  let n = sys_config_read(buf.dataStart, buf.length);
  if (n > buf.length) {
    buf = new Uint8Array(n);
    n = sys_config_read(buf.dataStart, buf.length);
  }
  if (n < 0 || n > buf.length) return "null";
  return String.UTF8.decodeUnsafe(buf.dataStart, <usize>n);
}

/** The result of flowGet: status OK with value and version, or a status. */
export class FlowValue {
  status: i32 = OK;
  value: Uint8Array = new Uint8Array(0);
  version: i64 = 0;

  text(): string {
    return String.UTF8.decodeUnsafe(this.value.dataStart, <usize>this.value.length);
  }
}

function utf8(s: string): ArrayBuffer {
  return String.UTF8.encode(s);
}

/** flowGet reads key from the request's flow. */
export function flowGet(key: string): FlowValue {
  const k = utf8(key);
  const out = new FlowValue();
  const ver = new Uint8Array(8);
  let buf = new Uint8Array(256);
  while (true) {
    const n = sys_flow_get(changetype<usize>(k), k.byteLength, buf.dataStart, buf.length, ver.dataStart);
    if (n == -1) {
      out.status = NOT_FOUND;
      return out;
    }
    if (n < 0) {
      out.status = -n;
      return out;
    }
    if (n <= buf.length) {
      out.value = buf.subarray(0, n);
      out.version = load<i64>(ver.dataStart);
      return out;
    }
    buf = new Uint8Array(n);
  }
}

/** flowPut writes key = value unconditionally. */
export function flowPut(key: string, value: string): i32 {
  const k = utf8(key);
  const v = utf8(value);
  return sys_flow_put(changetype<usize>(k), k.byteLength, changetype<usize>(v), v.byteLength);
}

/** flowCAS writes only if key's version is still expect (0: only if absent). */
export function flowCAS(key: string, expect: i64, value: string): i32 {
  const k = utf8(key);
  const v = utf8(value);
  return sys_flow_cas(changetype<usize>(k), k.byteLength, expect, changetype<usize>(v), v.byteLength);
}

/** flowDelete deletes key; NOT_FOUND if it was absent. */
export function flowDelete(key: string): i32 {
  const k = utf8(key);
  return sys_flow_delete(changetype<usize>(k), k.byteLength);
}

export function log(level: i32, msg: string): void {
  const b = utf8(msg);
  sys_log(level, changetype<usize>(b), b.byteLength);
}

/** The host's wall clock, in milliseconds since the Unix epoch. */
export function nowMs(): i64 {
  return sys_now_ms();
}

/** respond hands the host the response of the current call. */
export function respond(r: Response): i32 {
  const w = r.encode();
  return sys_response_write(w.buf.dataStart, w.len);
}

/**
 * serve runs one handle call: decode, call fn, write its response. A null
 * response writes nothing, which fails the call (503 if a flow call
 * returned UNAVAILABLE, else 500).
 */
export function serve(reqLen: i32, fn: (req: Request) => Response | null): i32 {
  const st = runHandle(reqLen, fn);
  __collect(); // nothing allocated during the call is reachable any more
  return st;
}

/** serveMatch runs one matches (predicate) call: 1 if fn matches, else 0. */
export function serveMatch(reqLen: i32, fn: (req: Request) => bool): i32 {
  const st = runMatch(reqLen, fn);
  __collect();
  return st;
}

/**
 * serveDecorate runs one decorate call: fn gets the request and the
 * response being decorated and returns the new response, or null to keep
 * it.
 */
export function serveDecorate(reqLen: i32, fn: (req: Request, resp: Response) => Response | null): i32 {
  const st = runDecorate(reqLen, fn);
  __collect();
  return st;
}

function enter(reqLen: i32): Request | null {
  const req = request(reqLen);
  if (req == null) log(ERROR, "rift: malformed request envelope");
  return req;
}

function runHandle(reqLen: i32, fn: (req: Request) => Response | null): i32 {
  const req = enter(reqLen);
  if (req == null) return 3;
  const resp = fn(req);
  if (resp == null) return 1;
  return respond(resp) == OK ? 0 : 1;
}

function runMatch(reqLen: i32, fn: (req: Request) => bool): i32 {
  const req = enter(reqLen);
  if (req == null) return 3;
  return fn(req) ? 1 : 0;
}

function runDecorate(reqLen: i32, fn: (req: Request, resp: Response) => Response | null): i32 {
  const req = enter(reqLen);
  if (req == null) return 3;
  const cur = req.response;
  const resp = fn(req, cur == null ? new Response() : cur);
  if (resp == null) return 0;
  return respond(resp) == OK ? 0 : 1;
}

/**
 * configString returns the top-level string member name of a JSON object,
 * unescaped, or null. Enough for a plugin's config; not a general parser.
 */
export function configString(doc: string, name: string): string | null {
  let i = ws(doc, 0);
  if (i >= doc.length || doc.charCodeAt(i) != 0x7b) return null; // {
  i++;
  while (true) {
    i = ws(doc, i);
    if (i >= doc.length || doc.charCodeAt(i) != 0x22) return null;
    const kend = skipString(doc, i);
    if (kend < 0) return null;
    const key = doc.substring(i + 1, kend - 1);
    i = ws(doc, kend);
    if (i >= doc.length || doc.charCodeAt(i) != 0x3a) return null; // :
    i = ws(doc, i + 1);
    const vend = skipValue(doc, i);
    if (vend < 0) return null;
    if (key == name) {
      if (doc.charCodeAt(i) != 0x22) return null;
      return unescape(doc.substring(i + 1, vend - 1));
    }
    i = ws(doc, vend);
    if (i >= doc.length || doc.charCodeAt(i) != 0x2c) return null; // ,
    i++;
  }
}

function ws(s: string, i: i32): i32 {
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    i++;
  }
  return i;
}

function skipString(s: string, i: i32): i32 {
  for (i++; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x5c) i++;
    else if (c == 0x22) return i + 1;
  }
  return -1;
}

function skipValue(s: string, i: i32): i32 {
  let depth = 0;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c == 0x22) {
      i = skipString(s, i);
      if (i < 0 || depth == 0) return i;
      continue;
    }
    if (c == 0x7b || c == 0x5b) depth++;
    else if (c == 0x7d || c == 0x5d) {
      if (depth == 0) return i;
      if (--depth == 0) return i + 1;
    } else if (depth == 0 && (c == 0x2c || c == 0x20 || c == 0x0a || c == 0x09 || c == 0x0d)) return i;
    i++;
  }
  return depth == 0 ? i : -1;
}

function unescape(s: string): string | null {
  if (s.indexOf("\\") < 0) return s;
  // Collect UTF-16 units and build the string once: concatenating per
  // character would allocate quadratically, and the minimal runtime frees
  // nothing until the call ends.
  const out = new Array<i32>();
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c != 0x5c) {
      out.push(c);
      continue;
    }
    if (++i >= s.length) return null;
    const e = s.charCodeAt(i);
    if (e == 0x6e) out.push(0x0a);
    else if (e == 0x74) out.push(0x09);
    else if (e == 0x72) out.push(0x0d);
    else if (e == 0x62) out.push(0x08);
    else if (e == 0x66) out.push(0x0c);
    else if (e == 0x75) {
      let cp = 0;
      for (let k = 1; k <= 4; k++) {
        const h = i + k < s.length ? hexDigit(s.charCodeAt(i + k)) : -1;
        if (h < 0) return null;
        cp = (cp << 4) | h;
      }
      out.push(cp); // UTF-16 units: a surrogate pair joins itself
      i += 4;
    } else out.push(e);
  }
  return String.fromCharCodes(out);
}

function hexDigit(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}
