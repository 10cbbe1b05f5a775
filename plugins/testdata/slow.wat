;; slow: spins on now_ms for 500 ms, then answers {1: 201}.
(module
  (import "rift_v1" "response_write" (func $response_write (param i32 i32) (result i32)))
  (import "rift_v1" "now_ms" (func $now_ms (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\a1\01\18\c9")
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32)
    (local $t0 i64)
    (local.set $t0 (call $now_ms))
    (loop $spin
      (br_if $spin (i64.lt_s (i64.sub (call $now_ms) (local.get $t0)) (i64.const 500))))
    (call $response_write (i32.const 0) (i32.const 4))))
