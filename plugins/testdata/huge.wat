;; huge: hands the host a 200000-byte response and returns its status.
(module
  (import "rift_v1" "response_write" (func $response_write (param i32 i32) (result i32)))
  (memory (export "memory") 4)
  (func (export "rift_abi_v1"))
  (func (export "handle") (param i32) (result i32)
    (call $response_write (i32.const 0) (i32.const 200000))))
