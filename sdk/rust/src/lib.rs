//! riftgate guest kit for Rust (plugin ABI v1, see sdk/ABI.md).
//!
//! The crate is `#![no_std]` and needs only `alloc`. It is built with
//! Debian's rustc 1.63 as a single-file rlib, with no cargo and no
//! registry; a plugin is a `cdylib` that links it with `--extern rift=...`.
//! The plugin crate itself uses `std`, which on wasm32-unknown-unknown
//! supplies the global allocator (dlmalloc, freeing memory between calls)
//! and a panic handler that traps; see README.md for a fully `no_std` build.
//!
//! ```ignore
//! fn hello(req: &rift::Request) -> Option<rift::Response> {
//!     Some(rift::Response::text(200, &req.path))
//! }
//! rift::handle!(hello);
//! ```
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

// The host imports, under their ABI names; the safe wrappers below share
// those names, so the raw functions live in their own module.
mod sys {
    #[link(wasm_import_module = "rift_v1")]
    extern "C" {
        pub fn request_read(buf: *mut u8, cap: i32) -> i32;
        pub fn config_read(buf: *mut u8, cap: i32) -> i32;
        pub fn flow_get(key: *const u8, klen: i32, buf: *mut u8, cap: i32, ver_out: *mut u8) -> i32;
        pub fn flow_put(key: *const u8, klen: i32, val: *const u8, vlen: i32) -> i32;
        pub fn flow_cas(key: *const u8, klen: i32, expect: i64, val: *const u8, vlen: i32) -> i32;
        pub fn flow_delete(key: *const u8, klen: i32) -> i32;
        pub fn response_write(ptr: *const u8, len: i32) -> i32;
        pub fn log(level: i32, ptr: *const u8, len: i32);
        pub fn now_ms() -> i64;
    }
}

/// The ABI marker export; the host refuses a module without it.
#[no_mangle]
pub extern "C" fn rift_abi_v1() {}

/// A non-zero ABI status returned by a flow or response import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// 1: the key is absent.
    NotFound,
    /// 2: the version did not match; nothing was written.
    CasMismatch,
    /// 3: the flow's owner cannot be reached; give up (the host answers 503).
    Unavailable,
    /// 4: a key, value or response is over its limit.
    TooLarge,
    /// 5: a pointer or length was outside memory.
    BadMemory,
    /// A status this kit does not know.
    Other(i32),
}

impl Error {
    fn from_status(st: i32) -> Result<(), Error> {
        match st {
            0 => Ok(()),
            1 => Err(Error::NotFound),
            2 => Err(Error::CasMismatch),
            3 => Err(Error::Unavailable),
            4 => Err(Error::TooLarge),
            5 => Err(Error::BadMemory),
            n => Err(Error::Other(n)),
        }
    }
}

/// Log levels, as the host numbers them.
#[derive(Clone, Copy, Debug)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

/// The decoded request envelope.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    pub method: String,
    /// The path, without the query string.
    pub path: String,
    /// Query parameters; a repeated parameter's values are joined with ",".
    pub query: Vec<(String, String)>,
    /// Headers, names as received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The scoped flow id.
    pub flow: String,
    /// The client's ip:port.
    pub request_from: String,
    /// The response being decorated (decorate calls only).
    pub response: Option<Response>,
}

impl Request {
    /// The value of header `name`, compared without regard to ASCII case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The value of query parameter `name`.
    pub fn query(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A response envelope. Status 0 means 200.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A response with a text/plain body.
    pub fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            headers: vec![(String::from("Content-Type"), String::from("text/plain"))],
            body: Vec::from(body.as_bytes()),
        }
    }

    /// A response with an application/json body.
    pub fn json(status: u16, body: Vec<u8>) -> Response {
        Response {
            status,
            headers: vec![(String::from("Content-Type"), String::from("application/json"))],
            body,
        }
    }

    /// Appends the response envelope to `out`, leaving out what the host
    /// defaults (status 0, no headers, empty body).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let n = (self.status != 0) as u64 + !self.headers.is_empty() as u64 + !self.body.is_empty() as u64;
        put_head(out, MAJ_MAP, n);
        if self.status != 0 {
            put_head(out, MAJ_UINT, 1);
            put_head(out, MAJ_UINT, self.status as u64);
        }
        if !self.headers.is_empty() {
            put_head(out, MAJ_UINT, 2);
            put_head(out, MAJ_MAP, self.headers.len() as u64);
            for (k, v) in &self.headers {
                put_text(out, k);
                put_text(out, v);
            }
        }
        if !self.body.is_empty() {
            put_head(out, MAJ_UINT, 3);
            put_head(out, MAJ_BYTES, self.body.len() as u64);
            out.extend_from_slice(&self.body);
        }
    }
}

