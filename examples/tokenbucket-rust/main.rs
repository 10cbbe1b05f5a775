//! tokenbucket-rust: a per-flow token-bucket rate limiter for riftgate.
//!
//! The bucket lives in the flow as JSON text, `{"milliTokens":M,"at":T}`:
//! M is the fill in thousandths of a token (integers avoid floats), T the
//! now_ms() of the last write. A request refills the bucket for the time
//! since T, takes one token and writes back with flow_cas, retrying when
//! another request wrote first; with less than one token it answers 429
//! and writes nothing. Config: {"key": "bucket", "capacity": 5,
//! "refillPerSecond": 1} (refillPerSecond takes up to 3 decimals).
//!
//! The same limit is exported as a decorate behavior: it takes a token for
//! whatever response the stub computed and either adds
//! X-RateLimit-Remaining to it or replaces it with the 429.

use rift::{Error, Request, Response};

const MAX_TRIES: usize = 64;

struct Config {
    key: Vec<u8>,
    capacity_milli: i64,
    refill_milli_per_s: i64,
}

fn parse_config(cfg: &[u8]) -> Option<Config> {
    let key = json_string(cfg, "key").unwrap_or_else(|| b"bucket".to_vec());
    let capacity_milli = json_milli(cfg, "capacity").unwrap_or(5000);
    let refill_milli_per_s = json_milli(cfg, "refillPerSecond").unwrap_or(1000);
    if key.is_empty() || capacity_milli < 1000 || refill_milli_per_s < 0 {
        return None;
    }
    Some(Config { key, capacity_milli, refill_milli_per_s })
}

enum Outcome {
    /// A token was taken; this many whole tokens are left.
    Allowed(i64),
    /// The bucket is empty.
    Limited(Response),
}

// take takes one token from the flow's bucket. Err(None) means give up
// (a flow error), Err(Some(r)) answer r.
fn take() -> Result<Outcome, Option<Response>> {
    let cfg = match parse_config(&rift::config()) {
        Some(c) => c,
        None => return Err(Some(Response::text(500, "tokenbucket-rust: bad config"))),
    };
    for _ in 0..MAX_TRIES {
        let now = rift::now_ms();
        let (milli, at, ver) = match rift::flow_get(&cfg.key) {
            Ok((v, ver)) => match (json_milli_raw(&v, "milliTokens"), json_milli_raw(&v, "at")) {
                (Some(m), Some(t)) => (m, t, ver),
                _ => return Err(Some(Response::text(500, "tokenbucket-rust: stored bucket is malformed"))),
            },
            Err(Error::NotFound) => (cfg.capacity_milli, now, 0), // a new bucket starts full
            Err(e) => return Err(give_up(e)),
        };
        let elapsed = (now - at).max(0);
        let filled = (milli + elapsed.saturating_mul(cfg.refill_milli_per_s) / 1000).min(cfg.capacity_milli);
        if filled < 1000 {
            let mut resp = Response::json(429, b"{\"allowed\":false,\"remaining\":0}".to_vec());
            if cfg.refill_milli_per_s > 0 {
                let wait_ms = (1000 - filled) * 1000 / cfg.refill_milli_per_s;
                resp.headers.push(("Retry-After".into(), format!("{}", (wait_ms + 999) / 1000)));
            }
            return Ok(Outcome::Limited(resp));
        }
        let left = filled - 1000;
        let state = format!("{{\"milliTokens\":{},\"at\":{}}}", left, now);
        match rift::flow_cas(&cfg.key, ver, state.as_bytes()) {
            Ok(()) => return Ok(Outcome::Allowed(left / 1000)),
            Err(Error::CasMismatch) => continue,
            Err(e) => return Err(give_up(e)),
        }
    }
    Err(Some(Response::text(503, "tokenbucket-rust: too much contention on the bucket")))
}

fn limit(_req: &Request) -> Option<Response> {
    match take() {
        Ok(Outcome::Allowed(n)) => {
            let body = format!("{{\"allowed\":true,\"remaining\":{}}}", n);
            Some(Response::json(200, body.into_bytes()))
        }
        Ok(Outcome::Limited(r)) => Some(r),
        Err(r) => r,
    }
}

fn limit_response(_req: &Request, current: &Response) -> Result<Option<Response>, Error> {
    match take() {
        Ok(Outcome::Allowed(n)) => {
            let mut r = current.clone();
            r.headers.push(("X-RateLimit-Remaining".into(), format!("{}", n)));
            Ok(Some(r))
        }
        Ok(Outcome::Limited(r)) => Ok(Some(r)),
        Err(Some(r)) => Ok(Some(r)),
        Err(None) => Err(Error::Unavailable),
    }
}

// give_up writes no response: the host answers 503 for an unreachable flow
// owner and 500 for anything else.
fn give_up(e: Error) -> Option<Response> {
    rift::log(rift::Level::Warn, &format!("tokenbucket-rust: {:?}", e));
    None
}

// The config and the bucket are flat JSON objects; these few lines find one
// member's value, which is all this plugin needs (no serde offline).
fn json_value<'a>(doc: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let pat = format!("\"{}\"", name);
    let at = doc.windows(pat.len()).position(|w| w == pat.as_bytes())? + pat.len();
    let rest = &doc[at..];
    let colon = rest.iter().position(|c| !c.is_ascii_whitespace())?;
    if rest[colon] != b':' {
        return None;
    }
    let rest = &rest[colon + 1..];
    let start = rest.iter().position(|c| !c.is_ascii_whitespace())?;
    Some(&rest[start..])
}

fn json_string(doc: &[u8], name: &str) -> Option<Vec<u8>> {
    let v = json_value(doc, name)?;
    if v.first() != Some(&b'"') {
        return None;
    }
    let end = v[1..].iter().position(|c| *c == b'"' || *c == b'\\')?;
    Some(v[1..1 + end].to_vec())
}

// json_milli reads a non-negative decimal number as thousandths.
fn json_milli(doc: &[u8], name: &str) -> Option<i64> {
    let v = json_value(doc, name)?;
    let (mut n, mut frac, mut i, mut digits) = (0i64, -1i32, 0, 0);
    while i < v.len() {
        match v[i] {
            b'0'..=b'9' if frac < 3 => {
                n = n.checked_mul(10)?.checked_add((v[i] - b'0') as i64)?;
                digits += 1;
                if frac >= 0 {
                    frac += 1;
                }
            }
            b'0'..=b'9' => {}
            b'.' if frac < 0 => frac = 0,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    for _ in frac.max(0)..3 {
        n = n.checked_mul(10)?;
    }
    Some(n)
}

// json_milli_raw reads a non-negative integer as is.
fn json_milli_raw(doc: &[u8], name: &str) -> Option<i64> {
    json_milli(doc, name).map(|m| m / 1000)
}

rift::handle!(limit);
rift::decorate!(limit_response);
