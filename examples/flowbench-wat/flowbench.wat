;; flowbench-wat: the plugin host's yardstick. Each call does one flow_get
;; and one flow_put of the key "bench" and answers "ok", and nothing else:
;; no kit, no runtime, no request read, so what a call costs is what the
;; host costs (envelope, pool, wazero's call, the imports, the flow store).
;;
;; Memory map (one page):
;;   16    the key "bench"
;;   32    the value "01234567"
;;   64    flow value buffer (32 bytes)
;;   128   version out (8 bytes)
;;   256   the response envelope
(module
  (import "rift_v1" "flow_get" (func $flow_get (param i32 i32 i32 i32 i32) (result i32)))
  (import "rift_v1" "flow_put" (func $flow_put (param i32 i32 i32 i32) (result i32)))
  (import "rift_v1" "response_write" (func $response_write (param i32 i32) (result i32)))

  (memory (export "memory") 1)

  (data (i32.const 16) "bench")
  (data (i32.const 32) "01234567")
  ;; {2: {"Content-Type": "text/plain"}, 3: h'6f6b'}: 31 bytes
  (data (i32.const 256) "\a2\02\a1\6cContent-Type\6atext/plain\03\42ok")

  (func (export "rift_abi_v1"))

  (func (export "handle") (param $req_len i32) (result i32)
    (local $n i32)
    ;; -1 is "not found", the first call on a flow; any other negative
    ;; status, or a value that did not fit, fails the call.
    (local.set $n
      (call $flow_get (i32.const 16) (i32.const 5) (i32.const 64) (i32.const 32) (i32.const 128)))
    (if (i32.or (i32.lt_s (local.get $n) (i32.const -1)) (i32.gt_s (local.get $n) (i32.const 32)))
      (then (return (i32.const 1))))
    (if (call $flow_put (i32.const 16) (i32.const 5) (i32.const 32) (i32.const 8))
      (then (return (i32.const 1))))
    (if (call $response_write (i32.const 256) (i32.const 31))
      (then (return (i32.const 1))))
    (i32.const 0))
)
