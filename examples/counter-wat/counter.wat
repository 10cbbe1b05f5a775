;; counter-wat: a per-flow request counter written by hand in WAT.
;;
;; Each call reads flow key "n" (decimal text), adds one and writes it back
;; with flow_cas, retrying on a version mismatch (at most 64 times). The
;; answer is the new count as a text/plain body. The request envelope is
;; never read: a plugin pays only for the imports it calls.
;;
;; Memory map (one page):
;;   16    the key "n"
;;   64    flow value buffer (32 bytes)
;;   128   version out (8 bytes)
;;   160   digits, written backwards from 191
;;   256   the response envelope: a fixed prefix, then the body
(module
  (import "rift_v1" "flow_get" (func $flow_get (param i32 i32 i32 i32 i32) (result i32)))
  (import "rift_v1" "flow_cas" (func $flow_cas (param i32 i32 i64 i32 i32) (result i32)))
  (import "rift_v1" "response_write" (func $response_write (param i32 i32) (result i32)))

  (memory (export "memory") 1)

  (data (i32.const 16) "n")
  ;; {2: {"Content-Type": "text/plain"}, 3: <body follows>}: 28 bytes
  (data (i32.const 256) "\a2\02\a1\6cContent-Type\6atext/plain\03")

  (func (export "rift_abi_v1"))

  ;; $parse reads the decimal number of len bytes at ptr.
  (func $parse (param $ptr i32) (param $len i32) (result i64)
    (local $n i64)
    (block $done
      (loop $digit
        (br_if $done (i32.eqz (local.get $len)))
        (local.set $n
          (i64.add
            (i64.mul (local.get $n) (i64.const 10))
            (i64.extend_i32_u (i32.sub (i32.load8_u (local.get $ptr)) (i32.const 48)))))
        (local.set $ptr (i32.add (local.get $ptr) (i32.const 1)))
        (local.set $len (i32.sub (local.get $len) (i32.const 1)))
        (br $digit)))
    (local.get $n))

  ;; $format writes n in decimal ending at byte 191 and returns its start.
  (func $format (param $n i64) (result i32)
    (local $p i32)
    (local.set $p (i32.const 192))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p)
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $n) (i64.const 10)))))
      (local.set $n (i64.div_u (local.get $n) (i64.const 10)))
      (br_if $digit (i64.ne (local.get $n) (i64.const 0))))
    (local.get $p))

  (func (export "handle") (param $req_len i32) (result i32)
    (local $len i32) (local $tries i32) (local $count i64) (local $ver i64)
    (local $digits i32) (local $dlen i32) (local $st i32)
    (loop $retry
      (local.set $len
        (call $flow_get (i32.const 16) (i32.const 1) (i32.const 64) (i32.const 32) (i32.const 128)))
      (if (i32.eq (local.get $len) (i32.const -1))
        (then ;; absent: CAS with version 0 means "only if still absent"
          (local.set $count (i64.const 0))
          (local.set $ver (i64.const 0)))
        (else
          ;; an error, or a value too long to be ours: give up, no response
          (if (i32.or (i32.lt_s (local.get $len) (i32.const 0))
                      (i32.gt_s (local.get $len) (i32.const 20)))
            (then (return (i32.const 1))))
          (local.set $count (call $parse (i32.const 64) (local.get $len)))
          (local.set $ver (i64.load (i32.const 128)))))
      (local.set $count (i64.add (local.get $count) (i64.const 1)))
      (local.set $digits (call $format (local.get $count)))
      (local.set $dlen (i32.sub (i32.const 192) (local.get $digits)))
      (local.set $st
        (call $flow_cas (i32.const 16) (i32.const 1) (local.get $ver) (local.get $digits) (local.get $dlen)))
      (local.set $tries (i32.add (local.get $tries) (i32.const 1)))
      (br_if $retry (i32.and (i32.eq (local.get $st) (i32.const 2))
                             (i32.lt_u (local.get $tries) (i32.const 64)))))
    (if (i32.ne (local.get $st) (i32.const 0))
      (then (return (i32.const 1))))
    ;; body: a byte string head (length < 24), then the digits
    (i32.store8 (i32.const 284) (i32.or (i32.const 0x40) (local.get $dlen)))
    (memory.copy (i32.const 285) (local.get $digits) (local.get $dlen))
    (if (call $response_write (i32.const 256) (i32.add (i32.const 29) (local.get $dlen)))
      (then (return (i32.const 1))))
    (i32.const 0))
)
