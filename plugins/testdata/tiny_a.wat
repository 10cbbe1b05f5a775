;; tiny_a: answers {1: 200}. Used for leak, swap and benchmark tests.
(module
  (import "rift_v1" "response_write" (func $response_write (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\a1\01\18\c8")
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32)
    (call $response_write (i32.const 0) (i32.const 4))))