const MAJ_UINT: u8 = 0;
const MAJ_BYTES: u8 = 2;
const MAJ_TEXT: u8 = 3;
const MAJ_ARRAY: u8 = 4;
const MAJ_MAP: u8 = 5;
const MAJ_TAG: u8 = 6;
const MAX_DEPTH: u32 = 32;

fn put_head(out: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    if n < 24 {
        out.push(m | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[m | 24, n as u8]);
    } else if n <= 0xffff {
        out.push(m | 25);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= 0xffff_ffff {
        out.push(m | 26);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn put_text(out: &mut Vec<u8>, s: &str) {
    put_head(out, MAJ_TEXT, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Why an envelope did not decode, and the byte offset where it stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub what: &'static str,
    pub offset: usize,
}

struct Decoder<'a> {
    b: &'a [u8],
    off: usize,
}

type Res<T> = Result<T, DecodeError>;

impl<'a> Decoder<'a> {
    fn fail<T>(&self, what: &'static str) -> Res<T> {
        Err(DecodeError { what, offset: self.off })
    }

    fn peek_major(&self) -> Res<u8> {
        match self.b.get(self.off) {
            Some(c) => Ok(c >> 5),
            None => self.fail("truncated"),
        }
    }

    fn head(&mut self) -> Res<(u8, u64)> {
        let ib = match self.b.get(self.off) {
            Some(c) => *c,
            None => return self.fail("truncated"),
        };
        let (major, info) = (ib >> 5, ib & 0x1f);
        let n = match info {
            0..=23 => {
                self.off += 1;
                return Ok((major, info as u64));
            }
            24 => 1,
            25 => 2,
            26 => 4,
            27 => 8,
            _ => return self.fail("indefinite length or reserved info"),
        };
        self.off += 1;
        if self.b.len() - self.off < n {
            return self.fail("truncated argument");
        }
        let mut arg = 0u64;
        for c in &self.b[self.off..self.off + n] {
            arg = arg << 8 | *c as u64;
        }
        self.off += n;
        Ok((major, arg))
    }

    fn payload(&mut self, n: u64) -> Res<&'a [u8]> {
        if n > (self.b.len() - self.off) as u64 {
            return self.fail("string past end");
        }
        let p = &self.b[self.off..self.off + n as usize];
        self.off += n as usize;
        Ok(p)
    }

    // count rejects a container longer than the input could hold before
    // anything is allocated for it.
    fn count(&self, n: u64, min_item: u64) -> Res<usize> {
        if n > (self.b.len() - self.off) as u64 / min_item {
            return self.fail("container longer than input");
        }
        Ok(n as usize)
    }

    fn text(&mut self) -> Res<String> {
        let (m, n) = self.head()?;
        if m != MAJ_TEXT {
            return self.fail("want text");
        }
        let p = self.payload(n)?;
        match core::str::from_utf8(p) {
            Ok(s) => Ok(String::from(s)),
            Err(_) => self.fail("text is not UTF-8"),
        }
    }

    fn bytes_or_text(&mut self) -> Res<Vec<u8>> {
        let (m, n) = self.head()?;
        if m != MAJ_BYTES && m != MAJ_TEXT {
            return self.fail("want bytes");
        }
        Ok(Vec::from(self.payload(n)?))
    }

    fn uint(&mut self) -> Res<u64> {
        let (m, n) = self.head()?;
        if m != MAJ_UINT {
            return self.fail("want unsigned integer");
        }
        Ok(n)
    }

    fn text_map(&mut self) -> Res<Vec<(String, String)>> {
        let (m, n) = self.head()?;
        if m != MAJ_MAP {
            return self.fail("want map");
        }
        let c = self.count(n, 2)?;
        let mut out = Vec::with_capacity(c);
        for _ in 0..c {
            let k = self.text()?;
            out.push((k, self.text()?));
        }
        Ok(out)
    }

    fn skip(&mut self, depth: u32) -> Res<()> {
        if depth > MAX_DEPTH {
            return self.fail("nested too deeply");
        }
        let (m, n) = self.head()?;
        match m {
            MAJ_BYTES | MAJ_TEXT => {
                self.payload(n)?;
            }
            MAJ_ARRAY => {
                for _ in 0..self.count(n, 1)? {
                    self.skip(depth + 1)?;
                }
            }
            MAJ_MAP => {
                for _ in 0..self.count(n, 2)? {
                    self.skip(depth + 1)?;
                    self.skip(depth + 1)?;
                }
            }
            MAJ_TAG => self.skip(depth + 1)?,
            _ => {} // integers, simple values and floats: the head was all
        }
        Ok(())
    }

    // key returns None (having skipped the key) for a key that is not an
    // unsigned integer; the caller then skips its value as unknown.
    fn key(&mut self) -> Res<Option<u64>> {
        if self.peek_major()? != MAJ_UINT {
            self.skip(0)?;
            return Ok(None);
        }
        Ok(Some(self.uint()?))
    }

    fn map_len(&mut self) -> Res<usize> {
        let (m, n) = self.head()?;
        if m != MAJ_MAP {
            return self.fail("want map");
        }
        self.count(n, 2)
    }

    fn response(&mut self) -> Res<Response> {
        let mut r = Response::default();
        for _ in 0..self.map_len()? {
            match self.key()? {
                Some(1) => {
                    let s = self.uint()?;
                    if s > 999 {
                        return self.fail("status out of range");
                    }
                    r.status = s as u16;
                }
                Some(2) => r.headers = self.text_map()?,
                Some(3) => r.body = self.bytes_or_text()?,
                _ => self.skip(1)?,
            }
        }
        Ok(r)
    }
}

/// Decodes a request envelope. Keys may come in any order and unknown keys
/// are skipped, as ABI v1 requires of a guest.
pub fn decode_request(b: &[u8]) -> Result<Request, DecodeError> {
    let mut d = Decoder { b, off: 0 };
    let mut r = Request::default();
    for _ in 0..d.map_len()? {
        match d.key()? {
            Some(1) => r.method = d.text()?,
            Some(2) => r.path = d.text()?,
            Some(3) => r.query = d.text_map()?,
            Some(4) => r.headers = d.text_map()?,
            Some(5) => r.body = d.bytes_or_text()?,
            Some(6) => r.flow = d.text()?,
            Some(7) => r.request_from = d.text()?,
            Some(8) => r.response = Some(d.response()?),
            _ => d.skip(1)?,
        }
    }
    if d.off != b.len() {
        return d.fail("trailing bytes");
    }
    Ok(r)
}

// read_growing calls read with a buffer until the data fits, growing it to
// the length the host reports; it returns the host's negative result as is.
fn read_growing(mut cap: usize, mut read: impl FnMut(&mut [u8]) -> i32) -> Result<Vec<u8>, i32> {
    loop {
        let mut buf = vec![0u8; cap];
        let n = read(&mut buf);
        if n < 0 {
            return Err(n);
        }
        if n as usize <= cap {
            buf.truncate(n as usize);
            return Ok(buf);
        }
        cap = n as usize;
    }
}

/// Reads and decodes the request of the current call; `req_len` is the
/// entry point's argument.
pub fn request(req_len: i32) -> Result<Request, DecodeError> {
    let raw = read_growing(req_len.max(0) as usize, |b| unsafe { sys::request_read(b.as_mut_ptr(), b.len() as i32) })
        .map_err(|_| DecodeError { what: "request_read failed", offset: 0 })?;
    decode_request(&raw)
}

/// The stub's config as JSON text (`null` when it has none).
pub fn config() -> Vec<u8> {
    read_growing(256, |b| unsafe { sys::config_read(b.as_mut_ptr(), b.len() as i32) }).unwrap_or_default()
}

/// Reads `key` from the request's flow: its value and version.
pub fn flow_get(key: &[u8]) -> Result<(Vec<u8>, i64), Error> {
    let mut ver = [0u8; 8];
    match read_growing(256, |b| unsafe {
        sys::flow_get(key.as_ptr(), key.len() as i32, b.as_mut_ptr(), b.len() as i32, ver.as_mut_ptr())
    }) {
        Ok(v) => Ok((v, i64::from_le_bytes(ver))),
        Err(-1) => Err(Error::NotFound),
        Err(n) => Err(Error::from_status(-n).err().unwrap_or(Error::Other(n))),
    }
}

/// Writes `key = value` unconditionally.
pub fn flow_put(key: &[u8], value: &[u8]) -> Result<(), Error> {
    Error::from_status(unsafe { sys::flow_put(key.as_ptr(), key.len() as i32, value.as_ptr(), value.len() as i32) })
}

/// Writes `key = value` only if the key's version is still `expect` (0: only
/// if absent); `Err(Error::CasMismatch)` means read again and retry.
pub fn flow_cas(key: &[u8], expect: i64, value: &[u8]) -> Result<(), Error> {
    Error::from_status(unsafe { sys::flow_cas(key.as_ptr(), key.len() as i32, expect, value.as_ptr(), value.len() as i32) })
}

/// Deletes `key`; `Err(Error::NotFound)` if it was absent.
pub fn flow_delete(key: &[u8]) -> Result<(), Error> {
    Error::from_status(unsafe { sys::flow_delete(key.as_ptr(), key.len() as i32) })
}

/// Hands the host the response envelope of the current call.
pub fn respond(r: &Response) -> Result<(), Error> {
    let mut out = Vec::with_capacity(16 + r.body.len());
    r.encode(&mut out);
    Error::from_status(unsafe { sys::response_write(out.as_ptr(), out.len() as i32) })
}

/// Writes `msg` to riftgate's log.
pub fn log(level: Level, msg: &str) {
    unsafe { sys::log(level as i32, msg.as_ptr(), msg.len() as i32) }
}

/// The host's wall clock, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    unsafe { sys::now_ms() }
}

// enter reads the request of an entry point call, logging a bad envelope.
fn enter(req_len: i32) -> Option<Request> {
    match request(req_len) {
        Ok(r) => Some(r),
        Err(e) => {
            log(Level::Error, e.what);
            None
        }
    }
}

/// Runs one `handle` call: reads the request, calls `f`, writes its
/// response. `None` writes no response, which fails the call (503 if a flow
/// call returned `Unavailable`, else 500).
pub fn serve(req_len: i32, f: fn(&Request) -> Option<Response>) -> i32 {
    let req = match enter(req_len) {
        Some(r) => r,
        None => return 3,
    };
    match f(&req) {
        Some(resp) => match respond(&resp) {
            Ok(()) => 0,
            Err(_) => 1,
        },
        None => 1,
    }
}

/// Runs one `matches` (predicate) call: 1 if `f` matches, 0 if not.
pub fn serve_match(req_len: i32, f: fn(&Request) -> bool) -> i32 {
    match enter(req_len) {
        Some(req) => f(&req) as i32,
        None => 3,
    }
}

/// Runs one `decorate` call: `f` gets the request and the response being
/// decorated, and returns `Ok(Some(new))` to replace it, `Ok(None)` to keep
/// it, or `Err` to fail the call (503 after `Error::Unavailable`, else 500).
pub fn serve_decorate(req_len: i32, f: fn(&Request, &Response) -> Result<Option<Response>, Error>) -> i32 {
    let req = match enter(req_len) {
        Some(r) => r,
        None => return 3,
    };
    let current = req.response.clone().unwrap_or_default();
    match f(&req, &current) {
        Ok(Some(resp)) => match respond(&resp) {
            Ok(()) => 0,
            Err(_) => 1,
        },
        Ok(None) => 0,
        Err(_) => 1,
    }
}

/// Exports `handle` running `fn(&Request) -> Option<Response>` through
/// [`serve`].
#[macro_export]
macro_rules! handle {
    ($f:path) => {
        #[no_mangle]
        pub extern "C" fn handle(req_len: i32) -> i32 {
            $crate::serve(req_len, $f)
        }
    };
}

/// Exports the predicate entry point `matches` running
/// `fn(&Request) -> bool` (named `predicate!` so as not to shadow
/// `core::matches!`).
#[macro_export]
macro_rules! predicate {
    ($f:path) => {
        #[no_mangle]
        pub extern "C" fn matches(req_len: i32) -> i32 {
            $crate::serve_match(req_len, $f)
        }
    };
}

/// Exports `decorate` running
/// `fn(&Request, &Response) -> Result<Option<Response>, Error>`.
#[macro_export]
macro_rules! decorate {
    ($f:path) => {
        #[no_mangle]
        pub extern "C" fn decorate(req_len: i32) -> i32 {
            $crate::serve_decorate(req_len, $f)
        }
    };
}

// Native tests of the codec: `rustc --edition 2021 --test sdk/rust/src/lib.rs`
// (make test-sdk). The host imports are never called, so the test binary
// links without them.
#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn response_golden() {
        // The example of ABI v1 section 5, byte for byte.
        let r = Response {
            status: 201,
            headers: vec![("Content-Type".to_string(), "text/plain".to_string())],
            body: b"hi".to_vec(),
        };
        let mut out = Vec::new();
        r.encode(&mut out);
        assert_eq!(out, unhex("a3 01 18 c9 02 a1 6c 43 6f 6e 74 65 6e 74 2d 54 79 70 65 6a 74 65 78 74 2f 70 6c 61 69 6e 03 42 68 69"));
        let mut empty = Vec::new();
        Response::default().encode(&mut empty);
        assert_eq!(empty, vec![0xa0]);
    }

    fn golden_request() -> Request {
        Request {
            method: "GET".into(),
            path: "/a".into(),
            query: vec![("n".into(), "x".into())],
            headers: vec![("A".into(), "b".into())],
            body: b"hi".to_vec(),
            flow: "i:f".into(),
            request_from: "1.2.3.4:5".into(),
            response: None,
        }
    }

    #[test]
    fn request_golden_any_order_unknown_keys() {
        let host = unhex("a7 01 63474554 02 622f61 03 a1 616e 6178 04 a1 6141 6162 05 426869 06 63693a66 07 69312e322e332e343a35");
        assert_eq!(decode_request(&host).unwrap(), golden_request());
        let shuffled = unhex(concat!(
            "aa 07 69312e322e332e343a35 1863 a2 01 82 01 02 02 c1 1a00000001 06 63693a66",
            "617a f93c00 05 626869 04 a1 6141 6162 03 a1 616e 6178 1864 fb3ff0000000000000 02 622f61 01 63474554"
        ));
        assert_eq!(decode_request(&shuffled).unwrap(), golden_request());
        let decorate = unhex(concat!(
            "a8 01 63474554 02 622f61 03 a1 616e 6178 04 a1 6141 6162 05 426869 06 63693a66 07 69312e322e332e343a35",
            "08 a3 01 18c9 02 a1 6c436f6e74656e742d54797065 6a746578742f706c61696e 03 426869"
        ));
        let r = decode_request(&decorate).unwrap();
        assert_eq!(r.response.unwrap().status, 201);
    }

    #[test]
    fn request_malformed() {
        for h in [
            "", "80", "a2 01 63474554", "bf ff", "a1 01 7fff", "bb ffffffffffffffff", "a1 01 78 40 41",
            "a1 01 01", "a0 00", "a1 01 62 c328", "a1 04 a1 6141 01",
        ] {
            assert!(decode_request(&unhex(h)).is_err(), "accepted {}", h);
        }
        let mut deep = unhex("a1 1863");
        deep.extend(core::iter::repeat(0x81).take(40));
        deep.push(0);
        assert!(decode_request(&deep).is_err());
    }

    #[test]
    fn request_truncations_never_panic() {
        let host = unhex("a7 01 63474554 02 622f61 03 a1 616e 6178 04 a1 6141 6162 05 426869 06 63693a66 07 69312e322e332e343a35");
        for n in 0..host.len() {
            assert!(decode_request(&host[..n]).is_err());
        }
        // Every single-byte corruption either decodes or fails cleanly.
        for i in 0..host.len() {
            for b in [0x00u8, 0x17, 0x18, 0x1b, 0x1f, 0x5f, 0x7b, 0x9f, 0xbf, 0xff] {
                let mut c = host.clone();
                c[i] = b;
                let _ = decode_request(&c);
            }
        }
    }
}
