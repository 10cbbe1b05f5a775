;; bad_startfn: its WebAssembly start function calls an import while it is
;; being instantiated, outside any call.
(module
  (import "rift_v1" "now_ms" (func $now_ms (result i64)))
  (memory (export "memory") 1)
  (func $start (drop (call $now_ms)))
  (start $start)
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32) (i32.const 0)))
